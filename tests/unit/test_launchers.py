"""Which launcher a run takes, and the srun launcher's command lines (the real runs: tests/ck/test_slurm_testbed.py)."""

import pytest

from reprokit.errors import UserError
from reprokit.run.launchers import check_allocated, choose_launcher, get_launcher, launcher_names
from reprokit.run.settings import default_profile
from reprokit.run.spec import RunSpec
from reprokit.run.srun import SrunRoleProcess, role_argv

ALLOCATION = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[01-03]"}


def test_the_registry_knows_local_ssh_and_srun():
    assert launcher_names() == ["local", "ssh", "srun"]
    with pytest.raises(UserError, match="launcher 'mpirun' is not one of local, ssh, srun"):
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
])
def test_the_launcher_follows_the_allocation_and_the_target_unless_told(setting, target, environ, chosen):
    assert choose_launcher(setting, target, environ) == chosen


@pytest.mark.parametrize("setting, target, environ, message", [
    ("srun", False, {}, "--env.LAUNCHER=srun starts each role as a job step of a Slurm allocation, but SLURM_JOB_ID "
                        "and SLURM_JOB_NODELIST are not set here; run inside salloc or an sbatch script"),
    ("ssh", False, ALLOCATION, "--env.LAUNCHER=ssh needs --target=MACHINE"),
    ("local", True, {}, "--env.LAUNCHER=local runs every role on this machine: drop --target"),
    ("mpi", False, {}, "LAUNCHER 'mpi' is not a launcher; give local, ssh, srun"),
])
def test_a_launcher_that_cannot_work_here_is_refused(setting, target, environ, message):
    with pytest.raises(UserError) as raised:
        choose_launcher(setting, target, environ)
    assert message in str(raised.value)


def test_srun_needs_the_hosts_to_be_nodes_of_the_allocation():
    check_allocated(["node01", "node03"], ALLOCATION)
    with pytest.raises(UserError, match=r"host\(s\) node04 of the run are not nodes of this Slurm allocation "
                                        r"\(node\[01-03\]\).*--env.LAUNCHER=ssh"):
        check_allocated(["node01", "node04"], ALLOCATION)


def test_each_role_is_one_job_step_on_its_host_sharing_the_allocation():
    argv = role_argv("/usr/bin/srun", "node02", "/shared/run", ["/opt/py", "train.py", "--x"])
    assert argv == ["/usr/bin/srun", "--nodes=1", "--ntasks=1", "--nodelist=node02", "--overlap", "--export=ALL",
                    "--kill-on-bad-exit=1", "--chdir=/shared/run", "/opt/py", "train.py", "--x"]


@pytest.mark.parametrize("code, said", [(137, "was killed by SIGKILL"), (143, "was killed by SIGTERM"),
                                        (3, "exited with code 3"), (-9, "was killed by SIGKILL")])
def test_srun_exit_codes_name_the_signal_that_killed_the_task(code, said):
    assert SrunRoleProcess.describe(object.__new__(SrunRoleProcess), code) == said


def test_a_spec_says_its_launcher_and_older_specs_keep_theirs():
    assert RunSpec(cluster=None).launcher_name == "local"
    assert RunSpec(cluster={"hosts": ["a"]}).launcher_name == "ssh"
    assert RunSpec(cluster={"hosts": ["a"]}, launcher="srun").launcher_name == "srun"


def test_a_run_inside_an_allocation_of_the_slurm_testbed_is_on_the_testbed(tmp_path):
    conf = tmp_path / "slurm" / "slurm.conf"
    from reprokit.cluster.slurm_testbed import SlurmState
    from reprokit.cluster.testbed import TestbedState

    slurm = SlurmState("22.05.8", str(conf), "tb-ctl(10.77.0.254)", ["h1", "h2", "h3"], "debug", ["srun"], "s", 0.2)
    TestbedState("tb", 3, scheduler=slurm).save(tmp_path)
    allocation = {"hostlist": "$SLURM_JOB_NODELIST"}
    assert default_profile(allocation, {**ALLOCATION, "SLURM_CONF": str(conf)}) == "smoke"
    assert default_profile(allocation, {**ALLOCATION, "SLURM_CONF": "/etc/slurm/slurm.conf"}) == "paper"
    assert default_profile(allocation, ALLOCATION) == "paper"
    assert default_profile(allocation) == "paper"
