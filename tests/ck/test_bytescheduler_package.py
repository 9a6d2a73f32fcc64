"""`ck install package:bytescheduler-github`: ByteScheduler from its real sources (byteps, branch bytescheduler,
served locally: tests/support/bytescheduler.py), our three patches applied, installed for the stock MXNet
engine with its pins, checked in the engine's interpreter; an unpatched one is refused in one line."""
import json
import subprocess
from pathlib import Path

import pytest

from reprokit.core.shipping import stage, wire_files
from support.bytescheduler import ensure_installed, install, source_url
from support.ckcli import REPO_ROOT, own_ck

PATCHES = sorted(p.name for p in (REPO_ROOT / "package" / "bytescheduler-github" / "patches").glob("*.patch"))


def engine_python(ck) -> str:
    found = json.loads(ck("search", "env", "--tags=lib,mxnet", "--add_meta", "--out=json", check=True).stdout)["lst"]
    return found[0]["meta"]["env"]["CK_ENV_LIB_MXNET_PYTHON"]


def in_engine(python: str, code: str, cwd: Path) -> str:
    """``code`` in the engine's interpreter as a run starts it (nothing on PYTHONPATH: the .pth file must do)."""
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                         cwd=cwd, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_installs_from_its_sources_with_our_patches_for_the_engine(ck, tmp_path):
    variables = ensure_installed(ck)
    site = Path(variables["CK_ENV_LIB_BYTESCHEDULER"])
    head = subprocess.run(["git", "ls-remote", source_url(), "refs/heads/bytescheduler"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL).stdout.split()[0]
    assert variables["CK_ENV_LIB_BYTESCHEDULER_COMMIT"] == head
    manifest = json.loads((site / "bytescheduler.reprokit.json").read_text())
    assert manifest["patches"] == PATCHES and len(PATCHES) == 3 and manifest["commit"] == head
    assert not list(site.glob("bytescheduler/**/*.so"))  # no C++ extension built
    assert not (site / "test").exists()  # their test/ folder is not installed as a top-level package
    # The engine's own interpreter imports it through the .pth file, patched, with its pins and its numpy kept.
    python = engine_python(ck)
    program = str(REPO_ROOT / "program" / "p3")
    stage(wire_files(), tmp_path)  # bytescheduler_kv imports reprokit.wire, shipped beside the scripts as a run ships it
    found = json.loads(in_engine(python, (
        f"import json, sys; sys.path.insert(0, {program!r}); import bytescheduler_kv, numpy, bayes_opt, mxnet; "
        "print(json.dumps({**bytescheduler_kv.check_install(), 'numpy': numpy.__version__, "
        "'bayes_opt': bayes_opt.__version__, 'mxnet': mxnet.__version__}))"), tmp_path))
    assert found["path"] == str(site / "bytescheduler")
    assert (found["hook"], found["credit_tuning"], found["commit"], found["patches"]) == ("ctypes", 0, head, PATCHES)
    assert (found["numpy"], found["bayes_opt"], found["mxnet"]) == ("1.23.5", "1.5.0", "1.9.1")


@pytest.mark.parametrize("left_out, named", [
    ("0001-engine-hook-through-the-c-api.patch", "C++ engine hook c_lib"),
    ("0002-schedule-pushpull-and-broadcast.patch", "does not schedule pushpull or broadcast"),
    ("0003-credit-tuning-off-by-default.patch", "tunes its credit by default"),
])
def test_an_unpatched_scheduler_is_refused_in_one_line(ck, tmp_path, left_out, named):
    """Each patch left out, the install fails at its check, naming the patch; nothing is registered."""
    bare = own_ck(tmp_path / "ck", engine_from=ck)
    proc = install(bare, "--env.BYTESCHEDULER_PATCHES=" + ",".join(p for p in PATCHES if p != left_out))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    [error] = [line for line in output.splitlines() if line.startswith("bytescheduler: error:")]
    assert "step check failed" in error and "unpatched ByteScheduler" in error and named in error, output[-3000:]
    assert left_out in error and "Traceback" not in output
    assert json.loads(bare("search", "env", "--tags=lib,bytescheduler", "--out=json", check=True).stdout)["lst"] == []
