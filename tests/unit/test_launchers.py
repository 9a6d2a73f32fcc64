"""Which launcher a run takes, and the srun launcher's command lines (the real runs: tests/ck/test_slurm_testbed.py)."""

import io
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

from reprokit.cluster import testbed
from reprokit.cluster.slurm_testbed import SlurmState
from reprokit.core.errors import UserError
from reprokit.run import launchers, oarsh, srun
from reprokit.run.jobprep import JobRoleProcess
from reprokit.run.launch import OutputSink
from reprokit.run.launchers import check_allocated, check_in_job, choose_launcher, get_launcher, launcher_names
from reprokit.run.plan import Role
from reprokit.run.procscan import run_processes
from reprokit.run.remote import BEAT_ANSWER, role_command
from reprokit.run.settings import default_profile
from reprokit.run.spec import RunSpec
from reprokit.run.srun import role_argv
from support.runs import no_process_left, wait_for

ALLOCATION = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[01-03]"}
OAR_JOB = {"OAR_JOB_ID": "42", "OAR_NODEFILE": "/var/lib/oar/42"}


def oarsh_here(name):
    return "/usr/bin/oarsh" if name == "oarsh" else None


def no_oarsh(name):
    return None


def test_the_registry_knows_local_ssh_srun_and_oarsh():
    assert launcher_names() == ["local", "ssh", "srun", "oarsh"]
    with pytest.raises(UserError, match="launcher 'mpirun' is not one of local, ssh, srun, oarsh"):
        get_launcher("mpirun")


@pytest.mark.parametrize("setting, target, environ, chosen", [
    ("", False, {}, "local"),
    ("", True, {}, "ssh"),
    ("", False, ALLOCATION, "srun"),
    ("", True, ALLOCATION, "srun"),
    ("ssh", True, ALLOCATION, "ssh"),
    ("local", False, ALLOCATION, "local"),
    ("", False, {"SLURM_JOB_ID": "7"}, "local"),  # half an allocation is none
    (" srun ", False, ALLOCATION, "srun"),
    ("", False, OAR_JOB, "oarsh"),
    ("", True, OAR_JOB, "oarsh"),
    ("ssh", True, OAR_JOB, "ssh"),
    ("", False, {"OAR_JOB_ID": "42"}, "local"),  # half a job is none
    ("", False, {**OAR_JOB, **ALLOCATION}, "srun"),
])
def test_the_launcher_follows_the_allocation_and_the_target_unless_told(setting, target, environ, chosen):
    assert choose_launcher(setting, target, environ, which=oarsh_here).name == chosen


def test_inside_an_oar_job_without_oarsh_the_run_keeps_ssh_or_local():
    assert choose_launcher("", True, OAR_JOB, which=no_oarsh).name == "ssh"
    assert choose_launcher("", False, OAR_JOB, which=no_oarsh).name == "local"
    with pytest.raises(UserError, match="--env.LAUNCHER=oarsh needs OAR's oarsh on the PATH"):
        choose_launcher("oarsh", False, OAR_JOB, which=no_oarsh)


@pytest.mark.parametrize("setting, target, environ, message", [
    ("srun", False, {}, "--env.LAUNCHER=srun starts each role as a job step of a Slurm allocation, but SLURM_JOB_ID "
                        "and SLURM_JOB_NODELIST are not set here; run inside salloc or an sbatch script"),
    ("ssh", False, ALLOCATION, "--env.LAUNCHER=ssh needs --target=MACHINE"),
    ("local", True, {}, "--env.LAUNCHER=local runs every role on this machine: drop --target"),
    ("mpi", False, {}, "LAUNCHER 'mpi' is not a launcher; give local, ssh, srun, oarsh"),
    ("oarsh", False, {}, "--env.LAUNCHER=oarsh starts each role through oarsh on the nodes of an OAR job, but "
                         "OAR_JOB_ID and OAR_NODEFILE are not set here; run inside oarsub -I or an OAR batch script"),
])
def test_a_launcher_that_cannot_work_here_is_refused(setting, target, environ, message):
    with pytest.raises(UserError) as raised:
        choose_launcher(setting, target, environ, which=oarsh_here)
    assert message in str(raised.value)


def test_srun_needs_the_hosts_to_be_nodes_of_the_allocation():
    check_allocated(["node01", "node03"], ALLOCATION)
    with pytest.raises(UserError, match=r"host\(s\) node04 of the run are not nodes of this Slurm allocation "
                                        r"\(node\[01-03\]\).*--env.LAUNCHER=ssh"):
        check_allocated(["node01", "node04"], ALLOCATION)


def test_oarsh_needs_the_hosts_to_be_nodes_of_the_job():
    check_in_job(["n1", "n2"], ["n1", "n2", "n3"])
    with pytest.raises(UserError, match=r"host\(s\) n4 of the run are not nodes of this OAR job \(OAR_NODEFILE lists "
                                        r"n1, n2\); oarsh reaches the job's nodes only.*--env.LAUNCHER=ssh"):
        check_in_job(["n1", "n4"], ["n1", "n2"])


def test_an_answering_role_wrapper_acknowledges_each_heartbeat_on_stderr_and_merges_the_roles_stderr(tmp_path):
    """The wrapper the oarsh and srun launchers run, by a local sh: each byte in is one line of an ACK byte on
    stderr (a line: slurmstepd hands on whole lines only)."""
    command = role_command(str(tmp_path), {"X": "1"}, ["sh", "-c", "echo out; echo err >&2; sleep 1"], answer=True)
    proc = subprocess.run(["sh", "-c", command], input=b"...", capture_output=True, timeout=30)
    assert proc.returncode == 0
    assert proc.stderr == (BEAT_ANSWER + b"\n") * 3
    assert proc.stdout.split(b"\n")[1:] == [b"out", b"err", b""]
    plain = role_command(str(tmp_path), {"X": "1"}, ["true"])
    assert "006" not in plain and "4>&2" not in plain


def test_each_role_is_one_job_step_on_its_host_sharing_the_allocation():
    argv = role_argv("/usr/bin/srun", "node02", "/shared/run", ["/opt/py", "train.py", "--x"])
    assert argv == ["/usr/bin/srun", "--nodes=1", "--ntasks=1", "--nodelist=node02", "--overlap", "--export=ALL",
                    "--kill-on-bad-exit=1", "--chdir=/shared/run", "/opt/py", "train.py", "--x"]


def job_role(tmp_path, argv, run_id):
    """A role as the srun and oarsh launchers start one (jobprep.JobRoleProcess), through a local sh for the job's
    program: the same wrapper, stdin, stdout and stderr."""
    wrapper = role_command(str(tmp_path / "run"), {"REPROKIT_RUN_ID": run_id}, argv, answer=True)
    return JobRoleProcess(Role("worker", 1, "h2"), "sh", "job step", ["/bin/sh", "-c", wrapper], {},
                          OutputSink(io.StringIO(), tmp_path / "logs"))


@pytest.mark.parametrize("argv, code, said", [
    (["sh", "-c", "kill -KILL $$"], -9, "was killed by SIGKILL"), (["sh", "-c", "kill -TERM $$"], -15,
                                                                    "was killed by SIGTERM"),
    (["sh", "-c", "exit 3"], 3, "exited with code 3")])
def test_a_job_role_reports_its_exit_code_and_the_signal_that_killed_it(tmp_path, argv, code, said):
    """The wrapper exits with the shell's 128+N for a role killed by signal N; srun and oarsh exit with its code."""
    proc = job_role(tmp_path, argv, uuid.uuid4().hex)
    try:
        assert wait_for(lambda: proc.poll() is not None, 10)
        assert (proc.poll(), proc.describe(proc.poll())) == (code, said)
    finally:
        proc.terminate()
        proc.kill()
        proc.wait_output(5)


def test_a_stopped_job_role_is_seen_stopped_at_the_next_heartbeat_and_its_teardown_closes_stdin(tmp_path):
    """The srun and oarsh launchers' roles: the watchdog reports a stopped role on its output, which the role
    process reads as stopped() (not as the role's output); closing its stdin ends the role's group."""
    run_id = uuid.uuid4().hex
    ticker = [sys.executable, "-c", "import time\nwhile True:\n print('tick', flush=True); time.sleep(0.2)"]
    proc = job_role(tmp_path, ticker, run_id)
    try:
        assert wait_for(lambda: proc.pgid is not None, 10)
        [role] = wait_for(lambda: [p for p in run_processes(run_id) if open(f"/proc/{p}/cmdline", "rb").read()
                                   .startswith(sys.executable.encode() + b"\0")], 10)
        proc.beat()
        assert wait_for(lambda: proc.silent_for() < 1, 5)  # the heartbeat's answer
        assert not proc.stopped()
        os.kill(role, signal.SIGSTOP)
        assert not proc.stopped()
        proc.beat()
        assert wait_for(proc.stopped, 5)
        assert proc.poll() is None
    finally:
        proc.terminate()
    assert wait_for(lambda: proc.poll() is not None, 10)  # EOF: the watchdog stops the group (SIGKILL after TERM)
    proc.wait_output(5)
    assert no_process_left(run_id, timeout=5)
    assert "reprokit-role-stopped" not in (tmp_path / "logs" / "worker-1.log").read_text()


def test_a_spec_says_its_launcher_and_older_specs_keep_theirs():
    assert RunSpec(cluster=None).launcher_name == "local"
    assert RunSpec(cluster={"hosts": ["a"]}).launcher_name == "ssh"
    assert RunSpec(cluster={"hosts": ["a"]}, launcher="srun").launcher_name == "srun"


def test_a_run_inside_an_allocation_of_the_slurm_testbed_is_on_the_testbed(tmp_path):
    conf = tmp_path / "slurm" / "slurm.conf"

    slurm = SlurmState("22.05.8", str(conf), "tb-ctl(10.77.0.254)", ["h1", "h2", "h3"], "debug", ["srun"], "s", 0.2)
    testbed.TestbedState("tb", 3, scheduler=slurm).save(tmp_path)  # the module: pytest would collect a Test* name
    allocation = {"hostlist": "$SLURM_JOB_NODELIST"}
    assert default_profile(allocation, {**ALLOCATION, "SLURM_CONF": str(conf)}) == "smoke"
    assert default_profile(allocation, {**ALLOCATION, "SLURM_CONF": "/etc/slurm/slurm.conf"}) == "paper"
    assert default_profile(allocation, ALLOCATION) == "paper"
    assert default_profile(allocation) == "paper"


@pytest.mark.parametrize("launcher", ["srun", "oarsh"])
def test_the_probe_finds_the_scheduler_a_port_below_the_ephemeral_range(launcher):
    """The probe cannot hold the port until the scheduler binds it, so it must not be one that a role's own
    bind(0) or outgoing connection can take meanwhile."""
    probe, args = (srun.PROBE, ["h1", "0"]) if launcher == "srun" else (oarsh.PROBE, ["scheduler", "0"])
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-I", "-c", probe, *args, __file__], capture_output=True, text=True,
                              timeout=30, env={"SLURMD_NODENAME": "h1"}, stdin=subprocess.DEVNULL)
        port = json.loads(proc.stdout)["port"]
        assert 10000 <= port < low, (port, proc.stderr)


def test_a_new_launcher_is_one_class_registered_by_name():
    @launchers.register_launcher
    class Mpirun(launchers.Launcher):
        name = "mpirun-test"
        inside_job = True
        job_hosts = {"nodefile": "$PBS_NODEFILE"}

        def refusal(self, has_target, environ, which):
            return None if environ.get("PBS_JOBID") else "--env.LAUNCHER=mpirun-test needs a PBS job"

    try:
        assert "mpirun-test" in launcher_names()
        chosen = choose_launcher("mpirun-test", False, {"PBS_JOBID": "1"})
        assert isinstance(chosen, Mpirun) and chosen.inside_job and get_launcher("mpirun-test") is chosen
        with pytest.raises(UserError, match="--env.LAUNCHER=mpirun-test needs a PBS job"):
            choose_launcher("mpirun-test", False, {})
        assert choose_launcher("", False, {"PBS_JOBID": "1"}).name == "local"  # never a default unless it says so
        with pytest.raises(ValueError, match="registered twice"):
            launchers.register_launcher(Mpirun)
    finally:
        del launchers._LAUNCHERS["mpirun-test"]
