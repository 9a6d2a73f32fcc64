"""Testbed input checks that need no root."""
import signal
import subprocess
import sys
import time

import pytest

from reprokit.cluster import testbed as testbed
from reprokit.cluster.slurm_testbed import slurm_conf
from reprokit.core.errors import UserError


def test_without_root_the_testbed_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(testbed.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match="the testbed needs root .* run it as root"):
        testbed.create("tb", 2, tmp_path)


@pytest.mark.parametrize("name", ["", "UPPER", "has-dash", "toolongname1"])
def test_bad_names_are_refused(name, tmp_path):
    with pytest.raises(UserError, match="must be 1 to 8 lower-case letters or digits"):
        testbed.create(name, 2, tmp_path)


@pytest.mark.parametrize("hosts", [0, 33])
def test_host_count_is_bounded(hosts, tmp_path):
    with pytest.raises(UserError, match="a testbed has 1 to 32 hosts"):
        testbed.create("tb", hosts, tmp_path)


@pytest.mark.parametrize("rate", ["100", "fast", "100 mbit", "1gbit;ls"])
def test_bad_rates_are_refused(rate, tmp_path):
    with pytest.raises(UserError, match="is not a tc rate"):
        testbed.create("tb", 2, tmp_path, rate=rate)


def test_hosts_without_sftp_must_be_hosts_of_the_testbed(tmp_path):
    with pytest.raises(UserError, match=r"--no_sftp names host\(s\) 3, but the testbed's hosts are 1 to 2"):
        testbed.create("tb", 2, tmp_path, no_sftp=frozenset({3}))


def test_an_unknown_scheduler_is_refused(tmp_path):
    with pytest.raises(UserError, match="scheduler 'pbs' is not one the testbed runs; give --scheduler=slurm"):
        testbed.create("tb", 2, tmp_path, scheduler="pbs")


@pytest.mark.parametrize("hosts, nodes", [(1, "NodeName=h1 NodeAddr=10.77.0.1 CPUs=4"),
                                          (3, "NodeName=h[1-3] NodeAddr=10.77.0.[1-3] CPUs=4")])
def test_the_generated_slurm_conf_keeps_everything_in_the_state_folder(tmp_path, hosts, nodes):
    text = slurm_conf("tb", hosts, tmp_path, "10.77.0.254", "10.77.0", cpus=4)
    settings = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith(("#", "Node",
                                                                                                      "Partition")))
    assert nodes + " State=UNKNOWN" in text.splitlines()
    assert "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in text.splitlines()
    assert settings["SlurmctldHost"] == "tb-ctl(10.77.0.254)"
    assert (settings["ProctrackType"], settings["TaskPlugin"], settings["MpiDefault"]) == (
        "proctrack/linuxproc", "task/none", "none")
    assert settings["AuthInfo"] == f"socket={tmp_path}/munge/munge.socket"
    for key in ("StateSaveLocation", "SlurmctldPidFile", "SlurmctldLogFile", "SlurmdSpoolDir", "SlurmdPidFile",
                "SlurmdLogFile"):
        assert settings[key].startswith(f"{tmp_path}/"), key


def test_pinned_hosts_get_cpus_of_their_own_and_slurm_is_not_pinned(tmp_path):
    cpus = sorted(testbed.os.sched_getaffinity(0))
    assert testbed.host_cpus(len(cpus), 1) == [[c] for c in cpus]
    with pytest.raises(UserError, match=f"needs {2 * len(cpus)} CPUs, but this machine gives {len(cpus)}"):
        testbed.host_cpus(len(cpus), 2)
    with pytest.raises(UserError, match="--cpus_per_host pins the hosts' sshd, not Slurm's job steps"):
        testbed.create("tb", 1, tmp_path, scheduler="slurm", cpus_per_host=1)


def test_a_benchmark_killed_with_sigterm_still_runs_its_finally(tmp_path):
    """testbed_up makes SIGTERM run the caller's finally (which takes the testbed down); without it Python dies at
    once and leaves the testbed up."""
    done = tmp_path / "finally-ran"
    script = ("import sys, time\nfrom reprokit.bootstrap import exit_cleanly_on_sigterm\nexit_cleanly_on_sigterm()\n"
              f"try:\n    print('ready', flush=True)\n    time.sleep(60)\nfinally:\n    open({str(done)!r}, 'w').close()\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert time.monotonic() - started < 30
    assert done.exists()


def test_a_tcp_congestion_control_the_kernel_lacks_or_namespaces_may_not_use_is_refused_before_anything_is_made(
        monkeypatch, tmp_path):
    (tmp_path / "available").write_text("reno bbr cubic\n")
    (tmp_path / "allowed").write_text("reno bbr\n")
    monkeypatch.setattr(testbed, "AVAILABLE_TCP", tmp_path / "available")
    monkeypatch.setattr(testbed, "ALLOWED_TCP", tmp_path / "allowed")
    monkeypatch.setattr(testbed, "_require_root_and_tools", lambda: pytest.fail("got past the checks"))
    with pytest.raises(UserError, match="TCP congestion control 'vegas;ls' is not one this kernel has "
                                        r"\(reno bbr cubic\); give --tcp=NAME"):
        testbed.create("tb", 2, tmp_path / "state", tcp="vegas;ls")
    with pytest.raises(UserError) as refused:
        testbed.create("tb", 2, tmp_path / "state", tcp="cubic")
    assert str(refused.value) == (
        "TCP congestion control cubic is not allowed in network namespaces on this machine "
        "(net.ipv4.tcp_allowed_congestion_control: reno bbr); allow it as root with "
        "sysctl -w net.ipv4.tcp_allowed_congestion_control='reno bbr cubic', or leave --tcp out")
    assert not (tmp_path / "state").exists()
