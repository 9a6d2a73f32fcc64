"""The install pipeline of the authors' artifact (their MXNet fork with P3, and its baseline build).

Three CK packages install it (``sysml19-p3-github``, ``sysml19-p3-zenodo``,
``sysml19-p3-baseline-github``). The steps, each named in the log and in a failure:

- fetch: ``git clone -n`` then ``git checkout`` (a clone whose checkout meets a
  missing blob exits 128; the checkout alone writes every other file and the
  missing ones are listed in the log and the manifest), or download and unzip;
- sockeye: a tree without ``example/sockeye`` (the baseline, anand-mxnet) gets it
  from SOCKEYE_URL/SOCKEYE_BRANCH (github anandj91/p3, branch baseline), as the
  original workflow's baseline package did;
- patch: our patches (``config.patches_of``: one copy, each package naming its own; listed in the manifest),
  ``git apply`` with GIT_CEILING_DIRECTORIES so nothing is skipped silently;
- deps: a DEPS_PATH folder linking the system zmq and protobuf (ps-lite's own
  download links are dead), when the tree has ps-lite;
- build: make (CUDA and cuDNN when detected, else a CPU build; OpenBLAS; OpenCV;
  shared zmq/protobuf), through ccache when /usr/lib/ccache exists;
- prefix, python-dependencies, python-package, check: a venv of its own with
  the tree's python package and the library beside it, imported once.

Everything happens in a staging folder first, so a failed step leaves an
earlier install untouched.

    python -m reprokit.engines.artifact install     # what the packages' install.sh runs (settings from the environment)

What it builds is ``engines.artifact.config``; what it leaves behind is read by ``engines.artifact.installed``.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from reprokit.core.errors import UserError, say_failure
from reprokit.core.jsonfile import write_json
from reprokit.data.fetch import download, extract_zip
from reprokit.engines.artifact.config import (
    GitSource,
    InstallRequest,
    ZipSource,
    build_env,
    make_args,
    request_from_env,
)
from reprokit.engines.artifact.installed import INSTALLED, MANIFEST, Manifest

STAGING = "artifact.partial"
INSTALL_LOG = "install.log"
FETCH_TIMEOUT_S = 3600
BUILD_TIMEOUT_S = 6 * 3600
PIP_TIMEOUT_S = 1800
STEP_TIMEOUT_S = 600
SOCKEYE_DIR = Path("example") / "sockeye"
# ps-lite's make/deps.mk downloads protobuf 2.5 and zeromq 4.1 from a dead link: link the system ones instead.
SYSTEM_DEPS = {"include/zmq.h": "/usr/include/zmq.h", "include/google/protobuf": "/usr/include/google/protobuf",
               "bin/protoc": "/usr/bin/protoc"}
DEPS_HINT = "apt-get install libzmq3-dev libprotobuf-dev protobuf-compiler"


class InstallError(Exception):
    """A failed install step: the message names the step, what went wrong and where the log is."""


# ----------------------------------------------------------------------------- steps


class Steps:
    """Runs the install's commands with a timeout each, stdin closed, output copied to the console and the log."""

    def __init__(self, log_path: Path, console: TextIO = sys.stdout, label: str = "artifact"):
        self.log_path = log_path
        self.console = console
        self.label = label  # what begins each line: the install's name (artifact, bytescheduler)
        self.log = open(log_path, "w", encoding="utf-8", errors="replace")

    def say(self, line: str) -> None:
        for stream in (self.log, self.console):
            stream.write(line + "\n")
            stream.flush()

    def run(self, step: str, argv: Sequence[str], cwd: Path, timeout_s: float,
            env: Mapping[str, str] | None = None, quiet: bool = False) -> str:
        """Run one command of ``step``; its output (last 20 lines, every line when ``quiet``: not on the console)
        or an InstallError naming the step."""
        self.say(f"{self.label}: [{step}] {' '.join(argv)}")
        clean = {k: v for k, v in (env or os.environ).items()
                 if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd, env=clean, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise InstallError(f"step {step} failed: cannot run {argv[0]}: {exc.strerror}") from None
        tail: list[str] = []

        def copy() -> None:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                self.log.write(line + "\n")
                if quiet:
                    tail.append(line)
                    continue
                self.console.write(line + "\n")
                tail[:] = (tail + [line])[-20:]
            self.console.flush()

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        timed_out = False
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if proc.poll() is None or timed_out:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: the whole build goes
                except ProcessLookupError:
                    pass
            code = proc.wait()
            reader.join(timeout=10)
            self.log.flush()
        if timed_out:
            raise InstallError(f"step {step} failed: {argv[0]} ran past {timeout_s:.0f} s and was stopped; "
                               f"log: {self.log_path}")
        if code != 0:
            last = next((t for t in reversed(tail) if "error" in t.lower()),
                        next((t for t in reversed(tail) if t.strip()), "no output"))
            raise InstallError(f"step {step} failed: {Path(argv[0]).name} exited with code {code} "
                               f"({last.strip()[:200]}); log: {self.log_path}")
        return "\n".join(tail)

    def close(self) -> None:
        self.log.close()


GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/true", "GCM_INTERACTIVE": "never"}


def offline_hint(setting: str) -> str:
    """What an install that cannot reach its source says: the offline way."""
    copy = "a git clone, or the Zenodo zip" if setting == "PACKAGE_URL" else "a git clone"
    return f"; no network or the source unreachable? give a local copy with --env.{setting}=PATH ({copy})"


def fetch_git(source: GitSource, dest: Path, steps: Steps, step: str = "fetch",
              setting: str = "PACKAGE_URL", submodules: bool = True) -> tuple[str, list[str]]:
    """Clone without checkout, then check out the wanted branch or commit (and submodules, unless ``submodules`` is
    False: a tree whose part used needs none of them).

    Returns the commit checked out and the files the checkout could not write:
    ``git clone`` of a repository with a missing blob exits 128 and leaves no
    work tree, while ``git checkout`` writes every other file and exits 0 (the
    copy of github anandj91/p3 used here lacks six example data files).
    """
    env = {**os.environ, **GIT_ENV}
    argv = ["git", "clone", "--no-checkout"]
    if source.branch:
        argv += ["--branch", source.branch]
    try:
        steps.run(step, argv + ["--", source.url, str(dest)], dest.parent, FETCH_TIMEOUT_S, env)
    except InstallError as exc:
        raise InstallError(f"{exc}{offline_hint(setting)}") from None
    if source.commit:
        steps.run(step, ["git", "checkout", "--detach", source.commit], dest, STEP_TIMEOUT_S, env)
    else:
        branch = source.branch or steps.run(step, ["git", "symbolic-ref", "--short", "HEAD"], dest,
                                            STEP_TIMEOUT_S, env).splitlines()[-1].strip()
        steps.run(step, ["git", "checkout", branch], dest, STEP_TIMEOUT_S, env)
    if submodules:
        steps.run(step, ["git", "submodule", "update", "--init", "--recursive"], dest, FETCH_TIMEOUT_S, env)
    missing = steps.run(step, ["git", "ls-files", "--deleted"], dest, STEP_TIMEOUT_S, env, quiet=True).split("\n")
    missing = [m for m in missing if m.strip()]
    if missing:
        steps.say(f"{steps.label}: [{step}] {len(missing)} file(s) of the commit are missing from the source (absent "
                  f"objects), the rest is checked out: {', '.join(missing)}")
    commit = steps.run(step, ["git", "rev-parse", "HEAD"], dest, STEP_TIMEOUT_S, env).splitlines()[-1].strip()
    return commit, missing


def fetch_zip(source: ZipSource, staging: Path, dest: Path, steps: Steps) -> str:
    """Download, verify and unpack (reprokit.data.fetch); returns the commit named by the top folder (GitHub's naming)."""
    archive = staging / "download.zip"
    steps.say(f"artifact: [fetch] downloading {source.url}")
    if not source.md5:
        steps.say("artifact: [fetch] no known md5 for this archive: not verified (give one with --env.PACKAGE_MD5=HEX)")
    try:
        md5 = download(source.url, archive, source.md5, progress=lambda line: steps.say(f"artifact: [fetch] {line}"))
        steps.say(f"artifact: [fetch] md5 verified ({md5})" if source.md5 else f"artifact: [fetch] md5 {md5}")
        top = extract_zip(archive, staging / "unpacked")
    except UserError as exc:
        raise InstallError(f"step fetch failed: {exc}{offline_hint('PACKAGE_URL')}") from None
    if source.top_dir and top.name != source.top_dir:
        raise InstallError(f"step unpack failed: expected the top folder {source.top_dir} in the archive, found "
                           f"{top.name}; is --env.PACKAGE_URL the artifact (or set --env.PACKAGE_TOP_DIR)?")
    top.rename(dest)
    archive.unlink()
    shutil.rmtree(staging / "unpacked")
    match = re.search(r"-([0-9a-f]{7,40})$", top.name)
    return match.group(1) if match else ""


def ship_sockeye(source: GitSource, tree: Path, staging: Path, steps: Steps) -> dict[str, Any]:
    """Copy ``example/sockeye`` from ``source`` into a tree that lacks it; returns where it came from."""
    clone = staging / "sockeye-source"
    commit, missing = fetch_git(source, clone, steps, step="sockeye", setting="SOCKEYE_URL")
    if not (clone / SOCKEYE_DIR / "source" / "sockeye" / "train.py").is_file():
        raise InstallError(f"step sockeye failed: {source.url} ({source.branch or 'default branch'}) has no "
                           f"{SOCKEYE_DIR}/source/sockeye/train.py; check --env.SOCKEYE_URL and --env.SOCKEYE_BRANCH; "
                           f"log: {steps.log_path}")
    shutil.copytree(clone / SOCKEYE_DIR, tree / SOCKEYE_DIR, symlinks=True)
    shutil.rmtree(clone)
    steps.say(f"artifact: [sockeye] copied {SOCKEYE_DIR} from {source.url} {source.branch} ({commit[:12]})")
    return {"url": source.url, "branch": source.branch, "commit": commit,
            "missing": [m for m in missing if m.startswith(f"{SOCKEYE_DIR}/")]}


def apply_patches(patches: Sequence[Path], tree: Path, steps: Steps) -> list[str]:
    """``git apply`` each patch at the top of the tree; a patch that does not apply (or is skipped) fails the step."""
    # Inside another git work tree (a zip unpacked under a repository) git apply skips every file and exits 0.
    env = {**os.environ, **GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    applied = []
    for patch in patches:
        out = steps.run("patch", ["git", "apply", "--verbose", "--whitespace=nowarn", str(patch)], tree,
                        STEP_TIMEOUT_S, env)
        if "Skipped patch" in out:
            raise InstallError(f"step patch failed: git apply skipped {patch.name} (a path it names is not in the "
                               f"tree); log: {steps.log_path}")
        applied.append(patch.name)
    return applied


def make_deps(tree: Path, steps: Steps) -> Path | None:
    """The DEPS_PATH folder ps-lite builds against (links to the system zmq and protobuf); None without ps-lite."""
    if not (tree / "ps-lite").is_dir():
        steps.say("artifact: [deps] no ps-lite in the tree: no DEPS_PATH folder")
        return None
    missing = [target for target in SYSTEM_DEPS.values() if not os.path.exists(target)]
    if missing:
        raise InstallError(f"step deps failed: {', '.join(missing)} not found (ps-lite builds against the system "
                           f"zmq and protobuf): {DEPS_HINT}")
    deps = tree.parent / "deps"
    for rel, target in SYSTEM_DEPS.items():
        (deps / rel).parent.mkdir(parents=True, exist_ok=True)
        (deps / rel).symlink_to(target)
    steps.say(f"artifact: [deps] {deps}: " + ", ".join(f"{rel} -> {t}" for rel, t in SYSTEM_DEPS.items()))
    return deps


def install(request: InstallRequest, console: TextIO = sys.stdout) -> Path:
    """Fetch, build, install into a prefix and check; swap in only when every step worked. Returns the manifest."""
    install_dir = request.install_dir
    install_dir.mkdir(parents=True, exist_ok=True)
    staging = install_dir / STAGING
    final = install_dir / INSTALLED
    old = install_dir / f"{INSTALLED}.old"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    steps = Steps(install_dir / INSTALL_LOG, console)
    try:
        tree = staging / "src"
        missing: list[str] = []
        if isinstance(request.source, GitSource):
            commit, missing = fetch_git(request.source, tree, steps)
        else:
            commit = fetch_zip(request.source, staging, tree, steps)
        absent = [p for p in ("Makefile", "python/setup.py") if not (tree / p).exists()]
        if absent:
            raise InstallError(f"step fetch failed: {request.source.url} is not an MXNet source tree "
                               f"(no {', '.join(absent)} at its top); check --env.PACKAGE_URL")
        sockeye: dict[str, Any] = {}
        if not (tree / SOCKEYE_DIR).is_dir():
            if request.sockeye is None:
                steps.say(f"artifact: [sockeye] the tree has no {SOCKEYE_DIR} and no --env.SOCKEYE_URL is given: "
                          f"this build cannot run Sockeye")
            else:
                sockeye = ship_sockeye(request.sockeye, tree, staging, steps)
        if request.patches:
            steps.say(f"artifact: [patch] {len(request.patches)} patch(es): {', '.join(p.name for p in request.patches)}")
        patches = apply_patches(request.patches, tree, steps)
        deps = make_deps(tree, steps)
        make = make_args(request.cuda, request.jobs, deps)
        steps.say(f"artifact: [build] {'CUDA at ' + request.cuda.path if request.cuda else 'no CUDA found: CPU build'}"
                  + (f", cuDNN {'found' if request.cuda.cudnn else 'NOT found (USE_CUDNN=0)'}" if request.cuda else ""))
        began = time.monotonic()
        try:
            steps.run("build", make, tree, BUILD_TIMEOUT_S, build_env(install_dir, request.ccache))
        except InstallError as exc:
            raise InstallError(f"{exc} (the build needs gcc, make and the OpenBLAS and OpenCV development files, "
                               f"e.g. apt-get install build-essential libopenblas-dev libopencv-dev)") from None
        build_s = round(time.monotonic() - began, 1)
        steps.say(f"artifact: [build] make took {build_s:.0f} s")
        library = tree / "lib" / "libmxnet.so"
        if not library.exists():
            raise InstallError(f"step build failed: make succeeded but produced no {library.relative_to(staging)}; "
                               f"log: {steps.log_path}")
        prefix = staging / "prefix"
        steps.run("prefix", [request.python, "-m", "venv", str(prefix)], staging, STEP_TIMEOUT_S)
        python = prefix / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        # wheel: to build the fork's setup.py with the prefix's own setuptools (no isolated build env).
        steps.run("python-dependencies", pip + ["wheel", *request.pip_packages], staging, PIP_TIMEOUT_S)
        # No dependencies from the fork's setup.py: it pins numpy versions that no longer build.
        steps.run("python-package", pip + ["--no-deps", "--no-build-isolation", str(tree / "python")],
                  staging, PIP_TIMEOUT_S)
        package_dir = Path(steps.run("python-package", [str(python), "-c",
                                     "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('mxnet').origin))"],
                                     staging, STEP_TIMEOUT_S).splitlines()[-1].strip())
        # MXNet's libinfo looks for the library beside the package first.
        shutil.copy2(library, package_dir / library.name)
        version = steps.run("check", [str(python), "-c", "import mxnet; print(mxnet.__version__)"],
                            staging, STEP_TIMEOUT_S).splitlines()[-1].strip()
        source = asdict(request.source) | {"kind": "git" if isinstance(request.source, GitSource) else "zip"}
        manifest = Manifest(build=request.build, package=request.package, source=source, commit=commit,
                            version=version, cuda=request.cuda.path if request.cuda else "",
                            cudnn=bool(request.cuda and request.cuda.cudnn), make=make,
                            installed_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), patches=patches, missing=missing,
                            sockeye=sockeye, build_s=build_s)
        write_json(staging / MANIFEST, manifest.to_dict())
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        staging.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        steps.say(f"artifact: installed the {request.build} build ({commit[:12] or 'unknown commit'}, mxnet {version}) "
                  f"in {final}")
        return final / MANIFEST
    finally:
        steps.close()
        shutil.rmtree(staging, ignore_errors=True)


# ----------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["install"]:
        print("usage: python -m reprokit.engines.artifact install   (settings come from the environment, as CK sets it)",
              file=sys.stderr)
        return 2
    try:
        request = request_from_env(os.environ)
        install(request)
    except (UserError, InstallError) as exc:
        say_failure(f"artifact: error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
