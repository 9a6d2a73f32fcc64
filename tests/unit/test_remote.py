"""The remote role wrapper, run by a real /bin/sh exactly as sshd runs a session's command."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from reprokit.core.errors import UserError
from reprokit.run.procscan import run_processes
from reprokit.run.remote import STOPPED_MARK, StoppedReports, role_command, sweep_command
from support.runs import no_process_left, wait_for

HOSTILE = {
    "SEMI": "a; touch {marker}",
    "SUBST": "$(touch {marker})",
    "BACKTICK": "`touch {marker}`",
    "QUOTES": "it's \"quoted\" 'twice'",
    "NEWLINE": "line1\ntouch {marker}",
    "GLOB": "* ~ $HOME",
}
PRINT_ENV = ("import json, os, sys; print(json.dumps({'env': {k: os.environ.get(k) for k in sys.argv[2:]}, "
             "'first_arg': sys.argv[1]}))")


def run_wrapped(tmp_path, env, argv):
    """Start the wrapper; its stdin is a pipe we keep open, as the SSH channel's is."""
    command = role_command(str(tmp_path / "run dir; $(x)"), env, argv)
    return subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(proc):
    out = proc.stdout.read()
    proc.wait(timeout=30)
    proc.stdin.close()
    return out


def test_hostile_values_arrive_literally_and_run_nothing(tmp_path):
    marker = tmp_path / "pwned"
    env = {k: v.format(marker=marker) for k, v in HOSTILE.items()}
    env["REPROKIT_RUN_ID"] = uuid.uuid4().hex
    argument = f"a b; touch {marker}"
    proc = run_wrapped(tmp_path, env, [sys.executable, "-c", PRINT_ENV, argument, *HOSTILE])
    out = finish(proc)
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("reprokit-pgid ")
    assert json.loads(lines[1]) == {"env": {k: env[k] for k in HOSTILE}, "first_arg": argument}
    assert not marker.exists()
    assert (tmp_path / "run dir; $(x)").is_dir()  # the folder name, too, is taken literally


def test_exit_code_and_signal_death_are_reported(tmp_path):
    env = {"REPROKIT_RUN_ID": uuid.uuid4().hex}
    proc = run_wrapped(tmp_path, env, [sys.executable, "-c", "import sys; sys.exit(3)"])
    finish(proc)
    assert proc.returncode == 3
    proc = run_wrapped(tmp_path, env, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    finish(proc)
    assert proc.returncode == 128 + signal.SIGKILL  # what RemoteRoleProcess maps back to "killed by SIGKILL"


def test_closing_stdin_tears_the_role_group_down(tmp_path):
    """Teardown and a lost SSH connection both look like EOF on the session's stdin."""
    run_id = uuid.uuid4().hex
    proc = run_wrapped(tmp_path, {"REPROKIT_RUN_ID": run_id},
                       [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"])
    assert wait_for(lambda: len(run_processes(run_id)) >= 3, 10)
    proc.stdin.close()
    proc.wait(timeout=15)
    assert no_process_left(run_id, timeout=10)


def test_normal_end_leaves_no_watchdog_behind(tmp_path):
    run_id = uuid.uuid4().hex
    proc = run_wrapped(tmp_path, {"REPROKIT_RUN_ID": run_id}, [sys.executable, "-c", "print('done')"])
    out = proc.stdout.read()
    proc.wait(timeout=30)
    assert "done" in out and proc.returncode == 0
    # stdin is still open here: the watchdog must not outlive the role waiting for its EOF.
    assert no_process_left(run_id, timeout=2)
    proc.stdin.close()


def test_bad_names_and_run_ids_are_refused():
    with pytest.raises(UserError, match="not valid names"):
        role_command("/tmp/x", {"A;B": "1"}, ["true"])
    with pytest.raises(UserError, match="not a hex string"):
        sweep_command("abc; rm -rf /")


def test_sweep_kills_exactly_the_processes_of_the_run():
    run_id, other = uuid.uuid4().hex, uuid.uuid4().hex
    ours = subprocess.Popen(["sleep", "60"], env={"REPROKIT_RUN_ID": run_id, "PATH": "/usr/bin:/bin"})
    theirs = subprocess.Popen(["sleep", "60"], env={"REPROKIT_RUN_ID": other, "PATH": "/usr/bin:/bin"})
    try:
        assert wait_for(lambda: ours.pid in run_processes(run_id), 5)
        swept = subprocess.run(["/bin/sh", "-c", sweep_command(run_id)], capture_output=True, text=True, timeout=30)
        assert swept.stdout.split() == [f"{ours.pid}:sleep"]
        assert ours.wait(timeout=5) == -signal.SIGKILL
        assert theirs.poll() is None
    finally:
        ours.kill()
        theirs.kill()
        ours.wait()
        theirs.wait()


def test_a_role_that_hears_no_heartbeat_stops_on_its_own_and_one_that_does_keeps_running(tmp_path):
    """A cut link gives neither EOF nor data: silence alone must stop the role's group (SIGTERM, then SIGKILL)."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    quiet_id, beating_id = uuid.uuid4().hex, uuid.uuid4().hex
    quiet = subprocess.Popen(["/bin/sh", "-c", role_command(str(tmp_path / "q"), {"REPROKIT_RUN_ID": quiet_id}, sleeper,
                                                           silence_s=2)],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    beating = subprocess.Popen(["/bin/sh", "-c", role_command(str(tmp_path / "b"), {"REPROKIT_RUN_ID": beating_id},
                                                             sleeper, silence_s=2)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: run_processes(quiet_id) and run_processes(beating_id), 10)
        for _ in range(12):  # 6 s of heartbeats, three times the silence allowed
            beating.stdin.write(b".")
            beating.stdin.flush()
            time.sleep(0.5)
        quiet.wait(timeout=10)  # stopped: the group, wrapper included, is killed (its exit code no longer matters)
        assert no_process_left(quiet_id, timeout=5)
        assert beating.poll() is None, "a role whose launcher kept beating was stopped"
    finally:
        beating.stdin.close()
        quiet.stdin.close()
        beating.wait(timeout=15)
    assert no_process_left(beating_id, timeout=5)


def test_the_watchdog_reports_a_stopped_role_at_each_heartbeat_and_falls_silent_once_it_resumes(tmp_path):
    """A stopped role neither exits nor writes: its watchdog says so on the role's stdout, one STOPPED_MARK per
    heartbeat while it stays stopped, nothing else; StoppedReports turns that into the role's state."""
    run_id = uuid.uuid4().hex
    ticker = [sys.executable, "-c", "import time\nwhile True:\n print('tick', flush=True); time.sleep(0.2)"]
    proc = subprocess.Popen(["/bin/sh", "-c", role_command(str(tmp_path / "r"), {"REPROKIT_RUN_ID": run_id}, ticker)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    lines: list[tuple[float, str]] = []
    reports, seen_stopped = StoppedReports(), []
    threading.Thread(target=lambda: [lines.append((time.monotonic(), raw.decode().strip())) or
                                     (reports.note(raw.decode()) and seen_stopped.append(reports.stopped()))
                                     for raw in proc.stdout], daemon=True).start()

    def beats(seconds):
        for _ in range(int(seconds / 0.5)):
            proc.stdin.write(b".")
            proc.stdin.flush()
            time.sleep(0.5)

    try:
        assert wait_for(lambda: any(t == "tick" for _, t in lines), 10)
        [role] = [p for p in run_processes(run_id)
                  if open(f"/proc/{p}/cmdline", "rb").read().startswith(sys.executable.encode() + b"\0")]
        beats(1)
        assert not [t for _, t in lines if t == STOPPED_MARK]  # a running role: no report
        os.kill(role, signal.SIGSTOP)
        stopped_at = time.monotonic()
        beats(3)
        marks = [at for at, t in lines if t == STOPPED_MARK]
        assert len(marks) >= 4 and marks[0] - stopped_at < 1.5 and reports.stopped() and all(seen_stopped)
        assert all(t in ("tick", STOPPED_MARK) or t.startswith("reprokit-pgid ") for _, t in lines)
        os.kill(role, signal.SIGCONT)
        resumed_at = time.monotonic()
        beats(2)
        assert not [at for at, t in lines if t == STOPPED_MARK and at > resumed_at + 0.6]
    finally:
        proc.stdin.close()
        proc.wait(timeout=15)
    assert no_process_left(run_id, timeout=5)
