"""A parameter-server job of one scheduler, one server and one worker on 127.0.0.1, each running the same script in
the engine's interpreter; the worker's last line is its answer (JSON)."""
import json
import os
import subprocess
from pathlib import Path

from reprokit.core.shipping import stage, wire_files
from reprokit.run.jobprep import FREE_PORT_CODE

P3_DIR = Path(__file__).resolve().parents[2] / "program" / "p3"


def free_port():
    """The launchers' own choice of a scheduler port: below the ephemeral range, so no role's bind(0) or outgoing
    connection takes it before the scheduler binds it."""
    namespace: dict = {}
    exec(FREE_PORT_CODE, namespace)
    return namespace["free_port"]()


def one_worker_job(python, tmp_path, script_text, args, env=None, timeout=180):
    """Runs ``script_text`` as ``python script P3_DIR *args`` in each role, in ``tmp_path`` (where reprokit.wire is
    shipped, as a run ships it beside the scripts); returns the worker's last line, parsed.

    The worker may leave without saying goodbye (os._exit), so the scheduler and the server are ended here."""
    script = tmp_path / "job.py"
    script.write_text(script_text)
    stage(wire_files(), tmp_path)
    common = {**os.environ, "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()),
              "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "1", "DMLC_NODE_HOST": "127.0.0.1", "OMP_NUM_THREADS": "1",
              **(env or {})}
    argv = [python, str(script), str(P3_DIR), *map(str, args)]
    procs = [subprocess.Popen(argv, env={**common, "DMLC_ROLE": role}, stdin=subprocess.DEVNULL, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for role in ("scheduler", "server", "worker")]
    try:
        out, err = procs[2].communicate(timeout=timeout)
        assert procs[2].returncode == 0, err[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    return json.loads(out.strip().splitlines()[-1])


# The late key's rounds, for a worker script that made ``kv`` (its kvstore), ``arrays`` (KEYS + 1 arrays given to the
# store) and ``keys`` and ``rounds``, and imported mxnet as mx and engine_probe's Engine: each round pushpulls the
# arrays at falling priorities, the last (the late key) at the highest, and ``ranks`` gets where the late key's
# pushpull completed among them (engine probes).
LATE_KEY_ROUNDS = """
mx.nd.waitall()
engine, ranks = Engine(), []
for _ in range(rounds):
    done = []
    for i, array in enumerate(arrays):
        array[:] = 1
        late = i == keys
        kv.pushpull(i, array, priority=0 if late else -1 - i)
        engine.probe(lambda t, i=i: done.append((t, i)), const=[array])
    mx.nd.waitall()
    order = [i for _, i in sorted(done)]
    ranks.append(order.index(keys))
"""
