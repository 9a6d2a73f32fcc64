"""Test data: a tiny tree with the layout of the authors' P3 artifact (github anandj91/p3, Zenodo p3-v1.3.zip).

GitHub and Zenodo cannot be reached here, so the artifact packages are tested
against this stand-in: a local git repository (branch ``master`` is the "P3
build", ``baseline`` the "baseline build", ``broken`` does not compile) and a
zip of it with GitHub's archive naming. Every step of the real recipe runs on
it: clone or download and unzip, ``make`` (which really compiles
``lib/libmxnet.so`` with the C compiler, and with nvcc when ``USE_CUDA=1``),
``pip install python/``, import check.

The stand-in cannot train. Its ``train_imagenet.py`` and ``sockeye.train``
record their argv, DMLC_* environment and the build information compiled into
the library to ``standin-<role>-<n>.json`` in their working folder, wait
(bounded) until every role of the job has done so, then exit 3 saying they are
a stand-in. They never print Speedometer lines.
"""
from __future__ import annotations

import os
import subprocess
import zipfile
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from support.ckcli import CkCli

STANDIN_VERSION = "1.1.0+standin"
STANDIN_EXIT = 3

MAKEFILE = """\
# Stand-in for the fork's Makefile: same variables, same product (lib/libmxnet.so).
config ?= make/config.mk
include $(config)

FLAGS = -DSTANDIN_FLAGS='"USE_CUDA=$(USE_CUDA);USE_CUDNN=$(USE_CUDNN);USE_CUDA_PATH=$(USE_CUDA_PATH);USE_BLAS=$(USE_BLAS);USE_OPENCV=$(USE_OPENCV);USE_DIST_KVSTORE=$(USE_DIST_KVSTORE)"'
OBJS = build/c_api.o
LIBS =
ifeq ($(USE_CUDA), 1)
OBJS += build/cuda_probe.o
LIBS += -L$(USE_CUDA_PATH)/lib64 -lcudart_static -lpthread -ldl -lrt
endif

lib/libmxnet.so: $(OBJS)
\tmkdir -p lib
\t$(CC) -shared -o $@ $(OBJS) $(LIBS)

build/c_api.o: src/c_api.c
\tmkdir -p build
\t$(CC) -fPIC -O2 $(FLAGS) $(if $(filter 1,$(USE_CUDA)),-DSTANDIN_CUDA=1,) -c $< -o $@

build/cuda_probe.o: src/cuda_probe.cu
\tmkdir -p build
\t$(USE_CUDA_PATH)/bin/nvcc -Xcompiler -fPIC -c $< -o $@
"""

CONFIG_MK = """\
# As in the fork's make/config.mk: CUDA on unless the command line says otherwise.
export CC = gcc
USE_CUDA = 1
USE_CUDA_PATH = /usr/local/cuda
USE_CUDNN = 1
USE_OPENCV = 1
USE_BLAS = openblas
USE_DIST_KVSTORE = 1
"""

C_API = """\
/* Stand-in for the fork's C API: reports which build this is and the make flags it was built with. */
#ifdef STANDIN_CUDA
int standin_cuda_compiled(void);
#endif
const char *MXStandInBuild(void) { return "%(build)s"; }
const char *MXStandInFlags(void) { return STANDIN_FLAGS; }
int MXStandInCuda(void) {
#ifdef STANDIN_CUDA
  return standin_cuda_compiled();
#else
  return 0;
#endif
}
%(extra)s
"""

CUDA_PROBE = 'extern "C" int standin_cuda_compiled(void) { return 1; }\n'

SETUP_PY = f"""\
from setuptools import setup

setup(name="mxnet", version="{STANDIN_VERSION}", packages=["mxnet"])
"""

MXNET_INIT = f"""\
\"\"\"Stand-in for the fork's python package: loads lib/libmxnet.so the way MXNet's libinfo finds it.\"\"\"
import ctypes
import os

__version__ = "{STANDIN_VERSION}"
_here = os.path.dirname(os.path.abspath(__file__))
_candidates = [os.path.join(_here, "libmxnet.so"), os.path.join(_here, "..", "..", "lib", "libmxnet.so")]
_LIB = ctypes.CDLL(next(p for p in _candidates if os.path.exists(p)))
_LIB.MXStandInBuild.restype = ctypes.c_char_p
_LIB.MXStandInFlags.restype = ctypes.c_char_p


def build_info():
    flags = dict(kv.split("=", 1) for kv in _LIB.MXStandInFlags().decode().split(";"))
    return {{"build": _LIB.MXStandInBuild().decode(), "flags": flags, "cuda_compiled": bool(_LIB.MXStandInCuda()),
             "library": _LIB._name}}
"""

RECORDER = f"""\
import json
import os
import sys
import time

import mxnet  # the installed build; fails if the package or its library is missing


def record_and_refuse(kind):
    role = os.environ.get("DMLC_ROLE", "none")
    index = os.environ.get("DMLC_WORKER_ID", str(os.getpid()))
    record = {{"kind": kind, "argv": sys.argv, "executable": sys.executable, "cwd": os.getcwd(),
              "env": {{k: v for k, v in os.environ.items() if k.startswith("DMLC_") or k == "PYTHONPATH"}},
              "mxnet": mxnet.build_info(), "mxnet_file": mxnet.__file__}}
    with open(f"standin-{{role}}-{{index}}.json", "w") as out:
        json.dump(record, out)
    # Every role records before any exits: the first exit tears the job down.
    expected = 1 + int(os.environ.get("DMLC_NUM_SERVER", "0")) + int(os.environ.get("DMLC_NUM_WORKER", "0"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len([f for f in os.listdir(".") if f.startswith("standin-")]) < expected:
        time.sleep(0.1)
    print(f"stand-in for the P3 artifact ({{kind}}): it cannot train; recorded its command line and exits",
          file=sys.stderr)
    sys.exit({STANDIN_EXIT})
"""

TRAIN_IMAGENET = """\
\"\"\"Stand-in for the artifact's example/image-classification/train_imagenet.py.\"\"\"
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from standin_record import record_and_refuse  # noqa: E402

record_and_refuse("train_imagenet")
"""

SOCKEYE_TRAIN = """\
\"\"\"Stand-in for the artifact's bundled sockeye 1.5 (python -m sockeye.train).\"\"\"
from sockeye.standin_record import record_and_refuse

record_and_refuse("sockeye.train")
"""

LAUNCH = """\
\"\"\"Stand-in for the artifact's tools/launch.py (the runs use reprokit's launcher instead).\"\"\"
import sys

sys.exit("stand-in for tools/launch.py: not used by reprokit")
"""


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def write_tree(root: Path, build: str, broken: bool = False) -> None:
    """The artifact's layout, with ``build`` (p3 or baseline) compiled into the library."""
    _write(root, "Makefile", MAKEFILE)
    _write(root, "make/config.mk", CONFIG_MK)
    extra = "#error this branch does not compile (stand-in for a failing build)" if broken else ""
    _write(root, "src/c_api.c", C_API % {"build": build, "extra": extra})
    _write(root, "src/cuda_probe.cu", CUDA_PROBE)
    _write(root, "python/setup.py", SETUP_PY)
    _write(root, "python/mxnet/__init__.py", MXNET_INIT)
    _write(root, "example/image-classification/train_imagenet.py", TRAIN_IMAGENET, 0o755)
    _write(root, "example/image-classification/common/standin_record.py", RECORDER)
    _write(root, "example/sockeye/source/sockeye/__init__.py", "")
    _write(root, "example/sockeye/source/sockeye/train.py", SOCKEYE_TRAIN)
    _write(root, "example/sockeye/source/sockeye/standin_record.py", RECORDER)
    for name in ("train-preproc.en", "train-preproc.vi", "tst2012.en", "tst2012.vi", "vocab.en", "vocab.vi"):
        _write(root, f"example/sockeye/dataset/iwslt15_en-vi/{name}", "stand-in\n")
    _write(root, "tools/launch.py", LAUNCH, 0o755)
    _write(root, ".gitignore", "build/\nlib/\n")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "stand-in", "GIT_AUTHOR_EMAIL": "standin@example.invalid",
           "GIT_COMMITTER_NAME": "stand-in", "GIT_COMMITTER_EMAIL": "standin@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=60).stdout.strip()


def make_git_repository(root: Path) -> dict[str, str]:
    """Branches master (P3 build), baseline and broken; returns each branch's commit."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "master")
    commits = {}
    for branch, build, broken in (("master", "p3", False), ("baseline", "baseline", False), ("broken", "p3", True)):
        if branch != "master":
            _git(root, "checkout", "-q", "-b", branch, "master")
        write_tree(root, build, broken)
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", f"stand-in artifact: {branch}")
        commits[branch] = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", "master")
    return commits


def make_zip(repo: Path, commit: str, dest: Path) -> str:
    """The tree at ``commit`` zipped as GitHub/Zenodo do (one top folder ``anandj91-p3-<commit7>``)."""
    top = f"anandj91-p3-{commit[:7]}"
    files = _git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in files:
            mode = int(_git(repo, "ls-tree", commit, name).split()[0], 8) & 0o777
            info = zipfile.ZipInfo(f"{top}/{name}")
            info.external_attr = (0o100000 | mode) << 16
            zf.writestr(info, subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{name}"], check=True,
                                             capture_output=True, timeout=60).stdout)
    return top


LEAN = ["--env.ARTIFACT_PIP_PACKAGES="]  # the stand-in needs no numpy; one test installs the default set


def artifact_envs(ck: "CkCli") -> dict[str, dict]:
    """Registered artifact builds by their env UID: their CK_ENV_TOOL_SYSML19_P3* variables."""
    found = json.loads(ck("search", "env", "--tags=tool,p3", "--add_meta", "--out=json", check=True).stdout)["lst"]
    return {e["data_uid"]: e["meta"]["env"] for e in found}
