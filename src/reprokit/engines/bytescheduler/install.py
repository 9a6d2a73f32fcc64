"""ByteScheduler (SOSP'19) for the stock MXNet engine: the install ``ck install package:bytescheduler-github`` runs.

    python -m reprokit.engines.bytescheduler install     # settings from the environment, as CK sets it

ByteScheduler lives only on the ``bytescheduler`` branch of bytedance/byteps. The steps, each named in the log
and in a failure (the artifact installer's: ``engines.artifact.install``):

- fetch: ``git clone -n`` of PACKAGE_URL (a URL, or a local clone when GitHub is out of reach), then
  ``git checkout`` of PACKAGE_BRANCH or PACKAGE_COMMIT;
- patch: our patches (the package's ``patches/``, one file each, their reasons in its README), ``git apply``;
- python-package: pip into a folder of its own (``site-packages``), with the engine's interpreter, without
  dependencies: the patched ``bytescheduler/`` and BYTESCHEDULER_PIP_PACKAGES, pinned (bayesian-optimization
  below 2, which its search.py needs, and what that needs at versions that keep the engine's numpy 1.23.5);
  no C++ extension is built (patch 0001);
- check: the engine's interpreter imports it from there, and ``bytescheduler_kv.check_install`` (program/p3,
  the same check every run makes) finds each patch's effect; the engine's numpy is still NUMPY_VERSION;
- then the folder is swapped in, and a .pth file in the engine's prefix puts it on the engine's path.

A failed step leaves an earlier install as it was.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from reprokit.core.errors import UserError
from reprokit.core.paths import PROGRAM_DIR, SRC_DIR
from reprokit.engines.artifact.config import GitSource, patches_of
from reprokit.engines.artifact.install import (
    PIP_TIMEOUT_S,
    STEP_TIMEOUT_S,
    InstallError,
    Steps,
    apply_patches,
    fetch_git,
)
from reprokit.wire import bytescheduler_line  # the engine side's names (MANIFEST, PACKAGE_HINT), one copy

SITE = "site-packages"  # INSTALL_DIR/site-packages: bytescheduler and its pinned dependencies
STAGING = "site-packages.partial"
INSTALL_LOG = "install.log"
PTH_FILE = "ck-lib-bytescheduler.pth"  # in the engine's site-packages: names SITE
SOURCE_DIR = "bytescheduler"  # the package's folder in the byteps tree (its setup.py)
PATCH_PREFIX = "BYTESCHEDULER"  # BYTESCHEDULER_PATCHES, BYTESCHEDULER_PATCH_DIR (engines.artifact.config.patches_of)
# Their setup.py's find_packages(exclude=('tests',)) also installs their test/ folder as a top-level package
# `test`, the name of Python's own test package: it is removed.
STRAY_PACKAGES = ("test",)
CHECK_TIMEOUT_S = 300
PACKAGE_HINT = bytescheduler_line.PACKAGE_HINT


@dataclass(frozen=True)
class Request:
    install_dir: Path
    source: GitSource
    python: str  # the engine's interpreter
    pip_packages: list[str]
    numpy_version: str  # the engine's numpy, which must stay
    package: str = ""
    patches: list[Path] = field(default_factory=list)


def request_from_env(env: Mapping[str, str]) -> Request:
    """The settings the CK package hands over (install_env, --env.NAME=VALUE on `ck install`, the MXNet dependency)."""
    install_dir = str(env.get("INSTALL_DIR", "")).strip()
    if not install_dir:
        raise UserError("INSTALL_DIR is empty: refusing to install (check the os entry's env_set)")
    python = str(env.get("CK_ENV_LIB_MXNET_PYTHON", "")).strip()
    if not python or not os.path.exists(python):
        raise UserError("the MXNet engine is not resolved (CK_ENV_LIB_MXNET_PYTHON); install it with: "
                        "ck install package:lib-mxnet --quiet")
    url = str(env.get("PACKAGE_URL", "")).strip()
    if not url:
        raise UserError("PACKAGE_URL is empty; give byteps' location with --env.PACKAGE_URL=URL (a local clone too)")
    source = GitSource(url, str(env.get("PACKAGE_BRANCH", "")).strip(), str(env.get("PACKAGE_COMMIT", "")).strip())
    numpy = str(env.get("NUMPY_VERSION", "")).strip()
    if not numpy:
        raise UserError("NUMPY_VERSION is empty (set by the package's meta.json): the engine's numpy to keep")
    return Request(Path(install_dir), source, python, str(env.get("BYTESCHEDULER_PIP_PACKAGES", "")).split(), numpy,
                   str(env.get("PACKAGE_NAME", "")).strip(), patches_of(env, PATCH_PREFIX))


CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path[:0] = sys.argv[2:4]  # program/p3, and src for reprokit.wire, as a run ships them
import numpy, bytescheduler_kv
try:
    found = bytescheduler_kv.check_install()
except bytescheduler_kv.SchedulerError as exc:
    print(json.dumps({"refused": str(exc)}))
    sys.exit(0)
print(json.dumps({**found, "numpy": numpy.__version__, "numpy_path": numpy.__file__}))
"""


def check(python: str, site: Path, steps: Steps) -> dict[str, Any]:
    """The engine's interpreter imports bytescheduler from ``site`` with each patch's effect, and keeps its numpy."""
    workdir = site.parent / "check"  # bytescheduler's import writes ByteScheduler.log into the working folder
    workdir.mkdir(exist_ok=True)
    try:
        out = steps.run("check", [python, "-c", CHECK, str(site), str(PROGRAM_DIR), str(SRC_DIR)], workdir,
                        CHECK_TIMEOUT_S)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    found: dict[str, Any] = json.loads(out.splitlines()[-1])
    if "refused" in found:
        raise InstallError(f"step check failed: {found['refused']}; log: {steps.log_path}")
    return found


def engine_site(python: str) -> Path:
    """The engine's own site-packages (where the .pth file goes)."""
    try:
        out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=STEP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"step pth failed: cannot run {python}: {exc}") from None
    if out.returncode != 0:
        raise InstallError(f"step pth failed: {python} exited with code {out.returncode}")
    return Path(out.stdout.strip().splitlines()[-1])


def install(request: Request, console: TextIO = sys.stdout) -> Path:
    """Fetch, patch, pip into a staging folder, check; swap in only when every step worked. Returns the site folder."""
    install_dir = request.install_dir
    install_dir.mkdir(parents=True, exist_ok=True)
    staging = install_dir / STAGING
    work = install_dir / "work"
    final, old = install_dir / SITE, install_dir / f"{SITE}.old"
    for folder in (staging, work):
        shutil.rmtree(folder, ignore_errors=True)
    staging.mkdir()
    work.mkdir()
    steps = Steps(install_dir / INSTALL_LOG, console, label="bytescheduler")
    try:
        tree = work / "byteps"
        # No submodules: byteps' 3rdparty/ps-lite is BytePS', which ByteScheduler does not use.
        commit, missing = fetch_git(request.source, tree, steps, submodules=False)
        if not (tree / SOURCE_DIR / "setup.py").is_file():
            raise InstallError(f"step fetch failed: {request.source.url} ({request.source.branch or 'default branch'}) "
                               f"has no {SOURCE_DIR}/setup.py: not byteps' bytescheduler branch; check "
                               f"--env.PACKAGE_URL and --env.PACKAGE_BRANCH")
        if request.patches:
            steps.say(f"bytescheduler: [patch] {len(request.patches)} patch(es): "
                      f"{', '.join(p.name for p in request.patches)}")
        patches = apply_patches(request.patches, tree, steps)
        pip = [request.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps",
               "--target", str(staging)]
        steps.run("python-package", pip + [str(tree / SOURCE_DIR), *request.pip_packages], work, PIP_TIMEOUT_S)
        for stray in STRAY_PACKAGES:
            if (staging / stray).is_dir():
                shutil.rmtree(staging / stray)
                steps.say(f"bytescheduler: [python-package] removed the stray top-level package {stray}/ (their "
                          f"setup.py excludes only 'tests')")
        found = check(request.python, staging, steps)
        if found["numpy"] != request.numpy_version:
            raise InstallError(f"step check failed: the engine's numpy is {found['numpy']} ({found['numpy_path']}), "
                               f"not {request.numpy_version}; MXNet 1.9.1 needs numpy<1.24: reinstall the engine with "
                               f"ck install package:lib-mxnet")
        manifest = {"package": request.package, "source": asdict(request.source), "commit": commit,
                    "missing": missing, "patches": patches, "pip_packages": request.pip_packages,
                    "numpy": found["numpy"], "hook": found["hook"], "engine_python": request.python,
                    "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (staging / bytescheduler_line.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        staging.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        pth = engine_site(request.python) / PTH_FILE
        pth.write_text(f"{final}\n")
        steps.say(f"bytescheduler: installed {commit[:12]} with {len(patches)} patch(es) in {final}; on the engine's "
                  f"path via {pth}; the engine keeps numpy {found['numpy']}")
        return final
    finally:
        steps.close()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)


def installed_version(site: Path) -> str:
    """The version a site folder's bytescheduler states (``__version__.py``: VERSION = (0, 1, 0)), without importing it."""
    path = site / "bytescheduler" / "__version__.py"
    try:
        match = re.search(r"^VERSION\s*=\s*\(([0-9,\s]+)\)", path.read_text(), re.MULTILINE)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    if not match:
        raise UserError(f"{path} does not state ByteScheduler's VERSION")
    return ".".join(part.strip() for part in match.group(1).split(",") if part.strip())


def installed_commit(site: Path) -> str:
    """The byteps commit a site folder's bytescheduler was installed from (its manifest); "" when not ours."""
    try:
        return str(json.loads((site / bytescheduler_line.MANIFEST).read_text()).get("commit", ""))
    except (OSError, ValueError):
        return ""


def main(argv: list[str] | None = None) -> int:
    """The command line (python -m reprokit.engines.bytescheduler install): one line and exit code 1 on failure."""
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["install"]:
        print("usage: python -m reprokit.engines.bytescheduler install   (settings come from the environment, as CK "
              "sets it)", file=sys.stderr)
        return 2
    try:
        install(request_from_env(os.environ))
    except (UserError, InstallError) as exc:
        print(f"bytescheduler: error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0
