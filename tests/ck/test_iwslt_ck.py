"""IWSLT15 en-vi through the real ck CLI: both packages, their failure paths, and a Sockeye run that reads one.

Corpus envs change what later Sockeye runs read, so installs go to `bare_ck` or
to this module's own CK, never to the shared session fixture `ck`.
"""
import json
from pathlib import Path

import pytest

from reprokit.data.iwslt import ENV, FILES, TAGS, make_synthetic
from support.ckcli import CkCli, own_ck
from support.loopback import FileServer


def envs(cli: CkCli) -> list[dict]:
    return json.loads(cli("search", "env", f"--tags={TAGS}", "--add_meta", "--out=json", check=True).stdout)["lst"]


@pytest.fixture
def stanford(tmp_path):
    """A loopback stand-in for nlp.stanford.edu's iwslt15.en-vi/ folder, serving a generated corpus."""
    corpus = Path(make_synthetic(tmp_path / "served", train_pairs=40).folder)
    with FileServer() as server:
        for name in FILES:
            server.add(f"iwslt15.en-vi/{name}", (corpus / name).read_bytes(), "text/plain")
        yield server


def test_the_corpus_package_downloads_every_file_from_a_loopback_stand_in_for_stanford(bare_ck, stanford):
    proc = bare_ck("install", "package:dataset-iwslt15-en-vi", f"--env.PACKAGE_URL={stanford.url('iwslt15.en-vi/')}",
                   "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [env] = envs(bare_ck)
    variables = env["meta"]["env"]
    assert (variables[f"{ENV}_KIND"], variables[f"{ENV}_PAIRS"]) == ("iwslt15", "40")
    assert sorted(p.name for p in Path(variables[ENV]).iterdir() if p.name in FILES) == sorted(FILES)


def test_a_missing_file_fails_the_install_in_one_line_and_keeps_the_earlier_one(bare_ck, stanford):
    url = stanford.url("iwslt15.en-vi/")
    bare_ck("install", "package:dataset-iwslt15-en-vi", f"--env.PACKAGE_URL={url}", "--quiet", check=True)
    [before] = envs(bare_ck)
    train_vi = Path(before["meta"]["env"][ENV]) / "train.vi"
    kept = train_vi.read_bytes()
    del stanford.files["iwslt15.en-vi/tst2013.vi"]
    proc = bare_ck("install", "package:dataset-iwslt15-en-vi", f"--env.PACKAGE_URL={url}", "--quiet")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"iwslt15: error: cannot download {url}tst2013.vi: HTTP 404 Not Found" in output and "Traceback" not in output
    assert [e["data_uid"] for e in envs(bare_ck)] == [before["data_uid"]] and train_vi.read_bytes() == kept


def test_the_synthetic_corpus_package_registers_a_corpus_tagged_synthetic(bare_ck):
    bare_ck("install", "package:dataset-iwslt15-en-vi-synthetic", "--env.TRAIN_PAIRS=60", "--quiet", check=True)
    [env] = envs(bare_ck)
    assert "synthetic" in env["meta"]["tags"]
    assert (env["meta"]["env"][f"{ENV}_KIND"], env["meta"]["env"][f"{ENV}_PAIRS"]) == ("iwslt15-synthetic", "60")


def test_detect_registers_an_existing_corpus_folder(bare_ck, tmp_path):
    corpus = make_synthetic(tmp_path / "data", train_pairs=30)
    bare_ck("detect", "soft:dataset.iwslt15.en-vi", f"--search_dirs={tmp_path / 'data'}", "--quiet", check=True)
    [env] = envs(bare_ck)
    assert env["meta"]["env"][ENV] == corpus.folder and env["meta"]["env"][f"{ENV}_KIND"] == "iwslt15-synthetic"


def test_a_sockeye_run_reads_the_registered_corpus_and_says_so(ck, tmp_path):
    """Own CK with the session's engine (Sockeye already on its path) and a registered corpus."""
    cli = own_ck(tmp_path / "ck", engine_from=ck)
    [sockeye] = json.loads(ck("search", "env", "--tags=lib,sockeye", "--add_meta", "--out=json", check=True).stdout)["lst"]
    site = Path(sockeye["meta"]["env"]["CK_ENV_LIB_SOCKEYE"])
    cli("detect", "soft:lib.sockeye", f"--search_dirs={site.parent}", "--quiet", check=True)
    [detected] = json.loads(cli("search", "env", "--tags=lib,sockeye", "--add_meta", "--out=json", check=True).stdout)["lst"]
    assert detected["meta"]["env"]["CK_ENV_LIB_SOCKEYE"] == str(site)
    cli("install", "package:dataset-iwslt15-en-vi-synthetic", "--env.TRAIN_PAIRS=200", "--quiet", check=True)
    [corpus] = envs(cli)
    run_dir = tmp_path / "run"
    proc, out = cli.run_p3(run_dir, "--cmd_key=sockeye", "--env.DATA=iwslt15", "--env.BATCH_SIZE=8", "--env.NUM_BATCHES=7",
                           "--env.DISP_BATCHES=2")
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert proc.returncode == 0 and result["run_success"], proc.stdout[-3000:]
    assert result["data"] == "iwslt15-synthetic"
    spec = json.loads((run_dir / "p3-run.json").read_text())
    command = spec["plan"]["command"]
    assert command[command.index("--data-dir") + 1] == corpus["meta"]["env"][ENV]
    assert "corpus" not in {p.name for p in (run_dir / "sockeye-worker-0").iterdir()}  # nothing generated

    # A batch larger than the corpus (each Sockeye worker reads all of it) is refused before any role starts.
    small_dir = tmp_path / "small"
    proc, _ = cli.run_p3(small_dir, "--cmd_key=sockeye", "--env.DATA=iwslt15", "--env.BATCH_SIZE=300")
    [line] = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("p3: error:")]
    assert proc.returncode == 2 and "holds 200 sentence pairs fewer than one batch of 300 per worker" in line
    assert not (small_dir / "logs").exists()
