"""The two full-ImageNet packages of the original workflow given nothing, or something bad, stdin closed:
one clear line each, nothing registered, an earlier install kept."""
import hashlib
import json
from pathlib import Path

import pytest

from reprokit.data.imagenet import RECORDIO_ENV, RECORDIO_TAGS, TRAIN_TAGS
from support.faults import expect, kept, one_clear_line
from support.loopback import FileServer, imagenet_train_tarball, recordio_file


def envs(cli, tags: str) -> list[dict]:
    return json.loads(cli("search", "env", f"--tags={tags}", "--add_meta", "--out=json", check=True).stdout)["lst"]


@pytest.mark.fault("settings")
@pytest.mark.parametrize("package, tags, names", [
    ("imagenet-2012-train", TRAIN_TAGS,
     ["needs a login at image-net.org", "--env.PACKAGE_URL=", "ck detect soft:dataset.imagenet.train --search_dirs="]),
    ("dataset-imagenet-2012-train-p3-ready", RECORDIO_TAGS,
     ["--env.PACKAGE_URL=", "ftp://198.162.52.84/pub", "ck detect soft:dataset.imagenet.train --search_dirs=",
      "ck install package:dataset-imagenet-2012-train-p3"]),
])
def test_without_a_url_the_install_stops_in_one_line_before_anything_is_made(bare_ck, package, tags, names):
    for given in ([], ["--env.PACKAGE_URL=  "]):
        proc = bare_ck("install", f"package:{package}", "--quiet", *given)
        expect(proc.returncode == 1, "other", f"exit {proc.returncode} for {given}")
        one_clear_line(proc.stdout + proc.stderr, *names)
        expect(envs(bare_ck, tags) == [], "other", "a refused install registered an env")
        expect(not list(Path(bare_ck.env["CK_TOOLS"]).glob(f"{package}*")), "other", "a refused install made a folder")


@pytest.mark.fault("link")
def test_a_bad_download_keeps_the_earlier_install_of_each_package(bare_ck, tmp_path):
    full = imagenet_train_tarball(tmp_path / "full")
    rec = recordio_file([0, 1, 2, 1])
    with FileServer() as server:
        server.add("ILSVRC2012_img_train.tar", full)
        server.add_truncated("cut.tar", full[:30_000], claimed=len(full))
        server.add("ftp/imagenet1k_train.rec", rec)
        server.add("ftp/imagenet1k_val.rec", rec)
        server.add("damaged/imagenet1k_train.rec", rec[:-10])  # the last record cut short
        server.add("damaged/imagenet1k_val.rec", rec)
        md5 = hashlib.md5(full).hexdigest()
        cases = [
            ("imagenet-2012-train", TRAIN_TAGS, [f"--env.PACKAGE_URL={server.url('ILSVRC2012_img_train.tar')}",
                                                 f"--env.PACKAGE_MD5={md5}"],
             [f"--env.PACKAGE_URL={server.url('cut.tar')}", f"--env.PACKAGE_MD5={md5}"],
             ["dataset: error: the download of", "was cut short", "--env.PACKAGE_URL=URL"], "train/n01440764/n01440764_10026.JPEG"),
            ("dataset-imagenet-2012-train-p3-ready", RECORDIO_TAGS, [f"--env.PACKAGE_URL={server.url('ftp/')}"],
             [f"--env.PACKAGE_URL={server.url('damaged/')}"],
             ["recordio: error:", "imagenet1k_train.rec ends inside a record", "cut short"], "recordio/imagenet1k_train.idx"),
        ]
        for package, tags, good, bad, names, sample in cases:
            proc = bare_ck("install", f"package:{package}", "--quiet", *good)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
            [before] = envs(bare_ck, tags)
            install = Path(before["meta"]["customize"]["path_install"])
            earlier = (install / sample).read_bytes()
            proc = bare_ck("install", f"package:{package}", "--quiet", *bad)
            expect(proc.returncode == 1, "other", f"{package}: exit {proc.returncode} for a bad download")
            one_clear_line(proc.stdout + proc.stderr, *names)
            kept(install / sample, earlier)
            [after] = envs(bare_ck, tags)
            expect(after["meta"] == before["meta"], "data-lost", f"{package}: the registration changed")
            expect(sorted(p.name for p in install.iterdir()) == ["ck-install.json", sample.split("/")[0]], "other",
                   f"{package}: leftovers in {install}: {sorted(p.name for p in install.iterdir())}")
    assert envs(bare_ck, RECORDIO_TAGS)[0]["meta"]["env"][f"{RECORDIO_ENV}_IMAGES"] == "4"
