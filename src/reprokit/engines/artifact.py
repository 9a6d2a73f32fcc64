"""The authors' artifact (their MXNet fork with P3, and its baseline build) as an engine.

Three CK packages install it (``sysml19-p3-github``, ``sysml19-p3-zenodo``,
``sysml19-p3-baseline-github``): fetch the tree (git clone, or download and
unzip), build it with make (CUDA and cuDNN when detected, else a CPU build;
OpenBLAS; OpenCV), install its python package into a prefix of its own,
check that it imports, and swap the result in. Everything happens in a
staging folder first, so a failed step leaves an earlier install untouched.

    python -m reprokit.engines.artifact install     # what the packages' install.sh runs (settings from the environment)

Which engine a run uses is ``engines.choice``; the artifact's command line for a run is ``engines.artifact_run``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from reprokit.data.fetch import download, extract_zip
from reprokit.errors import UserError
from reprokit.values import whole_number

from reprokit.engines.choice import ARTIFACT_BUILDS as BUILDS, P3_PACKAGES_HINT
ENV_PREFIX = "CK_ENV_TOOL_SYSML19_P3"  # the seed's soft:tool.p3 prefix
MANIFEST = "artifact.json"  # written by the installer; what soft:tool.p3 detects
INSTALLED = "artifact"  # INSTALL_DIR/artifact: src/ (built tree), prefix/ (python), artifact.json
STAGING = "artifact.partial"
INSTALL_LOG = "install.log"
# numpy 1.23.5: the newest numpy with the aliases (np.bool, ...) that MXNet's python code uses.
DEFAULT_PIP_PACKAGES = "numpy==1.23.5 requests"
FETCH_TIMEOUT_S = 3600
BUILD_TIMEOUT_S = 6 * 3600
PIP_TIMEOUT_S = 1800
STEP_TIMEOUT_S = 600


class InstallError(Exception):
    """A failed install step: the message names the step, what went wrong and where the log is."""


# ----------------------------------------------------------------------------- build configuration


@dataclass(frozen=True)
class Cuda:
    path: str  # the toolkit folder (USE_CUDA_PATH)
    cudnn: bool  # cudnn.h found next to it or in /usr/include


def detect_cuda(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> Cuda | None:
    """The CUDA toolkit to build with: CUDA_PATH given, else nvcc on PATH, else /usr/local/cuda; None for a CPU build.

    ``USE_CUDA=0`` forces a CPU build (a machine with the toolkit but no GPU).
    """
    if str(env.get("USE_CUDA", "")).strip() == "0":
        return None
    given = str(env.get("CUDA_PATH", "")).strip()
    if given:
        root = Path(given).expanduser()
        if not _is_toolkit(root):
            raise UserError(f"CUDA_PATH={given} is not a CUDA toolkit (no bin/nvcc and include/cuda_runtime.h); "
                            f"give the toolkit's folder, or build for the CPU with --env.USE_CUDA=0")
    else:
        nvcc = which("nvcc")
        # nvcc on PATH may be a wrapper script (/usr/local/bin/nvcc): only a folder with the headers counts.
        candidates = [Path(nvcc).resolve().parent.parent] if nvcc else []
        candidates += [Path(p) for p in (env.get("CUDA_HOME", ""), "/usr/local/cuda") if p]
        root = next((c for c in candidates if _is_toolkit(c)), None)
        if root is None:
            return None
    cudnn = any((d / "cudnn.h").exists() for d in (root / "include", Path("/usr/include")))
    return Cuda(path=str(root), cudnn=cudnn)


def _is_toolkit(root: Path) -> bool:
    return (root / "bin" / "nvcc").exists() and (root / "include" / "cuda_runtime.h").exists()


def make_args(cuda: Cuda | None, jobs: int) -> list[str]:
    """The seed's make line: OpenCV, OpenBLAS, the distributed kvstore, CUDA/cuDNN when there."""
    args = ["make", f"-j{max(1, jobs)}", "USE_OPENCV=1", "USE_BLAS=openblas", "USE_DIST_KVSTORE=1"]
    if cuda is None:
        # The fork's make/config.mk turns CUDA on by default: say no explicitly.
        return args + ["USE_CUDA=0", "USE_CUDNN=0", "USE_CUDA_PATH=NONE"]
    return args + ["USE_CUDA=1", f"USE_CUDNN={int(cuda.cudnn)}", f"USE_CUDA_PATH={cuda.path}"]


# ----------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class GitSource:
    url: str
    branch: str = ""  # empty: the repository's default branch
    commit: str = ""  # empty: the branch's head


@dataclass(frozen=True)
class ZipSource:
    url: str
    md5: str = ""  # empty: not verified (said so in the log)
    top_dir: str = ""  # the archive's single top folder; empty: whatever it is


@dataclass(frozen=True)
class InstallRequest:
    install_dir: Path
    build: str  # p3 | baseline
    source: GitSource | ZipSource
    python: str  # the interpreter that creates the artifact's prefix
    pip_packages: list[str]
    cuda: Cuda | None
    jobs: int
    package: str = ""  # the CK package, for the manifest


def request_from_env(env: Mapping[str, str]) -> InstallRequest:
    """The install settings the CK package hands over (install_env, --env.NAME=VALUE on `ck install`)."""
    install_dir = str(env.get("INSTALL_DIR", "")).strip()
    if not install_dir:
        raise UserError("INSTALL_DIR is empty: refusing to install (check the os entry's env_set)")
    build = str(env.get("P3_BUILD", "")).strip()
    if build not in BUILDS:
        raise UserError(f"P3_BUILD must be one of {', '.join(BUILDS)}, got {build!r} (set by the package's meta.json)")
    url = str(env.get("PACKAGE_URL", "")).strip()
    if not url:
        raise UserError("PACKAGE_URL is empty; give the artifact's location with --env.PACKAGE_URL=URL")
    kind = str(env.get("PACKAGE_SOURCE", "git")).strip()
    source: GitSource | ZipSource
    if kind == "git":
        source = GitSource(url, str(env.get("PACKAGE_BRANCH", "")).strip(), str(env.get("PACKAGE_COMMIT", "")).strip())
    elif kind == "zip":
        md5 = str(env.get("PACKAGE_MD5", "")).strip().lower()
        if md5 and not re.fullmatch(r"[0-9a-f]{32}", md5):
            raise UserError(f"PACKAGE_MD5 must be 32 hex digits, got {md5!r}; fix it with --env.PACKAGE_MD5=HEX")
        source = ZipSource(url, md5, str(env.get("PACKAGE_TOP_DIR", "")).strip())
    else:
        raise UserError(f"PACKAGE_SOURCE must be git or zip, got {kind!r}")
    jobs_raw = str(env.get("CK_HOST_CPU_NUMBER_OF_PROCESSORS", "")).strip() or str(os.cpu_count() or 1)
    jobs = whole_number(jobs_raw, "the number of build jobs", "--j=N", low=1)
    python = str(env.get("ARTIFACT_PYTHON", "")).strip() or str(env.get("FRAMEWORK_PYTHON", "")).strip() or sys.executable
    packages = str(env.get("ARTIFACT_PIP_PACKAGES", DEFAULT_PIP_PACKAGES)).split()
    return InstallRequest(Path(install_dir), build, source, python, packages, detect_cuda(env), jobs,
                          str(env.get("PACKAGE_NAME", "")).strip())


# ----------------------------------------------------------------------------- steps


class Steps:
    """Runs the install's commands with a timeout each, stdin closed, output copied to the console and the log."""

    def __init__(self, log_path: Path, console=sys.stdout):
        self.log_path = log_path
        self.console = console
        self.log = open(log_path, "w", encoding="utf-8", errors="replace")

    def say(self, line: str) -> None:
        for stream in (self.log, self.console):
            stream.write(line + "\n")
            stream.flush()

    def run(self, step: str, argv: Sequence[str], cwd: Path, timeout_s: float,
            env: Mapping[str, str] | None = None) -> str:
        """Run one command of ``step``; its output (last 20 lines kept) or an InstallError naming the step."""
        self.say(f"artifact: [{step}] {' '.join(argv)}")
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


def fetch_git(source: GitSource, dest: Path, steps: Steps) -> str:
    """Clone (submodules too) and check out the wanted commit; returns the commit checked out."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/true", "GCM_INTERACTIVE": "never"}
    argv = ["git", "clone", "--recurse-submodules"]
    if source.branch:
        argv += ["--branch", source.branch]
    steps.run("fetch", argv + ["--", source.url, str(dest)], dest.parent, FETCH_TIMEOUT_S, env)
    if source.commit:
        steps.run("fetch", ["git", "checkout", "--detach", source.commit], dest, STEP_TIMEOUT_S, env)
        steps.run("fetch", ["git", "submodule", "update", "--init", "--recursive"], dest, FETCH_TIMEOUT_S, env)
    return steps.run("fetch", ["git", "rev-parse", "HEAD"], dest, STEP_TIMEOUT_S, env).splitlines()[-1].strip()


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
        raise InstallError(f"step fetch failed: {exc}") from None
    if source.top_dir and top.name != source.top_dir:
        raise InstallError(f"step unpack failed: expected the top folder {source.top_dir} in the archive, found "
                           f"{top.name}; is --env.PACKAGE_URL the artifact (or set --env.PACKAGE_TOP_DIR)?")
    top.rename(dest)
    archive.unlink()
    shutil.rmtree(staging / "unpacked")
    match = re.search(r"-([0-9a-f]{7,40})$", top.name)
    return match.group(1) if match else ""


@dataclass
class Manifest:
    """What was installed, recorded in INSTALL_DIR/artifact/artifact.json and read back by soft:tool.p3."""
    build: str
    package: str
    source: dict
    commit: str
    version: str  # the python package's mxnet.__version__
    cuda: str  # toolkit folder; empty for a CPU build
    cudnn: bool
    make: list[str]
    installed_at: str
    python: str = "prefix/bin/python"  # relative to the manifest's folder
    tree: str = "src"
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def install(request: InstallRequest, console=sys.stdout) -> Path:
    """Fetch, build, install into a prefix and check; swap in only when every step worked. Returns the manifest."""
    from reprokit.jsonfile import write_json

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
        if isinstance(request.source, GitSource):
            commit = fetch_git(request.source, tree, steps)
        else:
            commit = fetch_zip(request.source, staging, tree, steps)
        missing = [p for p in ("Makefile", "python/setup.py") if not (tree / p).exists()]
        if missing:
            raise InstallError(f"step fetch failed: {request.source.url} is not an MXNet source tree "
                               f"(no {', '.join(missing)} at its top); check --env.PACKAGE_URL")
        make = make_args(request.cuda, request.jobs)
        steps.say(f"artifact: [build] {'CUDA at ' + request.cuda.path if request.cuda else 'no CUDA found: CPU build'}"
                  + (f", cuDNN {'found' if request.cuda.cudnn else 'NOT found (USE_CUDNN=0)'}" if request.cuda else ""))
        try:
            steps.run("build", make, tree, BUILD_TIMEOUT_S)
        except InstallError as exc:
            raise InstallError(f"{exc} (the build needs gcc, make and the OpenBLAS and OpenCV development files, "
                               f"e.g. apt-get install build-essential libopenblas-dev libopencv-dev)") from None
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
                            installed_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
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


# ----------------------------------------------------------------------------- a registered install


@dataclass(frozen=True)
class InstalledArtifact:
    root: Path  # the folder holding artifact.json
    manifest: Manifest

    @property
    def tree(self) -> Path:
        return self.root / self.manifest.tree

    @property
    def python(self) -> Path:
        return self.root / self.manifest.python


def load_installed(manifest_path: str | Path) -> InstalledArtifact:
    path = Path(manifest_path)
    try:
        data = json.loads(path.read_text())
        manifest = Manifest(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise UserError(f"{path} is not an artifact manifest written by `ck install package:sysml19-p3-*` ({exc}); "
                        f"reinstall with: {P3_PACKAGES_HINT}") from None
    if manifest.build not in BUILDS:
        raise UserError(f"{path} names an unknown build {manifest.build!r}; reinstall the package")
    return InstalledArtifact(path.parent, manifest)


def env_variables(installed: InstalledArtifact) -> dict[str, str]:
    """What soft:tool.p3 registers (CK_ENV_TOOL_SYSML19_P3 is the artifact's source tree, as in the seed)."""
    m = installed.manifest
    return {
        ENV_PREFIX: str(installed.tree),
        f"{ENV_PREFIX}_PYTHON": str(installed.python),
        f"{ENV_PREFIX}_BUILD": m.build,
        f"{ENV_PREFIX}_COMMIT": m.commit,
        f"{ENV_PREFIX}_CUDA": "1" if m.cuda else "0",
        f"{ENV_PREFIX}_LIB": str(installed.tree / "lib"),
        f"{ENV_PREFIX}_MANIFEST": str(installed.root / MANIFEST),
        f"{ENV_PREFIX}_INSTALLED_AT": m.installed_at,
    }


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
        print(f"artifact: error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
