"""Preparing remote hosts, on a real namespace testbed whose host 3 runs sshd without an SFTP subsystem.

Host 3 also keeps its run folders on a tmpfs of its own (mounted in its mount namespace only), so that
"removed on every host" is checked on a host whose folder no other host can remove for it.
Needs root and Debian's openssh-server; CI runs as root.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

from reprokit.cluster.hosts import load
from reprokit.cluster.rundir import RUNS_ROOT
from reprokit.cluster.ssh import Connection, resolve
from reprokit.cluster.transfer import TransferError, choose
from reprokit.run.lifeline import LAUNCHER_FILE
from reprokit.run.remote import REMOTE_SILENCE_S, WATCHDOG_GRACE_S
from support.faults import FaultFailure, expect, no_traceback, one_clear_line
from support.runs import long_run, role_pid, wait_for
from support.testbed import add_machine_variant, host_mount, in_host, make_testbed

pytestmark = pytest.mark.root
NAME = "prep"
TINY = ["--cmd_key=resnet", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1", "--env.NUM_BATCHES=3",
        "--env.DISP_BATCHES=1", "--env.BATCH_SIZE=4"]


@pytest.fixture(scope="module")
def testbed(ck):
    state = make_testbed(ck, NAME, 3, "--no_sftp=3")
    with host_mount(state, 3, RUNS_ROOT, "size=200m"):
        yield state
    ck("testbed", f"cluster:{NAME}", "--down", timeout=60)
    ck("rm", f"machine:{NAME}", "--force")


def run_id_of(run_dir: Path) -> str:
    return json.loads((run_dir / "p3-run.json").read_text())["plan"]["run_id"]


def assert_run_folders_removed(state: Path, run_id: str) -> None:
    """Hosts 1 and 2 share this machine's /tmp; host 3 has its own RUNS_ROOT."""
    folder = f"{RUNS_ROOT}/{run_id}"
    expect(not os.path.exists(folder), "data-lost", f"{folder} was left on hosts 1 and 2")
    expect(in_host(state, 3, "test", "-e", folder, check=False).returncode != 0, "data-lost",
           f"{folder} was left on host 3")


@contextmanager
def without_command(state: Path, index: int, command: str, tmp_path: Path):
    """Host ``index`` without ``command``: a non-executable file mounted over it in that host's namespace only."""
    path = shutil.which(command)
    blank = tmp_path / f"no-{command}"
    blank.write_text("")
    blank.chmod(0o644)
    in_host(state, index, "mount", "--bind", str(blank), path)
    try:
        yield
    finally:
        in_host(state, index, "umount", path, check=False)


def preflight_rows(output: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in output.splitlines() if line.startswith("10.77.0.")}


@pytest.mark.fault("preparation")
def test_a_host_without_sftp_passes_preflight_and_runs_with_files_over_the_exec_channel(ck, testbed, tmp_path):
    proc = ck("check", f"cluster:{NAME}", timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = preflight_rows(proc.stdout)
    # columns: host ssh python mxnet transfer run-folder data scheduler-port result
    assert [rows[f"10.77.0.{i}"][4:6] for i in (1, 2, 3)] == [["sftp", "ok"], ["sftp", "ok"], ["exec", "ok"]]

    run, out = ck.run_p3(tmp_path, *TINY, f"--target={NAME}", "--env.TIMELINE=1")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    c = out["characteristics"]
    assert c["params_in_sync"] is True and len(c["param_checksums"]) == 3
    # Every worker's timeline came back, host 3's over the exec channel, and is the JSON its worker wrote.
    assert sorted(c["timelines"]) == [f"timeline-worker-{r}.json" for r in range(3)]
    for name in c["timelines"]:
        json.loads((tmp_path / name).read_text())
    assert json.loads((tmp_path / "launch.json").read_text())["warnings"] == []
    assert_run_folders_removed(testbed, run_id_of(tmp_path))


@pytest.mark.fault("message")
@pytest.mark.parametrize("cause", ["read-only", "full", "no-interpreter", "no-timeout"])
def test_preflight_and_the_run_refuse_a_host_naming_it_and_the_cause(ck, testbed, tmp_path, cause):
    machine, host, broken = NAME, "10.77.0.2", nullcontext()
    if cause == "no-timeout":  # the roles' watchdog needs it: without it a run would fail as a lost connection
        broken, names = without_command(testbed, 2, "timeout", tmp_path), (host, "'timeout'", "not on the PATH")
    elif cause == "read-only":
        broken, names = host_mount(testbed, 2, RUNS_ROOT, "ro,size=1m"), (host, "Read-only file system")
    elif cause == "full":
        broken, names = host_mount(testbed, 2, RUNS_ROOT, "size=1m"), (host, "MB free", "needs at least 100 MB")
    else:
        # On the scheduler's host, where the interpreter is first asked to bind the scheduler's port.
        machine, host = "prepnopy", "10.77.0.1"
        add_machine_variant(ck, testbed, machine, tmp_path, h1={"python": "/opt/no-such-engine/bin/python"})
        names = (host, "interpreter /opt/no-such-engine/bin/python", "hosts.json")
    with broken:
        proc = ck("check", f"cluster:{machine}", timeout=180)
        output = proc.stdout + proc.stderr
        expect(proc.returncode == 1, "other", f"preflight passed a broken host:\n{output}")
        one_clear_line(output, *names)
        expect("1 of 3 host(s) failed" in output, "unclear", output)

        run, _ = ck.run_p3(tmp_path / "run", *TINY, f"--target={machine}")
        output = run.stdout + run.stderr
        expect(run.returncode != 0, "other", f"the run went on:\n{output[-2000:]}")
        line = one_clear_line(output, "p3: FAILED", *names)
        expect("cannot bind" not in line and "Channel closed" not in line, "unclear", line)
        assert_run_folders_removed(testbed, run_id_of(tmp_path / "run"))
    if machine != NAME:
        ck("rm", f"machine:{machine}", "--force")


@pytest.mark.fault("message")
def test_a_missing_identity_file_is_named_as_such(ck, testbed, tmp_path):
    add_machine_variant(ck, testbed, "prepkey", tmp_path, h2={"identity_file": str(tmp_path / "no-such-key")})
    try:
        proc = ck("check", "cluster:prepkey", timeout=180)
        output = proc.stdout + proc.stderr
        expect(proc.returncode == 1, "other", output)
        line = one_clear_line(output, "10.77.0.2", f"identity file {tmp_path / 'no-such-key'} does not exist")
        expect("cannot reach sshd" not in output, "unclear", line)
    finally:
        ck("rm", "machine:prepkey", "--force")


@pytest.mark.fault("preparation")
def test_run_folders_are_removed_after_a_preparation_that_failed_on_a_busy_port(ck, testbed, tmp_path):
    # Something else listens on the scheduler's port in host 1.
    listener = subprocess.Popen(["nsenter", "-t", (testbed / "h1" / "sshd.pid").read_text().strip(), "-n",
                                 sys.executable, "-c", "import socket,sys,time; s=socket.socket(); "
                                 "s.bind(('0.0.0.0', 0)); s.listen(); print(s.getsockname()[1], flush=True); "
                                 "time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(listener.stdout.readline())
        run, _ = ck.run_p3(tmp_path, *TINY, f"--target={NAME}", f"--env.PS_ROOT_PORT={port}")
        output = run.stdout + run.stderr
        expect(run.returncode != 0, "other", output[-2000:])
        one_clear_line(output, "p3: FAILED", f"port {port} on 10.77.0.1 is already in use")
        assert_run_folders_removed(testbed, run_id_of(tmp_path))
    finally:
        listener.kill()
        listener.wait()


@pytest.mark.fault("preparation")
def test_run_folders_are_removed_after_a_run_that_failed(ck, testbed, tmp_path):
    with long_run(ck, tmp_path, f"--target={NAME}", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1",
                  watch_log="worker-2.log") as (run, run_id):
        folder = f"{RUNS_ROOT}/{run_id}"
        assert os.path.isdir(folder) and in_host(testbed, 3, "test", "-d", folder, check=False).returncode == 0
        worker = wait_for(lambda: role_pid(run_id, "worker", "10.77.0.3"), timeout=10)
        assert worker
        os.kill(worker, signal.SIGKILL)
        try:
            output, _ = run.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise FaultFailure("hang", "the run went on after one of its workers was killed") from None
    no_traceback(output)
    assert "p3: FAILED: worker#2 on 10.77.0.3 was killed by SIGKILL" in output
    assert_run_folders_removed(testbed, run_id)


@pytest.mark.fault("signal")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=lambda s: s.name)
def test_run_folders_are_removed_when_the_launcher_is_killed_or_stopped_for_good(ck, testbed, tmp_path, sig):
    """The launcher cannot clean up: each host's janitor sees its channel close (SIGKILL, and SIGSTOP once ck's
    Python has killed the stopped launcher) or fall silent (SIGSTOP)."""
    with long_run(ck, tmp_path, f"--target={NAME}", "--env.PROFILE=smoke", "--env.WORKER_THREADS=1",
                  watch_log="worker-2.log") as (run, run_id):
        folder = f"{RUNS_ROOT}/{run_id}"
        assert os.path.isdir(folder) and in_host(testbed, 3, "test", "-d", folder, check=False).returncode == 0
        launcher = int((tmp_path / LAUNCHER_FILE).read_text().split(":")[0])
        os.kill(launcher, sig)
        try:
            gone = wait_for(lambda: not os.path.exists(folder) and in_host(
                testbed, 3, "test", "-e", folder, check=False).returncode != 0, REMOTE_SILENCE_S + WATCHDOG_GRACE_S + 15)
        finally:
            if sig == signal.SIGSTOP:
                try:
                    os.kill(launcher, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # ck's Python killed it already (lifeline.watch_launcher, after 10 s stopped)
        expect(gone, "data-lost", f"{folder} was left on a host after {sig.name} to the launcher")
    assert_run_folders_removed(testbed, run_id)



@pytest.mark.fault("preparation")
@pytest.mark.parametrize("index,kind", [(1, "sftp"), (3, "exec")])
def test_a_copy_cut_short_by_a_full_disk_fails_naming_host_file_and_cause_and_leaves_no_file(
        testbed, tmp_path, index, kind):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1 << 20))
    small = tmp_path / "small.txt"
    small.write_text("fits\n")
    target = str(tmp_path / "tiny")
    cluster = load(str(testbed / "hosts.json"))
    conn = Connection(resolve(cluster.hosts[index - 1], cluster)).open()
    try:
        with host_mount(testbed, index, target, "size=64k"):
            transfer = choose(conn)
            assert transfer.kind == kind
            with pytest.raises(TransferError) as failed:
                transfer.put([small, big], target)
            # exec: tar's "Wrote only N of M bytes"; SFTP: how many bytes arrived; both: the space left.
            one_clear_line(str(failed.value), f"10.77.0.{index}", "big.bin", "KB of space left there")
            left = in_host(testbed, index, "ls", "-A", target).stdout.split()
            expect(not [n for n in left if "partial" in n] and "big.bin" not in left, "data-lost",
                   f"a partial file was left behind: {left}")
            transfer.put([small], target)  # the connection is still usable
            transfer.get(f"{target}/small.txt", tmp_path / "back.txt")
            assert (tmp_path / "back.txt").read_text() == "fits\n"
            transfer.close()
    finally:
        conn.close()
