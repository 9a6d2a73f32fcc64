"""The build configuration of the authors' artifact: where its source comes from, and how make builds it.

``request_from_env`` reads the settings the CK packages hand over (install_env,
``--env.NAME=VALUE`` on ``ck install``); ``make_args`` and ``build_env`` are the
make line and its environment. The install pipeline is ``engines.artifact.install``.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reprokit.core.errors import UserError
from reprokit.core.values import shown, whole_number
from reprokit.engines.base import ARTIFACT, builds

# numpy 1.23.5: the newest numpy with the aliases (np.bool, ...) that MXNet's python code uses; pyyaml: the
# bundled Sockeye's config.py imports yaml.
DEFAULT_PIP_PACKAGES = "numpy==1.23.5 requests pyyaml"
PATCHES_DIR = "patches"  # in the package: applied in name order
CCACHE_WRAPPERS = Path("/usr/lib/ccache")  # Debian's compiler links to ccache


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
        found = next((c for c in candidates if _is_toolkit(c)), None)
        if found is None:
            return None
        root = found
    cudnn = any((d / "cudnn.h").exists() for d in (root / "include", Path("/usr/include")))
    return Cuda(path=str(root), cudnn=cudnn)


def _is_toolkit(root: Path) -> bool:
    return (root / "bin" / "nvcc").exists() and (root / "include" / "cuda_runtime.h").exists()


def make_args(cuda: Cuda | None, jobs: int, deps: Path | None = None) -> list[str]:
    """The seed's make line (OpenCV, OpenBLAS, the distributed kvstore, CUDA/cuDNN when there) for today's toolchain.

    ``deps``: the DEPS_PATH folder linking the system zmq/protobuf; ps-lite then links them as
    shared libraries (PS_LDFLAGS_A), since Debian's static libzmq.a is not position-independent.
    No gperftools or jemalloc (the fork's config turns them on when found; not needed to run).
    """
    args = ["make", f"-j{max(1, jobs)}", "USE_OPENCV=1", "USE_BLAS=openblas", "USE_DIST_KVSTORE=1"]
    if cuda is None:
        # The fork's make/config.mk turns CUDA on by default: say no explicitly.
        args += ["USE_CUDA=0", "USE_CUDNN=0", "USE_CUDA_PATH=NONE"]
    else:
        args += ["USE_CUDA=1", f"USE_CUDNN={int(cuda.cudnn)}", f"USE_CUDA_PATH={cuda.path}"]
    args += ["USE_GPERFTOOLS=0", "USE_JEMALLOC=0"]
    if deps is not None:
        args += [f"DEPS_PATH={deps}", "PS_LDFLAGS_A=-lprotobuf-lite -lzmq"]
    return args


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
    patches: list[Path] = field(default_factory=list)  # applied in this order
    sockeye: GitSource | None = None  # where example/sockeye comes from when the tree lacks it
    ccache: bool = True  # build through /usr/lib/ccache when it exists


def request_from_env(env: Mapping[str, str]) -> InstallRequest:
    """The install settings the CK package hands over (install_env, --env.NAME=VALUE on `ck install`)."""
    install_dir = str(env.get("INSTALL_DIR", "")).strip()
    if not install_dir:
        raise UserError("INSTALL_DIR is empty: refusing to install (check the os entry's env_set)")
    build = str(env.get("P3_BUILD", "")).strip()
    if build not in builds(ARTIFACT):
        raise UserError(f"P3_BUILD must be one of {', '.join(builds(ARTIFACT))}, got {build!r} "
                        f"(set by the package's meta.json)")
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
            raise UserError(f"PACKAGE_MD5 must be 32 hex digits, got {shown(md5)}; fix it with --env.PACKAGE_MD5=HEX")
        source = ZipSource(url, md5, str(env.get("PACKAGE_TOP_DIR", "")).strip())
    else:
        raise UserError(f"PACKAGE_SOURCE must be git or zip, got {shown(kind)}")
    jobs_raw = str(env.get("CK_HOST_CPU_NUMBER_OF_PROCESSORS", "")).strip() or str(os.cpu_count() or 1)
    jobs = whole_number(jobs_raw, "the number of build jobs", "--j=N", low=1)
    python = str(env.get("ARTIFACT_PYTHON", "")).strip() or str(env.get("FRAMEWORK_PYTHON", "")).strip() or sys.executable
    packages = str(env.get("ARTIFACT_PIP_PACKAGES", DEFAULT_PIP_PACKAGES)).split()
    sockeye_url = str(env.get("SOCKEYE_URL", "")).strip()
    sockeye = GitSource(sockeye_url, str(env.get("SOCKEYE_BRANCH", "")).strip()) if sockeye_url else None
    return InstallRequest(Path(install_dir), build, source, python, packages, detect_cuda(env), jobs,
                          str(env.get("PACKAGE_NAME", "")).strip(), patches_of(env), sockeye,
                          str(env.get("ARTIFACT_CCACHE", "")).strip() != "0")


def patches_of(env: Mapping[str, str], prefix: str = "ARTIFACT") -> list[Path]:
    """The patches to apply, in name order: PREFIX_PATCH_DIR's, else the one copy of ours, in the package named by
    PREFIX_PATCHES_FROM (a sibling of this package, CK's ORIGINAL_PACKAGE_DIR) or this package's own ``patches/``;
    only those PREFIX_PATCHES lists when it lists any (the baseline's tree takes four of the five). ``prefix``:
    the installing package's (ARTIFACT for the authors' builds, BYTESCHEDULER for package:bytescheduler-github)."""
    given = str(env.get(f"{prefix}_PATCH_DIR", "")).strip()
    package = str(env.get("ORIGINAL_PACKAGE_DIR", "")).strip()
    source = str(env.get(f"{prefix}_PATCHES_FROM", "")).strip()
    if given:
        given_folder = Path(given).expanduser()
        if not given_folder.is_dir():
            raise UserError(f"{prefix}_PATCH_DIR={given} is not a folder; give the folder holding the *.patch files, "
                            f"or leave it empty for the package's own patches")
        return sorted(given_folder.glob("*.patch"))  # another folder's patches: all of them
    if not package:
        return []
    folder = (Path(package).parent / source if source else Path(package)) / PATCHES_DIR
    found = sorted(folder.glob("*.patch")) if folder.is_dir() else []
    listed = [name.strip() for name in str(env.get(f"{prefix}_PATCHES", "")).split(",") if name.strip()]
    if not listed:
        return found
    missing = sorted(set(listed) - {p.name for p in found})
    if missing:
        raise UserError(f"{prefix}_PATCHES names {', '.join(missing)}, which {folder} does not hold; the package's "
                        f"meta and its patches folder disagree: update this repository (ck pull repo)")
    return [p for p in found if p.name in listed]


def build_env(install_dir: Path, ccache: bool, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """make's environment: ccache's compiler links first on PATH when wanted and present.

    Not CXX="ccache g++": the fork's Makefile hands CXX=$(CXX) to ps-lite's unquoted, which splits it.
    CCACHE_BASEDIR (default: the folder of every package's install) makes a second tree hit the first one's objects.
    """
    env = dict(base if base is not None else os.environ)
    if ccache and CCACHE_WRAPPERS.is_dir():
        env["PATH"] = f"{CCACHE_WRAPPERS}{os.pathsep}{env.get('PATH', '')}"
        env.setdefault("CCACHE_BASEDIR", str(install_dir.parent))
    return env
