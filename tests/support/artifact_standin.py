"""Test data: a tiny tree with the layout of the authors' P3 artifact (github anandj91/p3, Zenodo p3-v1.3.zip).

GitHub and Zenodo cannot be reached here, so the artifact packages are tested
against this stand-in: a local git repository (branch ``master`` is the "P3
build", ``baseline`` the p3 repository's baseline branch, ``anand-baseline``
anand-mxnet's baseline without example/sockeye, ``broken`` does not compile) and
a zip of it with GitHub's archive naming. Every step of the real recipe runs on
it: clone -n and checkout, or download and unzip, Sockeye shipped to the
baseline, our patches (restated for the stand-in's files by ``write_patches``)
applied with git apply, ``make`` (which really compiles ``lib/libmxnet.so`` with
the C compiler, and with nvcc when ``USE_CUDA=1``), ``pip install python/``,
import check.

The stand-in does not compute, but behaves as the authors' scripts where our
runs depend on it: ``train_imagenet.py --benchmark 1`` runs a fixed 500
batches (``--num-examples`` changes nothing) unless our patch's
``--benchmark-batches`` is there, rejects unknown arguments, and aborts on a
RecordIO set smaller than a batch per worker; ``sockeye.train`` reports every
100 updates unless our patch's SOCKEYE_MEASURE_SPEED_EVERY is set, removes and
rewrites its ``--output`` folder (a worker whose folder another one took fails).
Workers print MXNet Speedometer lines and record their argv, DMLC_*
environment, build information and batch count to
``standin-<role>-<n>.json`` in their working folder; the scheduler and servers
live until every worker has finished, as MXNet's do.
"""
from __future__ import annotations

import json
import os
import subprocess
import zipfile
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

RECORDER = """\
import json
import os
import sys
import time

import mxnet  # the installed build; fails if the package or its library is missing

ROLE = os.environ.get("DMLC_ROLE", "none")
WORKERS = int(os.environ.get("DMLC_NUM_WORKER", "1"))


def record(kind, **extra):
    index = os.environ.get("DMLC_WORKER_ID", str(os.getpid()))
    data = {"kind": kind, "argv": sys.argv, "executable": sys.executable, "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith(("DMLC_", "SOCKEYE_")) or k == "PYTHONPATH"},
            "mxnet": mxnet.build_info(), "mxnet_file": mxnet.__file__, **extra}
    with open(f"standin-{ROLE}-{index}.json", "w") as out:
        json.dump(data, out)


def serve_until_workers_finish(kind):
    \"\"\"Scheduler and servers: as MXNet's, they live until every worker has finished (bounded).\"\"\"
    record(kind)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if len([f for f in os.listdir(".") if f.startswith("standin-done-worker-")]) >= WORKERS:
            sys.exit(0)
        time.sleep(0.05)
    sys.exit("stand-in " + ROLE + ": the workers never finished")


def train(kind, batches, batch_size, period, seconds_per_batch=0.005, **extra):
    \"\"\"A worker: 'trains' ``batches`` batches, logging MXNet Speedometer lines every ``period``.\"\"\"
    rank = os.environ.get("DMLC_WORKER_ID", "0")
    tic = time.time()
    for batch in range(1, batches + 1):
        time.sleep(seconds_per_batch)
        if batch % period == 0:
            speed = period * batch_size / max(1e-6, time.time() - tic)
            print(f"INFO:root:Epoch[0] Batch [{batch}]\\tSpeed: {speed:.2f} samples/sec\\taccuracy=0.000000",
                  file=sys.stderr, flush=True)
            tic = time.time()
    # The line each real script logs when its training is over (the launcher watches for it).
    end = "Epoch[0] Time cost=0.100" if kind == "train_imagenet" else "Training finished. Best checkpoint: 0."
    print("INFO:root:" + end, file=sys.stderr, flush=True)
    record(kind, batches=batches, **extra)
    open(f"standin-done-worker-{rank}", "w").close()
"""

DATA_PY = """\
\"\"\"Stand-in for common/data.py: its synthetic iterator has a fixed length, as the authors' SyntheticDataIter.\"\"\"
import struct

SYNTHETIC_BATCHES = 500


def add_data_args(parser):
    parser.add_argument('--data-train', type=str)
    parser.add_argument('--num-examples', type=int)
    parser.add_argument('--benchmark', type=int, default=0)
    return parser


def synthetic_batches(args):
    return SYNTHETIC_BATCHES


def images_in(rec):
    count = 0
    with open(rec, 'rb') as handle:
        while True:
            header = handle.read(8)
            if len(header) < 8:
                return count
            length = struct.unpack('<II', header)[1] & ((1 << 29) - 1)
            count += 1
            handle.seek((length + 3) // 4 * 4, 1)
"""

TRAIN_IMAGENET = """\
\"\"\"Stand-in for the artifact's example/image-classification/train_imagenet.py: the real one's arguments and batches.\"\"\"
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
import data  # noqa: E402
from standin_record import ROLE, WORKERS, serve_until_workers_finish, train  # noqa: E402

if ROLE != "worker":
    serve_until_workers_finish("train_imagenet")
parser = argparse.ArgumentParser()
for name in ("--network", "--num-layers", "--image-shape", "--kv-store", "--gpus"):
    parser.add_argument(name)
for name in ("--batch-size", "--num-epochs", "--disp-batches"):
    parser.add_argument(name, type=int)
data.add_data_args(parser)
args = parser.parse_args()  # unknown arguments abort, as in the real script
if args.benchmark:
    batches = data.synthetic_batches(args)
else:
    images = data.images_in(args.data_train) // WORKERS
    if images < args.batch_size:
        sys.exit("number of input images must be bigger than the batch size")
    batches = images // args.batch_size
train("train_imagenet", batches * args.num_epochs, args.batch_size, args.disp_batches)
"""

SOCKEYE_CONSTANTS = """\
\"\"\"Stand-in for sockeye/constants.py: the bundled Sockeye measures speed every 100 updates.\"\"\"
import os

MEASURE_SPEED_EVERY = 100
"""

SOCKEYE_TRAIN = """\
\"\"\"Stand-in for the artifact's bundled sockeye 1.5 (python -m sockeye.train): its output folder and report period.\"\"\"
import argparse
import os
import shutil
import sys
import time

from sockeye import constants as C
from sockeye.standin_record import ROLE, serve_until_workers_finish, train

if ROLE != "worker":
    serve_until_workers_finish("sockeye.train")
parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
parser.add_argument("--overwrite-output", action="store_true")
parser.add_argument("--source", required=True)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--max-updates", type=int, default=1000)
parser.add_argument("--device-ids", nargs="+", type=int, default=[-1])
args, _ = parser.parse_known_args()
for path in (args.source,):
    if not os.path.isfile(path):
        sys.exit(f"sockeye: no such file {path}")
output = os.path.abspath(args.output)
if os.path.exists(output) and args.overwrite_output:
    shutil.rmtree(output)  # as Sockeye 1.5 does: "Removing existing output folder"
os.makedirs(output)
mine = os.environ.get("DMLC_WORKER_ID", "0")
with open(os.path.join(output, "owner"), "w") as out:
    out.write(mine)
time.sleep(1.0)  # Sockeye builds its model before training: the other local worker starts meanwhile
train("sockeye.train", args.max_updates, args.batch_size, C.MEASURE_SPEED_EVERY, output=output)
try:
    with open(os.path.join(output, "owner")) as handle:
        owner = handle.read()
except OSError:
    owner = None
if owner != mine:
    sys.exit(f"sockeye: output folder {output} was removed or taken by another process (worker {owner})")
"""

LAUNCH = """\
\"\"\"Stand-in for the artifact's tools/launch.py (the runs use reprokit's launcher instead).\"\"\"
import sys

sys.exit("stand-in for tools/launch.py: not used by reprokit")
"""

# Our patches of the real trees, restated for the stand-in's files (same options, same environment variable).
PATCHED = {
    "image-benchmark-batches": ("example/image-classification/common/data.py", [
        ("    parser.add_argument('--benchmark', type=int, default=0)\n",
         "    parser.add_argument('--benchmark', type=int, default=0)\n"
         "    parser.add_argument('--benchmark-batches', type=int, default=500)\n"),
        ("    return SYNTHETIC_BATCHES\n", "    return args.benchmark_batches\n")]),
    "sockeye-measure-speed-every": ("example/sockeye/source/sockeye/constants.py", [
        ("MEASURE_SPEED_EVERY = 100\n",
         "MEASURE_SPEED_EVERY = 100\nif os.environ.get('SOCKEYE_MEASURE_SPEED_EVERY'):\n"
         "    MEASURE_SPEED_EVERY = int(os.environ['SOCKEYE_MEASURE_SPEED_EVERY'])\n")]),
}


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def write_tree(root: Path, build: str, broken: bool = False, sockeye: bool = True) -> None:
    """The artifact's layout, with ``build`` (p3 or baseline) compiled into the library; ``sockeye``: example/sockeye."""
    _write(root, "Makefile", MAKEFILE)
    _write(root, "make/config.mk", CONFIG_MK)
    extra = "#error this branch does not compile (stand-in for a failing build)" if broken else ""
    _write(root, "src/c_api.c", C_API % {"build": build, "extra": extra})
    _write(root, "src/cuda_probe.cu", CUDA_PROBE)
    _write(root, "python/setup.py", SETUP_PY)
    _write(root, "python/mxnet/__init__.py", MXNET_INIT)
    _write(root, "example/image-classification/train_imagenet.py", TRAIN_IMAGENET, 0o755)
    _write(root, "example/image-classification/common/data.py", DATA_PY)
    _write(root, "example/image-classification/common/standin_record.py", RECORDER)
    if sockeye:
        _write(root, "example/sockeye/source/sockeye/__init__.py", "")
        _write(root, "example/sockeye/source/sockeye/constants.py", SOCKEYE_CONSTANTS)
        _write(root, "example/sockeye/source/sockeye/train.py", SOCKEYE_TRAIN)
        _write(root, "example/sockeye/source/sockeye/standin_record.py", RECORDER)
        for name in ("train-preproc.en", "train-preproc.vi", "tst2012.en", "tst2012.vi", "vocab.en", "vocab.vi"):
            _write(root, f"example/sockeye/dataset/iwslt15_en-vi/{name}", "stand-in\n")
    _write(root, "tools/launch.py", LAUNCH, 0o755)
    _write(root, ".gitignore", "build/\nlib/\n")


def write_patches(dest: Path) -> list[str]:
    """Our two run patches for the stand-in's files, as ``git diff`` output in DEST (the installer applies them)."""
    work = dest.parent / f"{dest.name}.work"
    work.mkdir(parents=True)
    write_tree(work, "p3")
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "unpatched")
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for number, (name, (rel, edits)) in enumerate(PATCHED.items(), start=1):
        text = (work / rel).read_text()
        for old, new in edits:
            assert old in text, (rel, old)
            text = text.replace(old, new, 1)
        (work / rel).write_text(text)
        patch = dest / f"{number:04d}-{name}.patch"
        patch.write_text(f"Stand-in of our {name} patch.\n\n" + _git(work, "diff") + "\n")
        _git(work, "commit", "-q", "-am", name)
        names.append(patch.name)
    return names


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "stand-in", "GIT_AUTHOR_EMAIL": "standin@example.invalid",
           "GIT_COMMITTER_NAME": "stand-in", "GIT_COMMITTER_EMAIL": "standin@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=60).stdout.strip()


def make_git_repository(root: Path) -> dict[str, str]:
    """Branches master (P3 build), baseline (the p3 repository's baseline branch: baseline build with example/sockeye),
    anand-baseline (anand-mxnet's baseline: no example/sockeye) and broken; returns each branch's commit."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "master")
    commits = {}
    for branch, build, broken, sockeye in (("master", "p3", False, True), ("baseline", "baseline", False, True),
                                           ("anand-baseline", "baseline", False, False), ("broken", "p3", True, True)):
        if branch != "master":
            _git(root, "checkout", "-q", "-b", branch, "master")
        _git(root, "rm", "-rq", "--ignore-unmatch", "example/sockeye")
        write_tree(root, build, broken, sockeye)
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


def standin_settings(repo: Path, patches: Path, package: str) -> list[str]:
    """`ck install` settings for the stand-in: its repository, our patches restated for its files, and for the
    baseline package the real layout (anand-mxnet's branch without Sockeye, which comes from the p3 repository)."""
    args = [f"--env.PACKAGE_URL={repo}", f"--env.ARTIFACT_PATCH_DIR={patches}"]
    if package == "sysml19-p3-baseline-github":
        args += ["--env.PACKAGE_BRANCH=anand-baseline", f"--env.SOCKEYE_URL={repo}"]
    return args


def artifact_envs(ck: CkCli) -> dict[str, dict]:
    """Registered artifact builds by their env UID: their CK_ENV_TOOL_SYSML19_P3* variables."""
    found = json.loads(ck("search", "env", "--tags=tool,p3", "--add_meta", "--out=json", check=True).stdout)["lst"]
    return {e["data_uid"]: e["meta"]["env"] for e in found}
