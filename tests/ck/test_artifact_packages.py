"""`ck install package:sysml19-p3-github|-zenodo|-baseline-github` against stand-ins for GitHub and Zenodo.

GitHub and Zenodo are unreachable here: a local git repository and a zip served
by a loopback HTTP server stand in for them (tests/artifact_standin.py), so the
real recipe runs end to end: clone -n and checkout or download, checksum, unzip,
Sockeye shipped to the baseline, our patches applied, make, pip install into the
artifact's own prefix, import check, registration.
"""
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from reprokit.engines.artifact.config import detect_cuda, patches_of
from support.artifact_standin import LEAN, artifact_envs, make_git_repository, make_zip, standin_settings, write_patches
from support.ckcli import REPO_ROOT, CkCli, own_ck
from support.loopback import FileServer


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    root = tmp_path_factory.mktemp("standin")
    commits = make_git_repository(root / "p3.git")
    patch_names = write_patches(root / "patches")
    top = make_zip(root / "p3.git", commits["master"], root / "p3-v1.3.zip")
    body = (root / "p3-v1.3.zip").read_bytes()
    with FileServer() as server:  # stands in for Zenodo
        server.add("p3-v1.3.zip", body, "application/zip")
        server.add_truncated("truncated/p3-v1.3.zip", body[: len(body) // 2], claimed=len(body))
        url = server.url("")[:-1]
        yield {"repo": str(root / "p3.git"), "commits": commits, "url": url, "top": top,
               "md5": hashlib.md5(body).hexdigest(), "patches": str(root / "patches"), "patch_names": patch_names}


def settings(standin, package: str) -> list[str]:
    return standin_settings(Path(standin["repo"]), Path(standin["patches"]), package)


@pytest.fixture(scope="module")
def artifact_ck(tmp_path_factory) -> CkCli:
    """A CK of its own: registered artifact builds change which engine later runs use."""
    return own_ck(tmp_path_factory.mktemp("ck-artifact"))


def install(ck: CkCli, package: str, *env: str):
    return ck("install", f"package:{package}", "--quiet", *env, timeout=900)


def build_info(python: str) -> dict:
    out = subprocess.run([python, "-c", "import json, mxnet; print(json.dumps(mxnet.build_info()))"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_failed_in_one_line(proc, step: str) -> str:
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    errors = [line for line in output.splitlines() if line.startswith("artifact: error:")]
    assert len(errors) == 1 and f"step {step} failed" in errors[0], output[-3000:]
    assert "Traceback" not in output
    return errors[0]


@pytest.fixture(scope="module")
def github_install(artifact_ck, standin):
    proc = install(artifact_ck, "sysml19-p3-github", *settings(standin, "sysml19-p3-github"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [variables] = [v for v in artifact_envs(artifact_ck).values() if v["CK_ENV_TOOL_SYSML19_P3_BUILD"] == "p3"]
    return variables


def test_github_package_clones_builds_and_registers_the_p3_build(artifact_ck, standin, github_install):
    variables = github_install
    assert variables["CK_ENV_TOOL_SYSML19_P3_COMMIT"] == standin["commits"]["master"]
    tree = Path(variables["CK_ENV_TOOL_SYSML19_P3"])
    assert (tree / "example/image-classification/train_imagenet.py").exists()
    assert tree.is_relative_to(artifact_ck.env["CK_TOOLS"])
    python = variables["CK_ENV_TOOL_SYSML19_P3_PYTHON"]
    info = build_info(python)
    assert info["build"] == "p3"
    # The library the installed package loads is the one make compiled, with the seed's flags.
    assert Path(info["library"]).is_relative_to(Path(python).parent.parent)
    cuda = detect_cuda(os.environ)
    assert info["flags"]["USE_CUDA"] == ("1" if cuda else "0") and info["cuda_compiled"] == bool(cuda)
    assert variables["CK_ENV_TOOL_SYSML19_P3_CUDA"] == ("1" if cuda else "0")
    assert {k: info["flags"][k] for k in ("USE_BLAS", "USE_OPENCV", "USE_DIST_KVSTORE")} == \
        {"USE_BLAS": "openblas", "USE_OPENCV": "1", "USE_DIST_KVSTORE": "1"}
    # The default python dependencies are in the artifact's own prefix, not the framework's.
    numpy = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    assert numpy.stdout.strip() == "1.23.5"
    # Our patches were applied to the built tree, and the manifest lists them.
    manifest = json.loads(Path(variables["CK_ENV_TOOL_SYSML19_P3_MANIFEST"]).read_text())
    assert manifest["patches"] == standin["patch_names"]
    assert "--benchmark-batches" in (tree / "example/image-classification/common/data.py").read_text()
    assert "SOCKEYE_MEASURE_SPEED_EVERY" in (tree / "example/sockeye/source/sockeye/constants.py").read_text()


def test_packages_carry_our_patches_and_the_original_zenodo_address():
    for package in ("sysml19-p3-github", "sysml19-p3-zenodo", "sysml19-p3-baseline-github"):
        install_env = json.loads((REPO_ROOT / "package" / package / ".cm" / "meta.json").read_text())
        names = [p.name for p in patches_of({**install_env["customize"]["install_env"],
                                             "ORIGINAL_PACKAGE_DIR": str(REPO_ROOT / "package" / package)})]
        assert any("image-benchmark-batches" in n for n in names) and any("sockeye-measure-speed" in n for n in names)
        assert ("0003-ps-lite-stop-sender-thread.patch" in names) == (package != "sysml19-p3-baseline-github")
    meta = json.loads((REPO_ROOT / "package/sysml19-p3-zenodo/.cm/meta.json").read_text())
    assert meta["customize"]["install_env"]["PACKAGE_URL"] == \
        "https://zenodo.org/record/2549852/files/anandj91/p3-v1.3.zip"
    baseline = json.loads((REPO_ROOT / "package/sysml19-p3-baseline-github/.cm/meta.json").read_text())
    env = baseline["customize"]["install_env"]
    assert (env["SOCKEYE_URL"], env["SOCKEYE_BRANCH"]) == ("https://github.com/anandj91/p3", "baseline")


def test_baseline_package_builds_the_baseline_branch(artifact_ck, standin, github_install):
    proc = install(artifact_ck, "sysml19-p3-baseline-github", *settings(standin, "sysml19-p3-baseline-github"),
                   "--env.USE_CUDA=0", *LEAN)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    builds = {v["CK_ENV_TOOL_SYSML19_P3_BUILD"]: v for v in artifact_envs(artifact_ck).values()}
    assert set(builds) == {"p3", "baseline"}
    baseline = builds["baseline"]
    assert baseline["CK_ENV_TOOL_SYSML19_P3_COMMIT"] == standin["commits"]["anand-baseline"]
    info = build_info(baseline["CK_ENV_TOOL_SYSML19_P3_PYTHON"])
    assert info["build"] == "baseline" and info["flags"]["USE_CUDA"] == "0" and not info["cuda_compiled"]
    assert baseline["CK_ENV_TOOL_SYSML19_P3"] != builds["p3"]["CK_ENV_TOOL_SYSML19_P3"]
    # anand-mxnet's baseline has no example/sockeye: shipped from the p3 repository's baseline branch, then patched.
    manifest = json.loads(Path(baseline["CK_ENV_TOOL_SYSML19_P3_MANIFEST"]).read_text())
    assert manifest["sockeye"]["commit"] == standin["commits"]["baseline"]
    tree = Path(baseline["CK_ENV_TOOL_SYSML19_P3"])
    assert "SOCKEYE_MEASURE_SPEED_EVERY" in (tree / "example/sockeye/source/sockeye/constants.py").read_text()
    assert manifest["patches"] == standin["patch_names"]


@pytest.fixture(scope="module")
def zenodo_install(artifact_ck, standin):
    proc = install(artifact_ck, "sysml19-p3-zenodo", f"--env.PACKAGE_URL={standin['url']}/p3-v1.3.zip",
                   f"--env.ARTIFACT_PATCH_DIR={standin['patches']}",
                   f"--env.PACKAGE_MD5={standin['md5']}", f"--env.PACKAGE_TOP_DIR={standin['top']}",
                   "--env.USE_CUDA=0", *LEAN)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "md5 verified" in proc.stdout
    [(uid, variables)] = [(u, v) for u, v in artifact_envs(artifact_ck).items()
                          if "sysml19-p3-zenodo" in v["CK_ENV_TOOL_SYSML19_P3"]]
    return uid, variables


def test_zenodo_package_downloads_verifies_and_unzips_over_loopback(standin, zenodo_install):
    _, variables = zenodo_install
    # The commit comes from GitHub's archive naming of the top folder (anandj91-p3-c647954 for v1.3).
    assert variables["CK_ENV_TOOL_SYSML19_P3_COMMIT"] == standin["commits"]["master"][:7]
    assert build_info(variables["CK_ENV_TOOL_SYSML19_P3_PYTHON"])["build"] == "p3"
    # Unzipping kept the executable bits.
    train = Path(variables["CK_ENV_TOOL_SYSML19_P3"]) / "example/image-classification/train_imagenet.py"
    assert os.access(train, os.X_OK)


def manifest_of(variables: dict) -> str:
    return Path(variables["CK_ENV_TOOL_SYSML19_P3_MANIFEST"]).read_text()


@pytest.mark.parametrize("bad_download, step, message", [
    (["--env.PACKAGE_MD5=" + "0" * 32], "fetch", "checksum mismatch"),
    (["--env.PACKAGE_URL={url}/truncated/p3-v1.3.zip"], "fetch", "cut short"),
    (["--env.PACKAGE_URL={url}/no-such-file.zip"], "fetch", "HTTP 404"),
])
def test_bad_download_fails_and_keeps_the_earlier_install(artifact_ck, standin, zenodo_install, bad_download, step,
                                                          message):
    uid, variables = zenodo_install
    before_envs, before_manifest = artifact_envs(artifact_ck), manifest_of(variables)
    env = [a.format(url=standin["url"]) for a in bad_download]
    defaults = {"--env.PACKAGE_URL": f"{standin['url']}/p3-v1.3.zip", "--env.PACKAGE_MD5": standin["md5"]}
    given = {a.split("=", 1)[0] for a in env}
    args = env + [f"{k}={v}" for k, v in defaults.items() if k not in given]
    error = assert_failed_in_one_line(install(artifact_ck, "sysml19-p3-zenodo", "--env.USE_CUDA=0", *LEAN, *args,
                                              f"--env.ARTIFACT_PATCH_DIR={standin['patches']}"), step)
    assert message in error
    assert artifact_envs(artifact_ck) == before_envs
    assert manifest_of(variables) == before_manifest
    assert build_info(variables["CK_ENV_TOOL_SYSML19_P3_PYTHON"])["build"] == "p3"


@pytest.mark.parametrize("bad_source, step, message", [
    (["--env.PACKAGE_URL={root}/no-such-repo.git"], "fetch", "does not exist"),
    (["--env.PACKAGE_URL={repo}", "--env.PACKAGE_BRANCH=broken"], "build", "make exited with code"),
    (["--env.PACKAGE_URL={repo}", "--env.PACKAGE_COMMIT=0123456789abcdef"], "fetch", "git exited"),
    # The real package's patches are for the real tree: on the stand-in the first one does not apply.
    (["--env.PACKAGE_URL={repo}", "--env.ARTIFACT_PATCH_DIR={real_patches}"], "patch", "git exited with code 1"),
])
def test_failed_clone_or_build_keeps_the_earlier_install(artifact_ck, standin, github_install, bad_source, step,
                                                         message):
    before_envs, before_manifest = artifact_envs(artifact_ck), manifest_of(github_install)
    args = [a.format(repo=standin["repo"], root=Path(standin["repo"]).parent,
                     real_patches=REPO_ROOT / "package/sysml19-p3-github/patches") for a in bad_source]
    if not any(a.startswith("--env.ARTIFACT_PATCH_DIR=") for a in args):
        args.append(f"--env.ARTIFACT_PATCH_DIR={standin['patches']}")
    error = assert_failed_in_one_line(install(artifact_ck, "sysml19-p3-github", "--env.USE_CUDA=0", *LEAN, *args), step)
    assert message in error
    assert artifact_envs(artifact_ck) == before_envs
    assert manifest_of(github_install) == before_manifest
    assert build_info(github_install["CK_ENV_TOOL_SYSML19_P3_PYTHON"])["build"] == "p3"


def test_failed_first_install_registers_nothing(bare_ck, standin):
    proc = install(bare_ck, "sysml19-p3-baseline-github", *settings(standin, "sysml19-p3-baseline-github"),
                   "--env.PACKAGE_BRANCH=no-such-branch", "--env.USE_CUDA=0", *LEAN)
    assert_failed_in_one_line(proc, "fetch")
    assert artifact_envs(bare_ck) == {}
    installed = list(Path(bare_ck.env["CK_TOOLS"]).glob("sysml19-p3-baseline-github*/artifact*"))
    assert installed == []


def test_a_second_install_rebuilds_in_place_with_one_registration(artifact_ck, standin, github_install):
    before = {uid: v for uid, v in artifact_envs(artifact_ck).items() if v["CK_ENV_TOOL_SYSML19_P3_BUILD"] == "p3"
              and "sysml19-p3-github" in v["CK_ENV_TOOL_SYSML19_P3"]}
    [(uid, variables)] = before.items()
    install_dir = Path(variables["CK_ENV_TOOL_SYSML19_P3"]).parent.parent
    listing = sorted(p.name for p in install_dir.iterdir())
    proc = install(artifact_ck, "sysml19-p3-github", *settings(standin, "sysml19-p3-github"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    after = {u: v for u, v in artifact_envs(artifact_ck).items() if "sysml19-p3-github" in v["CK_ENV_TOOL_SYSML19_P3"]
             and v["CK_ENV_TOOL_SYSML19_P3_BUILD"] == "p3"}
    assert list(after) == [uid] and after[uid]["CK_ENV_TOOL_SYSML19_P3"] == variables["CK_ENV_TOOL_SYSML19_P3"]
    assert sorted(p.name for p in install_dir.iterdir()) == listing  # nothing nested, nothing left over
    assert not (Path(variables["CK_ENV_TOOL_SYSML19_P3"]).parent / "artifact").exists()
    assert build_info(after[uid]["CK_ENV_TOOL_SYSML19_P3_PYTHON"])["build"] == "p3"
