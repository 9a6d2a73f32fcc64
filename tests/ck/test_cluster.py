"""Real clusters on a network-namespace testbed: sshd per host, paramiko, real MXNet roles.

Needs root and Debian's openssh-server (`make test` installs it when it runs as root).
CI runs as root: there these tests fail rather than skip when something is missing.
"""
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.runs import long_run, no_process_left, role_pid, wait_for
from support.testbed import make_testbed, require_root_and_sshd

pytestmark = pytest.mark.root
SMOKE = ["--env.PROFILE=smoke", "--env.WORKER_THREADS=1"]


@pytest.fixture(scope="module")
def cluster3(ck):
    state = make_testbed(ck, "ci3", 3)
    yield "ci3", state
    ck("testbed", "cluster:ci3", "--down", timeout=60)
    ck("rm", "machine:ci3", "--force")


def test_machine_is_listed_and_passes_the_preflight_check(ck, cluster3):
    name, _ = cluster3
    assert f"{name}: connected" in ck("show", "machine", check=True).stdout
    proc = ck("check", f"cluster:{name}", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("10.77.0.")]
    assert [(r[0], r[1], r[3], r[-1]) for r in rows] == [
        (f"10.77.0.{i}", "ok", "1.9.1", "ok") for i in (1, 2, 3)]
    assert rows[0][7].isdigit()  # a free scheduler port was found on the first host
    assert "cluster: all 3 host(s) ready" in proc.stdout


def test_distributed_training_across_three_hosts_over_ssh(ck, cluster3, tmp_path):
    """No --env.PROFILE: a testbed (make_testbed registered machine:ci3 from its own hosts.json) runs smoke unless
    asked, as its hosts share this CPU (a cluster of real hosts runs paper: the node file test below)."""
    name, _ = cluster3
    proc, out = ck.run_p3(tmp_path, "--cmd_key=resnet", f"--target={name}", "--env.WORKER_THREADS=1",
                          "--env.NUM_BATCHES=7", "--env.DISP_BATCHES=3", "--env.BATCH_SIZE=8")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    c = out["characteristics"]
    assert (c["profile"], c["image_shape"]) == ("smoke", "3,32,32")
    assert c["hosts"] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    assert (c["num_workers"], c["num_servers"]) == (3, 3)  # the paper's layout: one of each per host
    assert len(c["throughput_per_worker"]) == 3 and all(s > 0 for s in c["throughput_per_worker"])
    assert c["params_in_sync"] is True and len(set(c["param_checksums"])) == 1
    assert len(c["param_checksums"]) == 3
    for host, role in (("10.77.0.1", "worker#0"), ("10.77.0.2", "worker#1"), ("10.77.0.3", "worker#2")):
        assert f"[{host} {role}] " in proc.stdout
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "scheduler.log", "server-0.log", "server-1.log", "server-2.log", "worker-0.log", "worker-1.log", "worker-2.log"]
    plan = json.loads((tmp_path / "p3-run.json").read_text())["plan"]
    assert no_process_left(plan["run_id"])
    # The default variant is MXNet's own P3: every role on every host ran its van.
    assert c["ps_van"] == "p3" and c["mechanism"]["van"] == "p3" and c["mechanism"]["update_on"] == "workers"
    for log in (tmp_path / "logs").iterdir():
        assert "ps-van: role=" in log.read_text() and log.read_text().count(" van=p3") >= 1, log.name


def environ_of(pid: int) -> dict[str, str]:
    raw = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.parametrize("variant, expected", [
    ("p3", {"DMLC_PS_VAN_TYPE": "p3", "DMLC_PS_WATER_MARK": "10", "MXNET_KVSTORE_SLICE_THRESHOLD": "50000"}),
    ("baseline", {}),
])
def test_the_van_reaches_every_remote_role_and_only_p3s(ck, cluster3, tmp_path, variant, expected):
    """Read from each running role's real environment (/proc), on every host of the testbed."""
    machine, _ = cluster3
    switches = ("DMLC_PS_VAN_TYPE", "DMLC_PS_WATER_MARK", "MXNET_KVSTORE_SLICE_THRESHOLD", "MXNET_UPDATE_ON_KVSTORE")
    with long_run(ck, tmp_path, f"--target={machine}", *SMOKE, f"--env.VARIANT={variant}",
                  watch_log="worker-2.log") as (_, run_id):
        for kind in ("scheduler", "server", "worker"):
            for host in (("10.77.0.1",) if kind == "scheduler" else ("10.77.0.1", "10.77.0.2", "10.77.0.3")):
                pid = wait_for(functools.partial(role_pid, run_id, kind, host), timeout=10)
                assert pid, f"no {kind} on {host}"
                env = environ_of(pid)
                assert {k: env[k] for k in switches if k in env} == expected, (kind, host)


@pytest.mark.parametrize("kind,host,name", [
    ("worker", "10.77.0.2", "worker#1"),
    ("server", "10.77.0.3", "server#2"),
    ("scheduler", "10.77.0.1", "scheduler"),
])
def test_killing_a_role_fails_the_run_naming_it_and_leaves_nothing(ck, cluster3, tmp_path, kind, host, name):
    machine, _ = cluster3
    with long_run(ck, tmp_path, f"--target={machine}", *SMOKE, watch_log="worker-2.log") as (run, run_id):
        pid = wait_for(lambda: role_pid(run_id, kind, host), timeout=10)
        assert pid
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        output, _ = run.communicate(timeout=60)
        took = time.monotonic() - killed_at
    assert run.returncode != 0
    assert f"p3: FAILED: {name} on {host} was killed by SIGKILL" in output
    assert took < 10
    assert no_process_left(run_id)
    assert "Traceback" not in output


def test_lost_ssh_connection_fails_the_run_and_the_host_cleans_up_by_itself(ck, cluster3, tmp_path):
    """Killing the ProxyCommand of host 2 cuts its connection, as a network failure would."""
    machine, _ = cluster3
    with long_run(ck, tmp_path, f"--target={machine}", *SMOKE) as (run, run_id):
        relay = subprocess.run(["pgrep", "-f", "reprokit.cluster.relay 10.77.0.2 22"], capture_output=True, text=True)
        # Other testbeds (other tests, other users) use the same addresses: only this one's switch counts.
        ours = subprocess.run(["ip", "netns", "pids", "rk-ci3-sw"], capture_output=True, text=True).stdout.split()
        [pid] = [p for p in relay.stdout.split() if p in ours]
        cut_at = time.monotonic()
        os.kill(int(pid), signal.SIGKILL)
        output, _ = run.communicate(timeout=60)
        took = time.monotonic() - cut_at
    assert run.returncode != 0
    assert "on 10.77.0.2 lost its SSH connection" in output
    assert took < 10
    # Host 2 could not be reached to tear down: its sshd closed the sessions, and the
    # roles' watchdogs stopped them (SIGTERM, then SIGKILL after a grace period).
    assert no_process_left(run_id, timeout=10)
    warnings = json.loads((tmp_path / "launch.json").read_text())["warnings"]
    assert warnings == ["10.77.0.2: unreachable after the run (connection closed); its roles stop on their own "
                        "within 18 s"]


def test_preflight_reports_each_broken_host_in_bounded_time(ck):
    state = make_testbed(ck, "pf", 4)
    try:
        # host 2: sshd stopped
        os.kill(int((state / "h2" / "sshd.pid").read_text()), signal.SIGTERM)
        # host 3: its key is not in known_hosts
        known = (state / "known_hosts").read_text().splitlines()
        (state / "known_hosts").write_text("".join(f"{line}\n" for line in known if not line.startswith("10.77.0.3 ")))
        # host 4: our key is not authorised there
        config = state / "h4" / "sshd_config"
        config.write_text(config.read_text().replace(f"AuthorizedKeysFile {state / 'authorized_keys'}",
                                                     "AuthorizedKeysFile /nonexistent"))
        os.kill(int((state / "h4" / "sshd.pid").read_text()), signal.SIGTERM)
        subprocess.run(["ip", "netns", "exec", "rk-pf-h4", shutil.which("sshd") or "/usr/sbin/sshd", "-f", str(config)],
                       check=True, timeout=30)
        start = time.monotonic()
        proc = ck("check", "cluster:pf", timeout=120)
        took = time.monotonic() - start
        output = proc.stdout + proc.stderr
        assert proc.returncode == 1
        assert took < 30
        assert "10.77.0.1  ok" in output
        assert "10.77.0.2: cannot reach sshd" in output
        assert "10.77.0.3: host key is not known" in output and "accept_new_host_keys" in output
        assert "10.77.0.4: refused our keys for user root" in output
        assert "3 of 4 host(s) failed" in output
        assert "Traceback" not in output

        # A changed key is refused even when new keys are accepted...
        host2_key = next(line.split(" ", 1)[1] for line in known if line.startswith("10.77.0.2 "))
        (state / "known_hosts").write_text("".join(f"{line}\n" for line in known if not line.startswith("10.77.0.3 "))
                                           + f"10.77.0.3 {host2_key}\n")
        proc = ck("check", "cluster:pf", "--accept_new_host_keys", timeout=120)
        assert "10.77.0.3: host key has CHANGED" in proc.stdout + proc.stderr
        # ...while an unknown one is accepted on first use and recorded, like OpenSSH's accept-new.
        (state / "known_hosts").write_text("".join(f"{line}\n" for line in known if not line.startswith("10.77.0.3 ")))
        proc = ck("check", "cluster:pf", "--accept_new_host_keys", timeout=120)
        assert "10.77.0.3  ok" in proc.stdout
        assert "2 of 4 host(s) failed" in proc.stdout + proc.stderr
        assert any(line.startswith("10.77.0.3 ssh-ed25519 ") for line in (state / "known_hosts").read_text().splitlines())
    finally:
        ck("testbed", "cluster:pf", "--down", timeout=60)
        ck("rm", "machine:pf", "--force")


def test_malformed_cluster_description_is_one_clear_line(ck, tmp_path):
    bad = tmp_path / "hosts.json"
    bad.write_text(json.dumps(["10.77.9.1", "a;touch /tmp/x", "10.77.9.1"]))
    ck("add", "machine:badhosts", "--type=cluster", f"--config_file={bad}", "--quiet", check=True)
    try:
        proc = ck("check", "cluster:badhosts", timeout=60)
        assert proc.returncode == 1
        assert "machine:badhosts: host #2.host must be a host name or address, got 'a;touch /tmp/x'" in \
            proc.stdout + proc.stderr
        run, _ = ck.run_p3(tmp_path / "run", "--cmd_key=resnet", "--target=badhosts", timeout=120)
        output = run.stdout + run.stderr
        assert run.returncode != 0
        assert output.count("host #2.host must be a host name or address, got 'a;touch /tmp/x'") == 1
        assert "Traceback" not in output
    finally:
        ck("rm", "machine:badhosts", "--force")


def root_namespace_links():
    return sorted(line.split(":")[1].strip() for line in
                  subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout.splitlines())


def test_testbed_never_touches_the_root_namespace_and_shapes_its_links(ck):
    require_root_and_sshd()
    before = root_namespace_links()
    ck("testbed", "cluster:iso", "--hosts=2", "--rate=20mbit", check=True, timeout=120)
    try:
        assert root_namespace_links() == before
        def qdisc(host):
            return subprocess.run(["ip", "netns", "exec", f"rk-iso-h{host}", "tc", "qdisc", "show", "dev", "eth0"],
                                  capture_output=True, text=True, check=True).stdout
        assert all("tbf" in qdisc(h) and "rate 20Mbit" in qdisc(h) for h in (1, 2))
        ck("testbed", "cluster:iso", "--shape=500kbit", check=True)
        assert "rate 500Kbit" in qdisc(2)
        ck("testbed", "cluster:iso", "--shape=off", check=True)
        assert "tbf" not in qdisc(1)
        bad = ck("testbed", "cluster:iso", "--shape=fast")
        assert bad.returncode == 1 and "rate 'fast' is not a tc rate of at least 1kbit like 100mbit" in bad.stdout + bad.stderr
        bad = ck("testbed", "cluster:iso", "--shape=1gbit", "--dilation=abc")  # the fix names the option given
        assert bad.returncode == 1 and "--dilation must be a number above 0" in bad.stdout + bad.stderr
        assert "fix it with --dilation=K" in bad.stdout + bad.stderr and "Traceback" not in bad.stdout + bad.stderr
    finally:
        ck("testbed", "cluster:iso", "--down", check=True)
    assert root_namespace_links() == before
    assert not any(ns.startswith("rk-iso-") for ns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                      text=True).stdout.split())
    again = ck("testbed", "cluster:iso", "--down", check=True)  # idempotent
    assert "nothing to remove" in again.stdout


# Receives on every connection to PORT for SECONDS and prints the bytes received in all; run in a host's namespace.
RECEIVER = """
import socket, sys, threading, time
server = socket.create_server((sys.argv[1], 5301))
got = [0]
def drain(conn):
    while True:
        data = conn.recv(1 << 16)
        if not data:
            return
        got[0] += len(data)
def accept():
    while True:
        threading.Thread(target=drain, args=(server.accept()[0],), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
time.sleep(float(sys.argv[2]))
print(got[0], flush=True)
"""
# Sends as fast as it can on COUNT connections to each ADDRESS:COUNT given, for SECONDS.
SENDER = """
import socket, sys, threading, time
stop = time.monotonic() + float(sys.argv[1])
def send(address):
    sock = socket.create_connection((address, 5301))
    sock.settimeout(1)
    while time.monotonic() < stop:
        try:
            sock.send(bytes(1 << 16))
        except (TimeoutError, OSError):
            pass
for given in sys.argv[2:]:
    address, count = given.split(":")
    for _ in range(int(count)):
        threading.Thread(target=send, args=(address,), daemon=True).start()
time.sleep(float(sys.argv[1]) + 0.5)
"""


def share_of_the_lone_flow(name):
    """Host 1 sends on 16 connections to host 2 and on 1 to host 3 at once, over its shaped link: host 3's share."""
    def host(index, script, *args):
        return subprocess.Popen(["ip", "netns", "exec", f"rk-{name}-h{index}", sys.executable, "-c", script, *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    receivers = [host(i, RECEIVER, f"10.77.0.{i}", "6") for i in (2, 3)]
    time.sleep(1)
    host(1, SENDER, "4", "10.77.0.2:16", "10.77.0.3:1").wait(timeout=30)
    crowd, lone = (int(r.communicate(timeout=30)[0]) for r in receivers)
    return lone / (crowd + lone)


def test_fair_link_sharing_gives_each_destination_an_equal_share_where_one_queue_gives_each_flow_one(ck):
    """--link_sharing=fair: htb with a class per other host, so 16 flows to one host cannot crowd out a single flow
    to another (half each); in the default single tbf queue the crowd starves it (about 1% here). Kept on
    --shape."""
    require_root_and_sshd()
    state = make_testbed(ck, "fair", 3, "--link_sharing=fair", "--rate=20mbit")
    try:
        assert json.loads((state / "testbed.json").read_text())["link_sharing"] == "fair"
        classes = subprocess.run(["ip", "netns", "exec", "rk-fair-h1", "tc", "class", "show", "dev", "eth0"],
                                 capture_output=True, text=True, check=True).stdout
        assert "class htb 1:12 " in classes and "class htb 1:13 " in classes and "ceil 20Mbit" in classes
        fair = share_of_the_lone_flow("fair")
        ck("testbed", "cluster:fair", "--shape=20mbit", check=True)  # reshaping keeps the testbed's sharing
        again = share_of_the_lone_flow("fair")
    finally:
        ck("testbed", "cluster:fair", "--down", check=True)
        ck("rm", "machine:fair", "--force")
    make_testbed(ck, "fifo", 3, "--rate=20mbit")
    try:
        one_queue = share_of_the_lone_flow("fifo")
    finally:
        ck("testbed", "cluster:fifo", "--down", check=True)
        ck("rm", "machine:fifo", "--force")
    assert 0.4 < fair < 0.6 and 0.4 < again < 0.6 and one_queue < 0.25, (fair, again, one_queue)
    bad = ck("testbed", "cluster:fair", "--hosts=2", "--link_sharing=even")
    assert bad.returncode == 1 and "Traceback" not in bad.stdout + bad.stderr
    assert ("link sharing 'even' is not one the testbed shapes; give --link_sharing=fifo (one queue per host, the "
            "default) or --link_sharing=fair (an equal share per destination)") in bad.stdout + bad.stderr
    assert not any(ns.startswith("rk-fair-") for ns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                       text=True).stdout.split())


def test_a_testbed_given_a_tcp_congestion_control_uses_it_on_every_host_and_says_so(ck):
    """--tcp=reno (always built in and allowed): every host's namespace, and so every session and role started
    through its sshd, uses it; testbed.json records it for the study's target. Without --tcp the hosts keep the
    machine's default and nothing is recorded."""
    default = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    state = make_testbed(ck, "tcp", 2, "--tcp=reno")
    try:
        assert json.loads((state / "testbed.json").read_text())["tcp"] == "reno"
        for index in (1, 2):
            seen = subprocess.run(["ssh", "-F", str(state / "ssh_config"), f"10.77.0.{index}",
                                   "cat /proc/sys/net/ipv4/tcp_congestion_control"],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            assert seen.returncode == 0 and seen.stdout.strip() == "reno", seen.stdout + seen.stderr
    finally:
        ck("testbed", "cluster:tcp", "--down", check=True)
        ck("rm", "machine:tcp", "--force")
    state = make_testbed(ck, "tcp", 1)
    try:
        assert json.loads((state / "testbed.json").read_text())["tcp"] == ""
        assert subprocess.run(["ip", "netns", "exec", "rk-tcp-h1", "cat", "/proc/sys/net/ipv4/tcp_congestion_control"],
                              capture_output=True, text=True, check=True).stdout.strip() == default
    finally:
        ck("testbed", "cluster:tcp", "--down", check=True)
        ck("rm", "machine:tcp", "--force")
    bad = ck("testbed", "cluster:tcp", "--hosts=2", "--tcp=nosuch")
    assert bad.returncode == 1 and "Traceback" not in bad.stdout + bad.stderr
    assert "TCP congestion control 'nosuch' is not one this kernel has" in bad.stdout + bad.stderr


def test_hosts_pinned_to_cpus_of_their_own_give_their_sessions_only_those(ck):
    """--cpus_per_host: every session on host I (so every role) runs on host I's CPUs only, and nproc, which the
    run's preparation counts, says so; a request for more CPUs than the machine has is refused before anything
    is made."""
    cpus = sorted(os.sched_getaffinity(0))
    hosts = min(2, len(cpus))
    state = make_testbed(ck, "pin", hosts, "--cpus_per_host=1")
    try:
        assert json.loads((state / "testbed.json").read_text())["cpus"] == [[c] for c in cpus[:hosts]]
        for index in range(1, hosts + 1):
            seen = subprocess.run(["ssh", "-F", str(state / "ssh_config"), f"10.77.0.{index}",
                                   "nproc; grep Cpus_allowed_list /proc/self/status"],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            assert seen.returncode == 0, seen.stderr
            assert seen.stdout.split() == ["1", "Cpus_allowed_list:", str(cpus[index - 1])]
    finally:
        ck("testbed", "cluster:pin", "--down", check=True)
        ck("rm", "machine:pin", "--force")
    too_many = ck("testbed", "cluster:pin", f"--hosts={len(cpus) + 1}", "--cpus_per_host=1")
    assert too_many.returncode == 1 and "Traceback" not in too_many.stdout + too_many.stderr
    assert (f"--cpus_per_host=1 for {len(cpus) + 1} hosts needs {len(cpus) + 1} CPUs, but this machine gives "
            f"{len(cpus)}; give fewer --hosts or a smaller --cpus_per_host") in too_many.stdout + too_many.stderr
    assert not any(ns.startswith("rk-pin-") for ns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                      text=True).stdout.split())


def test_machine_with_a_node_file_follows_each_new_allocation_and_runs_the_paper_profile(ck, cluster3, tmp_path):
    """One machine entry naming an OAR node file (of the module's testbed's hosts); the file changes between two
    checks, as between two jobs."""
    _, state = cluster3
    nodefile = tmp_path / "OAR_NODEFILE"
    described = tmp_path / "hosts.json"
    described.write_text(json.dumps({"nodefile": str(nodefile), "interface": "eth0", "user": "root",
                                     "ssh_config": str(state / "ssh_config"), "known_hosts": str(state / "known_hosts")}))
    ck("add", "machine:alc-job", "--type=cluster", f"--config_file={described}", "--quiet", check=True)
    try:
        nodefile.write_text("10.77.0.2\n" * 4)  # job 1: four cores of host 2
        proc = ck("check", "cluster:alc-job", timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"cluster: hosts from nodefile {nodefile}: 10.77.0.2\n" in proc.stdout
        assert [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("10.77.0.")] == ["10.77.0.2"]
        assert "cluster: all 1 host(s) ready" in proc.stdout

        nodefile.write_text("10.77.0.1\n10.77.0.1\n10.77.0.2\n10.77.0.2\n")  # job 2: both hosts
        proc = ck("check", "cluster:alc-job", timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("10.77.0.")] == [
            "10.77.0.1", "10.77.0.2"]
        assert "cluster: all 2 host(s) ready" in proc.stdout

        # The allocation is a real cluster to the run: paper (the testbed itself runs smoke unless asked: the
        # three-host training test above).
        ck.run_p3(tmp_path / "cluster-run", "--cmd_key=resnet", "--target=alc-job", "--env.RUN_TIMEOUT=1", timeout=300)
        assert json.loads((tmp_path / "cluster-run" / "p3-run.json").read_text())["settings"]["profile"] == "paper"
    finally:
        ck("rm", "machine:alc-job", "--force")
