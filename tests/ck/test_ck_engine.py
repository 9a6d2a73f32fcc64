"""The MXNet engine: installed by `ck install` into its own prefix, found again by `ck detect`."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from support.ckcli import CkCli, bootstrap


def engine_envs(ck):
    found = json.loads(ck("search", "env", "--tags=lib,mxnet", "--add_meta", "--out=json", check=True).stdout)
    return found["lst"]


def test_engine_is_installed_in_its_own_prefix_under_ck_tools(ck):
    [env] = engine_envs(ck)
    variables = env["meta"]["env"]
    python = Path(variables["CK_ENV_LIB_MXNET_PYTHON"])
    assert python.exists()
    assert Path(variables["CK_ENV_LIB_MXNET"]).is_relative_to(ck.env["CK_TOOLS"])
    versions = subprocess.run([str(python), "-c", "import mxnet, numpy; print(mxnet.__version__, numpy.__version__)"],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert versions.stdout.split() == ["1.9.1", "1.23.5"]
    assert env["meta"]["customize"]["version"] == "1.9.1"
    # ...and never in the framework's own environment.
    assert importlib.util.find_spec("mxnet") is None


def test_second_bootstrap_reuses_the_installed_engine(ck):
    before = [e["data_uid"] for e in engine_envs(ck)]
    bootstrap(ck)
    assert [e["data_uid"] for e in engine_envs(ck)] == before


def test_detect_registers_an_existing_installation(ck, bare_ck):
    [installed] = engine_envs(ck)
    prefix = installed["meta"]["env"]["CK_ENV_LIB_MXNET"]
    proc = bare_ck("detect", "soft:lib.mxnet", f"--search_dirs={prefix}", "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [detected] = engine_envs(bare_ck)
    assert detected["meta"]["env"]["CK_ENV_LIB_MXNET_PYTHON"] == installed["meta"]["env"]["CK_ENV_LIB_MXNET_PYTHON"]
    assert detected["meta"]["customize"]["version"] == "1.9.1"


def test_detect_finding_nothing_says_so_in_one_line(bare_ck, tmp_path):
    proc = bare_ck("detect", "soft:lib.mxnet", f"--search_dirs={tmp_path}", "--quiet", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "no MXNet engine (libmxnet.so) found in the searched folders" in output
    assert "ck install package:lib-mxnet --quiet" in output
    assert "Traceback" not in output
    assert engine_envs(bare_ck) == []


def test_a_failed_engine_install_ends_with_our_line_naming_the_step_and_registers_nothing(tmp_path):
    """As `make setup` leaves CK: pip's own error, then our line last (not CK's `package installation failed!`),
    and no half-built prefix or env entry left behind."""
    cli = CkCli(tmp_path / "ck")
    setup = subprocess.run([sys.executable, "-m", "reprokit.bootstrap", "--repo-only"], env=cli.env, cwd=tmp_path,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    run = cli.popen("install", "package:lib-mxnet", "--env.MXNET_VERSION=0.0.77", "--quiet")
    output, _ = run.communicate(timeout=600)
    assert run.returncode == 1, output
    assert "No matching distribution found for mxnet==0.0.77" in output  # pip's own message stays
    last = [line for line in output.splitlines() if line.strip()][-1]
    assert last.startswith("lib-mxnet: error: pip install mxnet==0.0.77 numpy=="), output[-2000:]
    assert last.endswith("fix that and run ck install package:lib-mxnet again (pip's index: pip config list)")
    assert "CK error" not in output and "Traceback" not in output
    assert engine_envs(cli) == []
    assert not list(Path(cli.env["CK_TOOLS"]).glob("lib-mxnet*/prefix*"))
