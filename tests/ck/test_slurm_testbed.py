"""A real Slurm (Debian 12's slurmctld, slurmd, slurm-client 22.05 and munge) on the namespace testbed:
`ck testbed cluster:NAME --hosts=N --scheduler=slurm`, and `ck run program:p3` inside one of its allocations, every
role a job step (the srun launcher).

Needs root and the Slurm packages (`make test` installs them as root); CI runs as root, so there these tests fail
rather than skip.
"""
import json
import os
import re
import signal
import stat
import subprocess
import time

import pytest

from support.ckcli import own_ck
from support.runs import assert_failed_naming_worker_1, kill_worker_1_of, no_process_left, wait_for
from support.testbed import require_slurm, slurm

pytestmark = pytest.mark.root
NAME = "sl3"
DAEMONS = ("munged", "slurmctld", "slurmd")


@pytest.fixture(scope="module")
def slurm3(tmp_path_factory):
    require_slurm()
    ck = own_ck(tmp_path_factory.mktemp("ck"))
    start = time.monotonic()
    proc = ck("testbed", f"cluster:{NAME}", "--hosts=3", "--scheduler=slurm", timeout=120)
    took = time.monotonic() - start
    state = tmp_path_factory.getbasetemp() / "never-created"
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        state = ck.root / "tools" / f"testbed-{NAME}"
        yield ck, state, proc.stdout, took
    finally:
        ck("testbed", f"cluster:{NAME}", "--down", timeout=60)


def test_the_testbed_comes_up_with_every_node_idle_and_describes_its_scheduler(slurm3):
    ck, state, output, took = slurm3
    assert took < 60
    assert f"testbed {NAME}: Slurm nodes h1, h2, h3 idle after" in output
    scheduler = json.loads((state / "testbed.json").read_text())["scheduler"]
    conf = state / "slurm" / "slurm.conf"
    assert scheduler["type"] == "slurm" and scheduler["version"].startswith("slurm")
    assert scheduler["client"] == ["ip", "netns", "exec", f"rk-{NAME}-sw", "env", f"SLURM_CONF={conf}"]
    assert scheduler["nodes"] == ["h1", "h2", "h3"]
    assert " ".join(scheduler["client"]) in output
    text = conf.read_text()
    assert f"SlurmctldHost={NAME}-ctl(10.77.0.254)" in text
    assert f"NodeName=h[1-3] NodeAddr=10.77.0.[1-3] CPUs={os.cpu_count()} State=UNKNOWN" in text
    assert f"AuthInfo=socket={state / 'munge' / 'munge.socket'}" in text
    key = (state / "munge" / "munge.key").stat()
    assert (key.st_uid, stat.S_IMODE(key.st_mode)) == (0, 0o400)
    assert json.loads((state / "slurm-job.json").read_text()) == {"slurm": {"nodes": 3, "time": "00:30:00"}}
    assert (f"ck add machine:{NAME}-slurm --type=cluster --config_file={state / 'slurm-job.json'} --quiet\n  "
            f"{' '.join(scheduler['client'])} ck run program:p3 --target={NAME}-slurm --submit --cmd_key=resnet"
            in output)
    nodes = slurm(state, "sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
    assert sorted(line for line in nodes if line) == ["h1 idle", "h2 idle", "h3 idle"]


def test_srun_runs_one_task_on_each_host_in_its_namespace(slurm3):
    _, state, _, _ = slurm3
    proc = slurm(state, "srun", "-N3", "sh", "-c", "echo $(hostname) $(ip -4 -o addr show dev eth0)")
    seen = sorted(re.match(r"(h\d) .* inet (10\.77\.0\.\d)/24", line).groups() for line in proc.stdout.splitlines())
    assert seen == [("h1", "10.77.0.1"), ("h2", "10.77.0.2"), ("h3", "10.77.0.3")]
    hostnames = slurm(state, "srun", "-N3", "hostname").stdout.split()
    assert sorted(hostnames) == ["h1", "h2", "h3"]


def test_a_three_node_batch_job_runs_and_squeue_sees_it(slurm3, tmp_path):
    _, state, _, _ = slurm3
    out = tmp_path / "job.out"
    submitted = slurm(state, "sbatch", "-N3", f"--output={out}", "--wrap", "srun hostname; sleep 3").stdout
    job = re.search(r"Submitted batch job (\d+)", submitted).group(1)
    queued = slurm(state, "squeue", "-h", "-j", job, "-o", "%i %D %T").stdout.split()
    assert queued[:2] == [job, "3"] and queued[2] in ("PENDING", "CONFIGURING", "RUNNING")
    assert wait_for(lambda: not slurm(state, "squeue", "-h", "-j", job, check=False).stdout.strip(), timeout=30)
    assert sorted(out.read_text().split()) == ["h1", "h2", "h3"]


def step_processes(pattern):
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


def test_scancel_stops_every_task_of_a_running_job_step(slurm3):
    _, state, _, _ = slurm3
    client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
    pattern = "^(/usr/bin/)?sleep 6017$"  # a length nothing else on this machine sleeps
    run = subprocess.Popen([*client, "srun", "-N3", "--job-name=sleeper", "sleep", "6017"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=state)
    try:
        assert wait_for(lambda: len(step_processes(pattern)) == 3, timeout=30), step_processes(pattern)
        job = slurm(state, "squeue", "-h", "-n", "sleeper", "-o", "%i").stdout.strip()
        assert job.isdigit()
        cancelled = time.monotonic()
        slurm(state, "scancel", job)
        assert wait_for(lambda: not step_processes(pattern), timeout=10), step_processes(pattern)
        assert time.monotonic() - cancelled < 10
        output, _ = run.communicate(timeout=20)
        # srun says CANCELLED, or is itself terminated by the cancel before it can (exit 143, both seen in CI).
        assert run.returncode != 0 and ("CANCELLED" in output or "Terminated" in output), (run.returncode, output)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)


def test_down_leaves_no_daemon_namespace_or_file(tmp_path):
    """Its own testbed (2 hosts), so the module's stays up for the others."""
    require_slurm()
    ck = own_ck(tmp_path / "ck")
    proc = ck("testbed", "cluster:sldn", "--hosts=2", "--scheduler=slurm", timeout=120)
    state = ck.root / "tools" / "testbed-sldn"
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # A job step still running when the testbed goes down.
        client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
        sleeper = subprocess.Popen([*client, "srun", "-N2", "sleep", "6018"], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=state)
        assert wait_for(lambda: len(step_processes("^(/usr/bin/)?sleep 6018$")) == 2, timeout=30)
        pids = [int((state / f).read_text()) for f in ("munge/munged.pid", "slurm/slurmctld.pid", "h1/slurmd.pid",
                                                       "h2/slurmd.pid")]
    finally:
        down = ck("testbed", "cluster:sldn", "--down", timeout=60)
    assert down.returncode == 0 and "removed 3 namespace(s)" in down.stdout
    sleeper.wait(timeout=10)
    # Killed daemons are gone, or zombies until init reaps them: none runs.
    assert not [pid for pid in pids if running(pid)]
    assert not step_processes(str(state))  # every daemon's command line names the state folder
    assert not step_processes("^(/usr/bin/)?sleep 6018$")
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "rk-sldn-" not in namespaces
    assert not any(p.startswith("rk-sldn-") for p in (os.listdir("/etc/netns") if os.path.isdir("/etc/netns") else []))
    assert not state.exists()


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_an_unknown_scheduler_is_refused_in_one_line(tmp_path):
    ck = own_ck(tmp_path / "ck")
    proc = ck("testbed", "cluster:slbad", "--hosts=2", "--scheduler=pbs", timeout=60)
    assert proc.returncode == 1
    assert "scheduler 'pbs' is not one the testbed runs; give --scheduler=slurm" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "rk-slbad-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


# ---- srun as the launcher: `ck run program:p3` inside an allocation of the Slurm testbed ----

def salloc_ck_run(ck, state, run_dir, *args, log):
    """`salloc -N3 ck run program:p3 ...` on the testbed's Slurm (from its switch namespace), output into ``log``."""
    client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [*client, "salloc", "-N3", "--time=15", ck.exe, "run", "program:p3", f"--tmp_dir={run_dir}",
            "--out=json_file", f"--out_file={run_dir / 'ck-output.json'}", "--treat_return_code_as_exit_code=yes",
            "--cmd_key=resnet", *args]
    return subprocess.Popen(argv, env=ck.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            cwd=ck.root)


def job_steps(state):
    """{step id: node list} of every running job step."""
    out = slurm(state, "squeue", "-s", "-h", "-o", "%i %N", check=False).stdout
    return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)


def test_a_killed_job_step_fails_the_run_naming_its_role_and_leaves_nothing(ck, slurm3, tmp_path):
    _, state, _, _ = slurm3
    run_dir = tmp_path / "run"
    ended = kill_worker_1_of(lambda log: salloc_ck_run(ck, state, run_dir, "--env.NUM_BATCHES=1000", log=log),
                             run_dir, tmp_path / "out.txt")
    assert_failed_naming_worker_1(*ended)
    assert wait_for(lambda: not job_steps(state), timeout=15), job_steps(state)  # Slurm's own cleanup of the step


def test_srun_outside_an_allocation_is_refused_in_one_line(ck, tmp_path):
    proc, _ = ck.run_p3(tmp_path, "--cmd_key=resnet", "--env.LAUNCHER=srun", timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert output.count("--env.LAUNCHER=srun starts each role as a job step of a Slurm allocation, but SLURM_JOB_ID "
                        "and SLURM_JOB_NODELIST are not set here") == 1
    assert "Traceback" not in output


# ---- --submit: `ck run program:p3 --target=MACHINE --submit`, hosts.json naming a Slurm job ----

def slurm_machine(ck, tmp_path, name, section):
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps({"slurm": section}))
    ck("add", f"machine:{name}", "--type=cluster", f"--config_file={config}", "--quiet", check=True)
    return name


def submit_ck_run(ck, state, run_dir, machine, *args, log):
    """`ck run program:p3 --target=MACHINE --submit ...` from the testbed's login side (its switch namespace)."""
    client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [*client, ck.exe, "run", "program:p3", f"--target={machine}", "--submit", f"--tmp_dir={run_dir}",
            "--cmd_key=resnet", *args]
    return subprocess.Popen(argv, env=ck.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            cwd=ck.root, start_new_session=True)


def finished(run, timeout):
    try:
        run.wait(timeout=timeout)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=10)


def test_submit_runs_p3_as_a_batch_job_every_role_a_job_step_and_prints_its_result(ck, slurm3, tmp_path):
    """The batch script runs in h1's namespace: the launcher's sruns start from a node, not from the switch; inside
    the job the run is what `salloc -N3 ck run ...` runs (the srun launcher on the allocation's nodes)."""
    _, state, _, _ = slurm3
    machine = slurm_machine(ck, tmp_path, "slsub", {"nodes": 3, "time": "00:15:00", "extra": ["--job-name=p3 it's"]})
    run_dir = tmp_path / "run"
    steps = {}
    with open(tmp_path / "out.txt", "w") as log:
        run = submit_ck_run(ck, state, run_dir, machine, "--env.VARIANT=p3", "--env.NUM_BATCHES=6", "--env.BATCH_SIZE=8",
                            "--env.DISP_BATCHES=2", log=log)
        try:
            deadline = time.monotonic() + 300
            while run.poll() is None and time.monotonic() < deadline:
                steps.update(job_steps(state))
                time.sleep(0.3)
        finally:
            finished(run, 10)
    output = (tmp_path / "out.txt").read_text()
    assert run.returncode == 0, output[-4000:]
    job = re.search(r"p3: submitted Slurm job (\d+) \(--job-name=p3 --nodes=3 --time=00:15:00 --job-name=p3 it's\)",
                    output).group(1)
    assert f"p3: Slurm job {job} is running on h[1-3]" in output
    assert "p3: hosts from hostlist h[1-3]: h1, h2, h3" in output  # read inside the job
    assert re.search(r"p3: plan: 1 scheduler, 3 server\(s\), 3 worker\(s\) on h1, h2, h3; .*profile smoke; .*"
                     r"launcher srun", output)
    for prefix in ("[h1 scheduler] ", "[h1 worker#0] ", "[h2 worker#1] ", "[h3 worker#2] ", "[h3 server#2] "):
        assert prefix in output
    # One step per role, on its own node, besides the batch step and the probe and sweep steps that span the three.
    per_node = {node: sum(1 for step, n in steps.items() if n == node and not step.endswith(".batch"))
                for node in ("h1", "h2", "h3")}
    assert per_node == {"h1": 3, "h2": 2, "h3": 2}, steps
    spec = json.loads((run_dir / "job" / "p3-run.json").read_text())
    assert spec["launcher"] == "srun"
    assert spec["plan"]["addresses"] == {"h1": "10.77.0.1", "h2": "10.77.0.2", "h3": "10.77.0.3"}
    assert json.loads((run_dir / "job" / "launch.json").read_text())["warnings"] == []
    assert output.rstrip().splitlines()[-1] != ""  # the summary line is ours, after the job's output
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert result["run_success"] and result["variant"] == "p3" and result["params_in_sync"] is True
    assert result["ps_van"] == "p3"  # MXNet's own P3 in every role, each a job step
    assert result["hosts"] == ["h1", "h2", "h3"] and (result["num_workers"], result["num_servers"]) == (3, 3)
    assert result["batch_job"]["job_id"] == job and result["batch_job"]["state"] == "COMPLETED"
    assert result["batch_job"]["running_s"] > 0
    inner = json.loads((run_dir / "job" / "p3-result.json").read_text())
    assert inner["throughput_per_worker"] == result["throughput_per_worker"]
    name = slurm(state, "scontrol", "-o", "show", "job", job).stdout
    assert "JobName=p3 it's " in name  # an option reached sbatch as one argument, its quote intact
    assert no_process_left(spec["plan"]["run_id"])
    assert not job_steps(state)


def test_a_job_slurm_will_never_start_is_cancelled_at_once_naming_slurms_reason(ck, slurm3, tmp_path):
    _, state, _, _ = slurm3
    machine = slurm_machine(ck, tmp_path, "slbig", {"nodes": 5, "time": "00:15:00"})
    run_dir = tmp_path / "run"
    started = time.monotonic()
    with open(tmp_path / "out.txt", "w") as log:
        run = submit_ck_run(ck, state, run_dir, machine, log=log)
        finished(run, 120)
    output = (tmp_path / "out.txt").read_text()
    job = re.search(r"p3: submitted Slurm job (\d+)", output).group(1)
    assert run.returncode == 1, output[-3000:]
    # Slurm 22.05 says PartitionNodeLimit, or PartitionConfig when it checks the partition first (seen in CI).
    assert re.search(rf"p3: FAILED: Slurm job {job} was cancelled: Slurm will never start it as submitted \(reason "
                     r"Partition(NodeLimit|Config)\); change hosts.json's slurm section", output), \
        "\n".join(line for line in output.splitlines() if "p3:" in line or "slurm" in line.lower())
    assert time.monotonic() - started < 30
    assert not slurm(state, "squeue", "-h", "-j", job, check=False).stdout.strip()
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert not result["run_success"] and result["batch_job"]["state"] == "CANCELLED"
    assert not (run_dir / "job" / "p3-result.json").exists()
    assert "Traceback" not in output


@pytest.mark.parametrize("how", ["ctrl-c", "scancel"])
def test_a_submitted_run_stopped_here_or_cancelled_by_slurm_ends_the_job_and_leaves_nothing(ck, slurm3, tmp_path,
                                                                                             how):
    _, state, _, _ = slurm3
    machine = slurm_machine(ck, tmp_path, f"slstop{how[0]}", {"nodes": 3, "time": "00:15:00"})
    run_dir = tmp_path / "run"
    with open(tmp_path / "out.txt", "w") as log:
        run = submit_ck_run(ck, state, run_dir, machine, "--env.NUM_BATCHES=1000", log=log)
        try:
            worker = run_dir / "job" / "logs" / "worker-1.log"
            assert wait_for(lambda: worker.exists() and "worker rank" in worker.read_text(), timeout=120)
            job = re.search(r"p3: submitted Slurm job (\d+)", (tmp_path / "out.txt").read_text()).group(1)
            run_id = json.loads((run_dir / "job" / "p3-run.json").read_text())["plan"]["run_id"]
            stopped_at = time.monotonic()
            if how == "ctrl-c":
                os.killpg(run.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches ck and what it started
            else:
                slurm(state, "scancel", job)
            finished(run, 90)
            took = time.monotonic() - stopped_at
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    output = (tmp_path / "out.txt").read_text()
    assert run.returncode != 0, output[-3000:]
    result = json.loads((run_dir / "p3-result.json").read_text())
    assert result["status"] == ("interrupted" if how == "ctrl-c" else "failed")
    assert result["batch_job"]["state"] == "CANCELLED"
    expected = ("was cancelled: the command following it was stopped by SIGINT" if how == "ctrl-c" else
                "ended CANCELLED")
    assert f"p3: FAILED: Slurm job {job} {expected}" in output, output[-3000:]
    assert took < 30
    assert not slurm(state, "squeue", "-h", "-j", job, check=False).stdout.strip()
    assert no_process_left(run_id, timeout=10)
    assert "Traceback" not in output


def test_a_study_submitted_runs_as_one_job_every_run_inside_its_allocation(ck, slurm3, tmp_path):
    """The baseline, to completion under srun (the --submit test runs p3)."""
    _, state, _, _ = slurm3
    machine = slurm_machine(ck, tmp_path, "slstudy", {"nodes": 3, "time": "00:20:00"})
    client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
    store = tmp_path / "store"
    proc = subprocess.run([*client, ck.exe, "reproduce", "study:sysml19-p3", f"--target={machine}", "--submit",
                           f"--store={store}", "--models=resnet", "--variants=baseline", "--repetitions=1",
                           "--env.NUM_BATCHES=4", "--env.DISP_BATCHES=1", "--env.BATCH_SIZE=4",
                           "--env.WORKER_THREADS=1"], env=ck.env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=400, cwd=ck.root)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    job = re.search(r"study: submitted Slurm job (\d+) \(--job-name=p3 --nodes=3 --time=00:20:00\)", output).group(1)
    assert f"study: Slurm job {job} is running on h[1-3]" in output
    records = [json.loads(p.read_text()) for p in (store / "records").glob("*.json")]
    assert len(records) == 1 and records[0]["status"] == "ok", output[-3000:]
    assert records[0]["result"]["hosts"] == ["h1", "h2", "h3"]
    assert records[0]["config"]["target"]["hosts"] == ["h1", "h2", "h3"]  # the allocation, read inside the job
    assert (store / "jobs").is_dir() and list((store / "jobs").glob("*/job.sbatch"))


def test_check_cluster_asks_slurm_whether_it_would_take_the_job_and_checks_the_nodes_from_inside(ck, slurm3, tmp_path):
    _, state, _, _ = slurm3
    client = json.loads((state / "testbed.json").read_text())["scheduler"]["client"]
    fits = slurm_machine(ck, tmp_path, "slfits", {"nodes": 3, "time": "00:05:00"})
    too_big = slurm_machine(ck, tmp_path, "sltoobig", {"nodes": 5, "time": "00:05:00"})

    def check(*argv):
        return subprocess.run([*client, *argv], env=ck.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, cwd=ck.root)

    ok = check(ck.exe, "check", f"cluster:{fits}")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"cluster: Slurm would take the job \(--job-name=p3 --nodes=3 --time=00:05:00\): Job \d+ to "
                     r"start at \S+ using \d+ processors on nodes h\[1-3\] in partition debug", ok.stdout)
    refused = check(ck.exe, "check", f"cluster:{too_big}")
    assert refused.returncode != 0
    assert "Slurm would refuse the job: allocation failure: Requested node configuration is not available" in \
        refused.stdout + refused.stderr
    inside = check("salloc", "-N3", "--time=5", ck.exe, "check", "cluster")
    assert inside.returncode == 0, inside.stdout + inside.stderr
    rows = [line.split() for line in inside.stdout.splitlines() if re.match(r"h\d ", line)]
    assert rows == [[f"h{i}", "ok", "ok", str(os.cpu_count()), "ok", "ok"] for i in (1, 2, 3)]
    assert "cluster: all 3 host(s) ready for the srun launcher" in inside.stdout
    assert not slurm(state, "squeue", "-h", check=False).stdout.strip()  # --test-only queued nothing
