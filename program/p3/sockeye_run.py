"""One role of a distributed Sockeye run: Sockeye's own trainer, launched the way the original workflow did.

Runs inside the engine's interpreter, where `ck install package:lib-sockeye`
put Sockeye 1.18 (MXNet-based) beside MXNet. Scheduler and server roles are
started and finished by importing mxnet (DMLC_ROLE), as for train.py. A worker
runs ``sockeye.train`` with the original workflow's architecture (RNN
encoder-decoder, 2:2 LSTM layers, 512 hidden units, 512:512 embeddings, MLP
attention 512, bucket width 10) and a dist kvstore. What this launcher adds:

- the corpus: the IWSLT15 folder given by --data-dir, or a synthetic corpus it
  writes into the worker's folder (reprokit.wire.synthetic_corpus);
- Sockeye's Speedometer period (its constant MEASURE_SPEED_EVERY) set from
  --disp-batches, so short runs report; the log lines are Sockeye's own;
- two fixes that make Sockeye 1.18 run with a dist kvstore at all: servers load
  Sockeye before serving (they unpickle its optimizer), and checkpoints skip the
  optimizer state, which lives on the servers;
- for every variant, the p3-comm line (communication wait, overlap and the
  mechanism that ran) and, with --timeline, a Chrome trace
  (comm_probes.instrument_modules); with --p3-priority 0, every push and pull
  at priority 0;
- afterwards, the checksum of the trained parameters, logged like train.py's,
  so the launcher can check that every worker ended in step.

The variants differ only in the environment every role gets, as for train.py:
under MXNet's own P3 (DMLC_PS_VAN_TYPE=p3) Module itself updates on the
workers, since the P3 store reports no server-side optimizer.
"""
import argparse
import gc
import hashlib
import os
import sys

import role_exit  # shipped beside this file; standard library only
from reprokit.wire import role_van  # shipped beside this file, in reprokit/wire/; standard library only

role_van.check()  # before MXNet starts a server or scheduler role: one van for the whole job
ROLE = os.environ.get("DMLC_ROLE", "worker")
if ROLE == "worker":
    # Sockeye starts its forkserver before MXNet is loaded (it refuses to otherwise).
    import sockeye.multiprocessing_utils

    sockeye.multiprocessing_utils.initialize()
    import mxnet as mx
else:
    # Servers unpickle Sockeye's optimizer and learning-rate schedule, whose modules import
    # mxnet: while importing mxnet runs the server, that import is incomplete and they fail.
    # So load both with the role hidden, then start the role the way importing mxnet does.
    del os.environ["DMLC_ROLE"]
    import mxnet as mx
    import sockeye.lr_scheduler  # noqa: F401
    import sockeye.optimizers  # noqa: F401
    from mxnet.kvstore import kvstore_server

    os.environ["DMLC_ROLE"] = ROLE
    kvstore_server._init_kvstore_server_module()  # serves until the job ends, then exits
    sys.exit(f"sockeye_run: MXNet did not start the {ROLE} role (DMLC_ROLE={ROLE})")

from comm_probes import flatten_priorities, instrument_modules, mechanism  # noqa: E402
from reprokit.wire import synthetic_corpus  # noqa: E402  shipped beside this file, in reprokit/wire/

# The original workflow's Sockeye architecture (see the program's README).
ARCHITECTURE = ["--encoder", "rnn", "--decoder", "rnn", "--num-layers", "2:2", "--rnn-cell-type", "lstm",
                "--rnn-num-hidden", "512", "--num-embed", "512:512", "--rnn-attention-type", "mlp",
                "--rnn-attention-num-hidden", "512", "--bucket-width", "10"]
# Sockeye refuses adaptive learning-rate schedules with a dist kvstore; this is the fixed one it suggests.
DIST_LR_SCHEDULE = ["--learning-rate-scheduler-type", "fixed-rate-inv-sqrt-t"]


def parse_args(argv):
    # What the run always passes is required: its defaults live in the core (run/settings.py), once.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="", help="model folder of worker 0 (others add .worker-N)")
    parser.add_argument("--data-dir", default="", help="IWSLT15 en-vi folder; empty: a synthetic corpus")
    parser.add_argument("--batch-size", type=int, required=True, help="sentences per batch")
    parser.add_argument("--num-epochs", type=int, required=True)
    parser.add_argument("--num-batches", type=int, required=True, help="updates in all; 0: --num-epochs full epochs")
    parser.add_argument("--disp-batches", type=int, required=True)
    parser.add_argument("--kv-store", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--variant", required=True, help="the run's variant, for the p3-comm line")
    parser.add_argument(role_van.VAN_OPTION, required=True,
                        help="the ps-lite van every role of the run must have (role_van.py checks it)")
    parser.add_argument("--p3-priority", type=int, choices=(0, 1), required=True,
                        help="1: Module's priorities (layers nearer the input first); 0: every push priority 0")
    parser.add_argument("--timeline", default="",
                        help="each worker writes a Chrome trace of its communication here "
                             "({rank} is replaced; otherwise .worker-RANK goes before the suffix)")
    parser.add_argument("--save-params", default="", help="rank 0 saves its trained parameters here (.npz)")
    return parser.parse_args(argv)


def sockeye_arguments(args, data_dir, output):
    # --checkpoint-interval: Sockeye 1.18's name (its older --checkpoint-frequency logs a deprecation warning).
    run_length = (["--max-updates", str(args.num_batches), "--checkpoint-interval", str(args.num_batches)]
                  if args.num_batches else ["--max-num-epochs", str(args.num_epochs)])
    return ["-s", os.path.join(data_dir, "train.en"), "-t", os.path.join(data_dir, "train.vi"),
            "-vs", os.path.join(data_dir, "tst2012.en"), "-vt", os.path.join(data_dir, "tst2012.vi"),
            "-o", output, *ARCHITECTURE, "--batch-size", str(args.batch_size), "--batch-type", "sentence",
            *run_length, "--kvstore", args.kv_store, *(DIST_LR_SCHEDULE if "dist" in args.kv_store else []),
            "--use-cpu", "--disable-device-locking", "--decode-and-evaluate", "0", "--seed", str(args.seed),
            "--overwrite-output"]


def trained_parameters(output):
    """Sockeye's last checkpoint: {name: NDArray} of the trainable (arg:) parameters."""
    saved = mx.nd.load(os.path.join(output, "params.best"))
    return {name.split(":", 1)[1]: array for name, array in saved.items() if name.startswith("arg:")}


def parameter_checksum(params):
    digest = hashlib.sha256()
    for name in sorted(params):
        digest.update(name.encode())
        digest.update(params[name].asnumpy().tobytes())
    return digest.hexdigest()


def main(argv=None):
    args = parse_args(argv)
    worker = int(os.environ.get("DMLC_WORKER_ID", "0"))
    workdir = os.path.abspath(f"sockeye-worker-{worker}")  # roles on one host share the run folder
    data_dir = args.data_dir
    if not data_dir:
        data_dir = os.path.join(workdir, "corpus")
        synthetic_corpus.write_corpus(data_dir, seed=args.seed)
    output = args.output and (args.output if worker == 0 else f"{args.output}.worker-{worker}")
    output = os.path.abspath(output or os.path.join(workdir, "model"))

    import mxnet.module.module as module_impl
    import sockeye.constants
    import sockeye.train
    import sockeye.training

    sockeye.constants.MEASURE_SPEED_EVERY = args.disp_batches
    # With a dist kvstore the optimizer state lives on the servers, and Sockeye's checkpoint would
    # fail on saving it ("Cannot save states for distributed training"); Sockeye cannot continue a
    # distributed run from it anyway, so checkpoints keep the parameters only.
    sockeye.training.TrainingModel.save_optimizer_states = lambda self, fname: None
    if not args.p3_priority:
        flatten_priorities()
    probes = instrument_modules(args.variant, args.timeline)
    ranks, updates_on_servers = [], []
    initialize = module_impl._initialize_kvstore

    def initialize_and_note_rank(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
        ranks.append(kvstore.rank)  # the rank MXNet assigned at registration
        updates_on_servers.append(update_on_kvstore)  # Module's own decision
        return initialize(kvstore, param_arrays, arg_params, param_names, update_on_kvstore)

    module_impl._initialize_kvstore = initialize_and_note_rank

    sockeye_argv = sockeye_arguments(args, data_dir, output)
    print("sockeye_run: python -m sockeye.train " + " ".join(sockeye_argv), flush=True)
    sys.argv = ["sockeye.train", *sockeye_argv]
    sockeye.train.main()
    # Each worker logs its p3-comm line (comm_probes.py documents it).
    ran = mechanism(bool(updates_on_servers and updates_on_servers[0]), args.p3_priority)
    for report in probes.values():
        report.close(ran)
    probes.clear()

    params = trained_parameters(output)
    rank = ranks[0] if ranks else worker
    if args.save_params and rank == 0:
        import numpy as np

        role_exit.save_output("SAVE_PARAMS", args.save_params, lambda: np.savez(
            args.save_params, **{name: array.asnumpy() for name, array in params.items()}))
    # The last line: every output is written. Under the P3 van the process then never exits by itself
    # (ps-lite's sender thread is never joined), so the launcher ends it once every worker printed this.
    print(f"Parameter checksum: rank={rank} sha256={parameter_checksum(params)} params={len(params)}", flush=True)
    # Free the kvstore now: its destructor tells the scheduler this worker is done. Left to
    # interpreter exit (Sockeye's objects hold it in cycles), it is never freed and the process aborts.
    gc.collect()
    return 0


if __name__ == "__main__":
    role_exit.run(main)
