"""OAR's real oarsh (Debian's oar-node 2.5.9) as the launcher: `ck run program:p3` inside an OAR job on the namespace
testbed, every role an `oarsh HOST COMMAND` through OAR's sshd on port 6667, oarsh_shell and oardodo.

No OAR server runs (it needs a database): the job's node side is set up by hand as OAR would for a job submitted
with a job key (tests/support/oar.py). Needs root, sshd and oar-node (`make test` installs them as root); CI runs
as root, so there these tests fail rather than skip.
"""
import json
import os
import re
import subprocess
import time

import pytest

from support.ckcli import own_ck
from support.oar import oar_job
from support.runs import assert_failed_naming_worker_1, kill_worker_1_of, no_process_left, run_processes, wait_for
from support.testbed import require_root_and_sshd

pytestmark = pytest.mark.root
NAME = "oa3"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    require_root_and_sshd()
    ck = own_ck(tmp_path_factory.mktemp("ck"))
    proc = ck("testbed", f"cluster:{NAME}", "--hosts=3", timeout=120)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        state = ck.root / "tools" / f"testbed-{NAME}"
        with oar_job(NAME, state, 3) as (prefix, environ):
            yield prefix, environ
    finally:
        ck("testbed", f"cluster:{NAME}", "--down", timeout=60)


def in_job(job, argv, env, **kwargs):
    prefix, environ = job
    return subprocess.run([*prefix, *argv], env={**env, **environ}, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, **kwargs)


def test_the_real_oarsh_reaches_each_node_as_the_job_user_through_oarsh_shell(job):
    proc = in_job(job, ["oarsh", "h3", "echo $(id -un) $(ip -4 -o addr show dev eth0 | awk '{print $4}') "
                        "$OAR_JOB_USER $OAR_CPUSET $SSH_CONNECTION"], os.environ, timeout=30)
    assert proc.returncode == 0, proc.stderr
    user, address, job_user, cpuset, _, _, server, port = proc.stdout.split()
    assert (user, address, job_user, cpuset, server, port) == ("root", "10.77.0.3/24", "root", "undef", "10.77.0.3",
                                                               "6667")


def ck_run_in_job(ck, job, run_dir, *args, log):
    prefix, environ = job
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [*prefix, ck.exe, "run", "program:p3", f"--tmp_dir={run_dir}", "--out=json_file",
            f"--out_file={run_dir / 'ck-output.json'}", "--treat_return_code_as_exit_code=yes", "--cmd_key=resnet",
            "--env.PROFILE=smoke", *args]
    return subprocess.Popen(argv, env={**ck.env, **environ}, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, cwd=ck.root)


def through_oarsh(run_id):
    """{(DMLC_ROLE, node address)} of the run's roles whose process came through OAR's sshd and oarsh_shell."""
    seen = set()
    for pid in run_processes(run_id):
        try:
            environ = dict(v.split(b"=", 1) for v in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in v)
        except OSError:
            continue
        if environ.get(b"OAR_JOB_USER") == b"root" and environ.get(b"SSH_CONNECTION", b"").endswith(b" 6667") \
                and b"DMLC_ROLE" in environ:
            seen.add((environ[b"DMLC_ROLE"].decode(), environ.get(b"DMLC_NODE_HOST", b"").decode()))
    return seen


def test_inside_an_oar_job_every_role_starts_through_oarsh_and_training_succeeds(ck, job, tmp_path):
    run_dir = tmp_path / "run"
    started = time.monotonic()
    roles = set()
    with open(tmp_path / "out.txt", "w") as log:
        run = ck_run_in_job(ck, job, run_dir, "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8",
                            log=log)
        try:
            spec = run_dir / "p3-run.json"
            assert wait_for(spec.exists, timeout=120)
            run_id = json.loads(spec.read_text())["plan"]["run_id"]
            while run.poll() is None and time.monotonic() - started < 300:
                roles |= through_oarsh(run_id)
                time.sleep(0.2)
            run.wait(timeout=10)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=10)
    output = (tmp_path / "out.txt").read_text()
    assert run.returncode == 0, output[-4000:]
    nodefile = job[1]["OAR_NODEFILE"]
    assert f"p3: hosts from nodefile {nodefile}: h1, h2, h3" in output
    assert re.search(r"p3: plan: 1 scheduler, 3 server\(s\), 3 worker\(s\) on h1, h2, h3; .*launcher oarsh", output)
    assert "p3: OK" in output
    for prefix in ("[h1 scheduler] ", "[h1 worker#0] ", "[h2 worker#1] ", "[h3 worker#2] ", "[h3 server#2] "):
        assert prefix in output
    # Every one of the 7 roles was seen running in an oarsh session on its node.
    assert {"scheduler", "server", "worker"} == {kind for kind, _ in roles}
    assert {(k, a) for k, a in roles if k != "scheduler"} == {(k, f"10.77.0.{i}") for k in ("server", "worker")
                                                              for i in (1, 2, 3)}, roles
    saved = json.loads((run_dir / "p3-run.json").read_text())
    assert saved["launcher"] == "oarsh"
    assert saved["plan"]["addresses"] == {"h1": "10.77.0.1", "h2": "10.77.0.2", "h3": "10.77.0.3"}
    c = json.loads((run_dir / "ck-output.json").read_text())["characteristics"]
    assert c["hosts"] == ["h1", "h2", "h3"] and c["params_in_sync"] is True
    assert json.loads((run_dir / "launch.json").read_text())["warnings"] == []
    assert no_process_left(run_id)
    assert not subprocess.run(["pgrep", "-f", "^/usr/bin/ssh -p 6667"], capture_output=True).stdout


def test_a_killed_role_fails_the_run_naming_it_and_leaves_nothing(ck, job, tmp_path):
    run_dir = tmp_path / "run"
    ended = kill_worker_1_of(lambda log: ck_run_in_job(ck, job, run_dir, "--env.NUM_BATCHES=1000", log=log),
                             run_dir, tmp_path / "out.txt")
    assert_failed_naming_worker_1(*ended)
    assert not subprocess.run(["pgrep", "-f", "^/usr/bin/ssh -p 6667"], capture_output=True).stdout


def test_ck_check_cluster_inside_the_job_checks_what_oarsh_needs(ck, job, tmp_path):
    proc = in_job(job, [ck.exe, "check", "cluster", f"--tmp_dir={tmp_path}"], ck.env, timeout=120, cwd=ck.root)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert re.search(r"host +oarsh +python +cores +run folder +result", output)
    for host in ("h1", "h2", "h3"):
        assert re.search(rf"{host} +ok +ok +\d+ +ok +ok", output), output
    assert "cluster: all 3 host(s) ready for the oarsh launcher" in output
    assert not list(tmp_path.iterdir())  # its probe folder is gone


def test_ck_check_cluster_names_a_node_oarsh_cannot_reach_in_one_line(ck, job, tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("h1\nh2\nh9\n")  # h9: not a node of this testbed
    prefix, environ = job
    proc = subprocess.run([*prefix, ck.exe, "check", "cluster", f"--tmp_dir={tmp_path}"],
                          env={**ck.env, **environ, "OAR_NODEFILE": str(nodefile)}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, cwd=ck.root)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "oarsh h9 true failed (" in output and "is h9 a node of this OAR job" in output, output
    assert re.search(r"h1 +ok +ok +\d+ +ok +ok", output)
    assert "Traceback" not in output


def test_oarsh_outside_an_oar_job_is_refused_in_one_line(ck, tmp_path):
    proc, _ = ck.run_p3(tmp_path, "--cmd_key=resnet", "--env.LAUNCHER=oarsh", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert output.count("--env.LAUNCHER=oarsh starts each role through oarsh on the nodes of an OAR job, but "
                        "OAR_JOB_ID and OAR_NODEFILE are not set here") == 1
    assert "Traceback" not in output
