"""A stand-in role process for launcher tests: behaves by DMLC_ROLE and DMLC_WORKER_ID.

    fake_role.py [--fail ROLE#I:CODE] [--hang ROLE#I] [--raise-and-hang ROLE#I] [--speed N] [--report-forever S]

Workers print Speedometer lines and a checksum, then exit 0, unless told to
fail or hang. Scheduler and servers wait until every worker has written its
done-file in the working folder (as MXNet's roles wait for the job), then exit 0.
"""
import argparse
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--fail", default="")
parser.add_argument("--hang", default="")
parser.add_argument("--raise-and-hang", default="", help="print a traceback, then never exit (MXNet work pending)")
parser.add_argument("--speed", type=float, default=100.0)
parser.add_argument("--report-forever", type=float, default=0.0,
                    help="workers print a speed report every this many seconds and never finish")
parser.add_argument("--spawn-child", action="store_true", help="leave a grandchild running, as real roles may")
args = parser.parse_args()

kind = os.environ["DMLC_ROLE"]
name = kind if kind == "scheduler" else f"{kind}#{os.environ.get('DMLC_WORKER_ID', '0')}"
num_workers = int(os.environ["DMLC_NUM_WORKER"])
print(f"{name} started pid={os.getpid()}", flush=True)
# As program/p3/role_van.py logs it: the van this role's environment gives it.
print(f"ps-van: role={kind} van={os.environ.get('DMLC_PS_VAN_TYPE') or 'zmq'}", flush=True)
if args.spawn_child:
    import subprocess
    subprocess.Popen(["sleep", "3600"])

if args.hang == name:
    time.sleep(3600)
if args.raise_and_hang == name:
    print("Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n"
          "mxnet.base.MXNetError: Traceback (most recent call last):\n  File \"src/io/iter_image_recordio_2.cc\", "
          "line 1\n[00:00:00] src/io/iter_image_recordio_2.cc:1: Check failed: number of input images must be "
          "bigger than the batch size", file=sys.stderr, flush=True)
    time.sleep(3600)
if args.fail.split(":")[0] == name:
    print(f"{name} failing", file=sys.stderr, flush=True)
    print(f"ValueError: {name} failed on purpose", file=sys.stderr, flush=True)
    sys.exit(int(args.fail.split(":")[1]))

if kind == "worker" and args.report_forever:
    batch = 0
    while True:
        print(f"Epoch[0] Batch [{batch}-{batch + 10}]\tSpeed: {args.speed:.2f} samples/sec", file=sys.stderr, flush=True)
        batch += 10
        time.sleep(args.report_forever)
if kind == "worker":
    rank = int(os.environ["DMLC_WORKER_ID"])
    for first in (0, 10, 20):
        print(f"2026-01-01 00:00:00,000 Epoch[0] Batch [{first}-{first + 10}]\tSpeed: {args.speed:.2f} "
              f"samples/sec\taccuracy=0.1", file=sys.stderr, flush=True)
    print(f"Parameter checksum: rank={rank} sha256={'ab' * 32} params=3", file=sys.stderr, flush=True)
    open(f"done-{rank}", "w").close()
else:
    while not all(os.path.exists(f"done-{r}") for r in range(num_workers)):
        time.sleep(0.05)
sys.exit(0)
