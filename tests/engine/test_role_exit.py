"""A worker whose training raises ends at once, non-zero, with MXNet work pending and its peers waiting
(program/p3/role_exit.py), in the engine's interpreter."""
import os
import subprocess
import time

from support.engine_job import P3_DIR, free_port

RAISE_MID_TRAINING = """
import os, sys
sys.path.insert(0, sys.argv[1])
import role_exit
import mxnet as mx  # the scheduler and server roles serve here

def main():
    kv = mx.kv.create("dist_sync")
    arrays = [mx.nd.ones((1000, 1000)) for _ in range(8)]
    kv.init(list(range(8)), arrays)
    if os.environ["DMLC_WORKER_ID"] == "1":  # the process the test watches (ranks are the scheduler's choice)
        for _ in range(50):  # work pending in the engine when the error comes
            arrays[0] = mx.nd.dot(arrays[0], arrays[1])
        raise ValueError("number of input images must be bigger than the batch size")
    for i, array in enumerate(arrays):
        kv.pushpull(i, array)  # waits for worker 1, which never pushes
    mx.nd.waitall()
    return 0

if sys.argv[2] == "guarded":
    role_exit.run(main)
else:
    sys.exit(main())
"""




def start_job(python, tmp_path, mode):
    script = tmp_path / "raise.py"
    script.write_text(RAISE_MID_TRAINING)
    port = free_port()
    env = {**os.environ, "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port), "DMLC_NUM_SERVER": "1",
           "DMLC_NUM_WORKER": "2", "DMLC_NODE_HOST": "127.0.0.1", "OMP_NUM_THREADS": "1"}
    roles = [{"DMLC_ROLE": "scheduler"}, {"DMLC_ROLE": "server"}, {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "0"},
             {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "1"}]
    return [subprocess.Popen([python, str(script), str(P3_DIR), mode], env={**env, **role}, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for role in roles]


def end(procs):
    """Kill what is left; each process's stderr ends up in ``stderr_text``."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for proc in procs:
        proc.stderr_text = proc.communicate(timeout=30)[1]


def wait_exit(proc, timeout):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return proc.returncode


def test_a_worker_that_raises_exits_at_once_with_its_error(engine_python, tmp_path):
    procs = start_job(engine_python, tmp_path, "guarded")
    try:
        began = time.monotonic()
        code = wait_exit(procs[3], timeout=60)
        took = time.monotonic() - began
    finally:
        end(procs)
    err = procs[3].stderr_text
    assert code == 1 and took < 30, err[-2000:]
    assert err.rstrip().splitlines()[-1] == "ValueError: number of input images must be bigger than the batch size"


def test_without_it_the_raised_worker_stays_alive(engine_python, tmp_path):
    """Why role_exit exists: left to Python, the same worker is still there long after its traceback."""
    procs = start_job(engine_python, tmp_path, "plain")
    try:
        assert wait_exit(procs[3], timeout=10) is None  # the guarded one exits in a few seconds (above)
    finally:
        end(procs)


CRASH_IN_A_THREAD = """
import os, signal, sys, threading
sys.path.insert(0, sys.argv[1])
import role_exit
import mxnet as mx

if sys.argv[2] == "named":
    role_exit.name_crashes()

def pushing_the_first_gradients():
    signal.pthread_kill(threading.get_ident(), signal.SIGSEGV)  # a fault in this thread, as a segfault arrives

thread = threading.Thread(target=pushing_the_first_gradients)
thread.start()
thread.join()
"""


def crash(python, tmp_path, mode):
    script = tmp_path / "crash.py"
    script.write_text(CRASH_IN_A_THREAD)
    return subprocess.run([python, str(script), str(P3_DIR), mode], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_a_crash_in_the_engine_names_every_threads_python_stack_and_mxnets_handler_still_runs(engine_python,
                                                                                              tmp_path):
    named, plain = crash(engine_python, tmp_path, "named"), crash(engine_python, tmp_path, "plain")
    assert named.returncode != 0 and plain.returncode != 0
    assert "Fatal Python error: Segmentation fault" in named.stderr, named.stderr[-2000:]
    assert "in pushing_the_first_gradients" in named.stderr  # the thread that crashed, by its Python line
    assert "\nThread 0x" in named.stderr  # and every other thread's stack
    assert "Segmentation fault: 11" in named.stderr  # MXNet's handler, chained after the stacks
    # Without it, only MXNet's line: where the crash happened is lost (as in the CI runs that crashed).
    assert "Segmentation fault: 11" in plain.stderr and "pushing_the_first_gradients" not in plain.stderr
