"""hosts.json's slurm section, the batch script and how a job is followed (cluster/slurm.py); the real Slurm runs
in tests/ck/test_slurm_testbed.py."""
import io
import subprocess

import pytest

from reprokit.ck import program
from reprokit.cluster import hosts, slurm
from reprokit.cluster.slurm import (
    CANCEL_WAIT_S,
    STOPPED_WAIT_S,
    UNANSWERED_S,
    JobState,
    SlurmJob,
    argv_without,
    batch_script,
    follow,
    job_of,
    job_to_submit,
)
from reprokit.core.errors import UserError
from reprokit.run.result import Result
from reprokit.run.spec import FOLLOWING_FILE, RunSpec, Submission
from reprokit.run.submit import submitted_result
from reprokit.study.store.records import Store
from reprokit.study.sweep.submit import submit_sweep
from reprokit.vocabulary import RunStatus
from support.study_data import ALL_MODELS, study


def test_the_section_becomes_sbatch_options_each_one_argument():
    job = SlurmJob.from_section({"nodes": 4, "time": "1-02:00:00", "partition": "gpu nodes", "account": "p3",
                                 "extra": ["--exclusive", "--constraint=v100&ib"]}, "hosts.json")
    assert job.sbatch_options() == ["--job-name=p3", "--nodes=4", "--time=1-02:00:00", "--partition=gpu nodes",
                                    "--account=p3", "--exclusive", "--constraint=v100&ib"]
    assert job.pending_timeout == 6 * 3600


@pytest.mark.parametrize("section,message", [
    ({}, "hosts.json: slurm has no 'nodes'"),
    ({"nodes": 0}, "hosts.json: slurm.nodes"),
    ({"nodes": 2, "time": "soon"}, "a Slurm time limit"),
    ({"nodes": 2, "partition": "a\n#SBATCH --uid=0"}, "a non-empty string on one line"),
    ({"nodes": 2, "nodez": 3}, "nodez"),
])
def test_a_bad_section_is_refused_in_one_line_naming_the_field(section, message):
    with pytest.raises(UserError) as err:
        SlurmJob.from_section(section, "hosts.json")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_machine_naming_only_a_job_runs_on_its_allocation_inside_it_and_is_refused_outside():
    description = {"slurm": {"nodes": 2}, "user": "me"}
    assert job_of(description, "m").nodes == 2 and job_of({"hosts": ["a"]}, "m") is None
    inside = hosts.parse(description, environ={"SLURM_JOB_NODELIST": "n[07-08]"})
    assert inside.names == ["n07", "n08"] and {h.user for h in inside.hosts} == {"me"}
    with pytest.raises(UserError, match=r"\$SLURM_JOB_NODELIST, which is not set here"):
        hosts.parse(description, environ={})
    hosts.check_description(description, "hosts.json")  # ck add machine accepts it before any allocation
    with pytest.raises(UserError, match="slurm.nodes"):
        hosts.check_description({"slurm": {"nodes": "three"}}, "hosts.json")


def test_the_batch_script_runs_the_command_with_every_word_intact(tmp_path):
    words = ["it's", "a b", "$(touch pwned)", "`x`", "--env.X=1;2", "*"]
    script = tmp_path / "job.sbatch"
    script.write_text(batch_script(["printf", "%s\\n", *words], {"CK_REPOS": "/a b/c"}))
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert out.splitlines() == words
    assert not (tmp_path / "pwned").exists()


def test_the_command_inside_the_job_drops_what_only_the_submission_means():
    argv = ["run", "program:p3", "--submit", "--target=m", "--tmp_dir=/x", "--env.SUBMIT=1", "--out=json"]
    assert argv_without(argv, "--submit", "--tmp_dir", "--out") == ["run", "program:p3", "--target=m",
                                                                     "--env.SUBMIT=1"]


class Scripted:
    """Job states in order (the last repeats), and the cancellations asked for."""

    def __init__(self, *states: JobState):
        self.states, self.cancelled = list(states), []

    def state_of(self, job_id):
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def cancel(self, job_id):
        self.cancelled.append(job_id)
        self.states = [JobState("CANCELLED", "None", 0)]


TWO_NODES = SlurmJob(nodes=2)


def _follow(scripted, tmp_path, job=TWO_NODES, stopped=lambda: None, clock=None):
    console = io.StringIO()
    kwargs = {"clock": clock} if clock else {}
    end = follow("7", job, tmp_path / "job.out", console, stopped, state_of=scripted.state_of,
                 cancel_job=scripted.cancel, poll_s=0, **kwargs)
    return end, console.getvalue()


def test_each_pending_reason_is_said_once_and_the_jobs_end_is_its_own(tmp_path):
    (tmp_path / "job.out").write_text("line from the job\n")
    scripted = Scripted(JobState("PENDING", "Priority"), JobState("PENDING", "Priority"),
                        JobState("PENDING", "Resources"), JobState("RUNNING", "None", nodes="n[1-2]"),
                        JobState("TIMEOUT", "TimeLimit", 0))
    end, said = _follow(scripted, tmp_path)
    assert said.count("p3: Slurm job 7 is pending (Priority)") == 1
    assert "p3: Slurm job 7 is pending (Resources)" in said and "p3: Slurm job 7 is running on n[1-2]" in said
    assert "line from the job" in said
    assert not end.completed and not scripted.cancelled
    assert end.describe() == "Slurm job 7 ended TIMEOUT, reason TimeLimit"


def test_a_job_that_can_never_start_or_pends_too_long_or_is_stopped_is_cancelled(tmp_path):
    end, _ = _follow(Scripted(JobState("PENDING", "PartitionNodeLimit")), tmp_path)
    assert end.why_cancelled.startswith("Slurm will never start it as submitted (reason PartitionNodeLimit)")
    ticks = iter(range(0, 10**6, 100))
    end, _ = _follow(Scripted(JobState("PENDING", "Resources")), tmp_path, job=SlurmJob(nodes=2, pending_timeout=250),
                     clock=lambda: next(ticks))
    assert end.why_cancelled == "still pending (Resources) after 250 s, hosts.json's slurm.pending_timeout"
    scripted = Scripted(JobState("RUNNING"))
    end, _ = _follow(scripted, tmp_path, stopped=lambda: "stopped by SIGINT")
    assert scripted.cancelled == ["7"] and end.state == "CANCELLED"
    assert end.describe() == "Slurm job 7 was cancelled: the command following it was stopped by SIGINT"


def test_an_unanswered_scontrol_is_said_at_once_and_is_not_an_end_until_it_lasts(tmp_path):
    ticks = iter(range(0, 10**6, 5))
    scripted = Scripted(JobState("RUNNING"), JobState("UNKNOWN"), JobState("UNKNOWN"), JobState("COMPLETED", "None", 0))
    end, said = _follow(scripted, tmp_path, clock=lambda: next(ticks))
    assert end.completed and not scripted.cancelled
    assert "p3: Slurm's scontrol does not answer about job 7 (slurmctld down?)" in said
    assert "p3: Slurm answers again about job 7" in said
    end, said = _follow(Scripted(JobState("RUNNING"), JobState("UNKNOWN")), tmp_path, clock=lambda: next(ticks))
    assert end.why_cancelled.startswith(f"Slurm's scontrol did not answer for {UNANSWERED_S} s, hosts.json's "
                                        "slurm.unanswered_timeout")
    assert said.count("does not answer about job 7") == 1
    assert f"the job is cancelled if it stays silent for {UNANSWERED_S} s" in said


def test_the_tolerated_silence_of_scontrol_is_the_slurm_sections_unanswered_timeout(tmp_path):
    """hosts.json's slurm.unanswered_timeout replaces UNANSWERED_S: a silence shorter than it is no end (even one
    longer than the default), one longer gives the job up, and both messages give its figure."""
    job = SlurmJob.from_section({"nodes": 2, "unanswered_timeout": 120}, "hosts.json")
    assert job.unanswered_timeout == 120 and SlurmJob(nodes=2).unanswered_timeout == UNANSWERED_S == 60

    def timed(scripted):  # each look at the job takes 10 s
        now = [0.0]

        def state_of(job_id):
            now[0] += 10
            return scripted.state_of(job_id)
        return state_of, lambda: now[0]

    scripted = Scripted(JobState("RUNNING"), *[JobState("UNKNOWN")] * 9, JobState("COMPLETED", "None", 0))
    state_of, clock = timed(scripted)
    console = io.StringIO()
    end = follow("7", job, tmp_path / "job.out", console, lambda: None, clock=clock, state_of=state_of,
                 cancel_job=scripted.cancel, poll_s=0)
    assert end.completed and not scripted.cancelled  # 90 s of silence: more than the default, less than 120
    assert "the job is cancelled if it stays silent for 120 s" in console.getvalue()
    short = SlurmJob.from_section({"nodes": 2, "unanswered_timeout": 12}, "hosts.json")
    scripted = Scripted(JobState("RUNNING"), JobState("UNKNOWN"))
    state_of, clock = timed(scripted)
    end = follow("7", short, tmp_path / "job.out", io.StringIO(), lambda: None, clock=clock, state_of=state_of,
                 cancel_job=scripted.cancel, poll_s=0)
    assert end.why_cancelled.startswith("Slurm's scontrol did not answer for 12 s, hosts.json's "
                                        "slurm.unanswered_timeout")
    assert clock() <= 40  # given up at the first look past 12 s of silence, not after the default's 60
    with pytest.raises(UserError, match="unanswered_timeout"):
        SlurmJob.from_section({"nodes": 2, "unanswered_timeout": 0}, "hosts.json")


def test_a_stop_ends_the_following_within_its_bound_even_when_slurmctld_is_gone(tmp_path):
    """SIGTERM to ck run --submit with slurmctld dead: one scancel and one look, then the command ends."""
    now = [0.0]

    def silent_state(job_id):
        now[0] += 2.0  # each scontrol waits its whole timeout
        return JobState("UNKNOWN")

    def silent_cancel(job_id):
        now[0] += 2.0
        raise UserError("Slurm's scancel did not answer within 2 s; is slurmctld up? (check with sinfo)")

    stop = []
    end = follow("7", TWO_NODES, tmp_path / "job.out", io.StringIO(), lambda: stop[0] if stop else None,
                 clock=lambda: now[0], state_of=lambda j: (stop.append("stopped by SIGTERM") or JobState("RUNNING"))
                 if not stop else silent_state(j), cancel_job=silent_cancel, poll_s=0)
    assert now[0] <= STOPPED_WAIT_S + 2.0  # the bound, plus the one look that may have begun before it
    assert end.why_cancelled.startswith("the command following it was stopped by SIGTERM; scancel failed")
    assert "check squeue for job 7" in end.describe()


def test_submit_is_refused_for_a_machine_naming_no_job_and_from_inside_a_job():
    assert job_to_submit({"slurm": {"nodes": 3}}, "m", False, "the run").nodes == 3
    for description in ({"hosts": ["a", "b"]}, ["a", "b"], None):
        with pytest.raises(UserError, match=r"--submit needs --target=MACHINE, a machine whose hosts.json has a "
                                            r"'slurm' section"):
            job_to_submit(description, "m", False, "the run")
    with pytest.raises(UserError, match="would queue a job from a job: drop --submit, and the sweep uses this "
                                        "allocation's nodes"):
        job_to_submit({"slurm": {"nodes": 3}}, "m", True, "the sweep")


def test_a_job_scontrol_does_not_know_yet_is_not_taken_for_one_that_ended(tmp_path):
    ticks = iter(range(0, 10**6, 5))
    scripted = Scripted(JobState(""), JobState(""), JobState("PENDING", "Priority"), JobState("COMPLETED", "None", 0))
    end, said = _follow(scripted, tmp_path, clock=lambda: next(ticks))
    assert end.completed and "pending (Priority)" in said
    ticks = iter(range(0, 10**6, 5))
    end, _ = _follow(Scripted(JobState("RUNNING"), JobState("")), tmp_path, clock=lambda: next(ticks))
    assert end.state == "" and not end.completed  # known, then forgotten: over (its result says what happened)


def test_a_sweep_with_a_bad_option_is_refused_before_anything_is_queued(tmp_path, monkeypatch):
    """The study's options are checked on stand-in hosts first: sbatch is never reached (it is not even looked
    for: PATH holds no Slurm here)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    store = Store(tmp_path / "store", "s")
    machines = {"site": {"slurm": {"nodes": 3}, "user": "me"}}
    with pytest.raises(UserError, match="p4"):
        submit_sweep({"target": "site", "variants": "baseline,p4"}, study(), store, ALL_MODELS, machines.get,
                     console=io.StringIO())
    assert not (store.root / "jobs").exists()


def fake_sbatch(folder, stderr, code):
    sbatch = folder / "sbatch"
    sbatch.write_text(f"#!/bin/sh\necho {stderr!r} >&2\nexit {code}\n")
    sbatch.chmod(0o755)


@pytest.mark.parametrize("said, advice", [
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available",
     "check hosts.json's slurm section \\(--job-name=p3 --nodes=3"),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
     "controller does not answer: check that slurmctld runs")])
def test_a_refusal_names_slurms_reason_and_the_fix_that_fits_it(tmp_path, monkeypatch, said, advice):
    fake_sbatch(tmp_path, said, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    job = SlurmJob(nodes=3)
    for attempt in (lambda: slurm.test_only(job), lambda: slurm.submit(job, tmp_path / "s", tmp_path / "o", tmp_path)):
        with pytest.raises(UserError, match=advice) as refused:
            attempt()
        assert said.removeprefix("sbatch: error: ") in str(refused.value) and "\n" not in str(refused.value)


def test_without_sbatch_on_path_submit_says_what_to_install_and_where_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="needs Slurm's sbatch on PATH .*login node"):
        slurm.test_only(SlurmJob(nodes=1))


def test_a_job_slurm_ended_short_is_a_failed_run_whether_or_not_the_run_inside_caught_its_signal():
    cancelled = slurm.JobEnd("42", "CANCELLED", "None", 0, pending_s=1.0, running_s=5.0)
    caught = Result.failed("stopped by SIGTERM", RunStatus.INTERRUPTED)  # the run inside saw scancel's SIGTERM
    for inner in (caught, None):  # ... or was killed before it wrote anything
        result = submitted_result(inner, cancelled, stopped_here=False, output="job.out")
        assert result.status is RunStatus.FAILED and result.failure_reason.startswith("Slurm job 42 ended CANCELLED")
    refused = Result.failed("--env.X refused", RunStatus.REFUSED)
    assert submitted_result(refused, cancelled, stopped_here=False, output="o").status is RunStatus.REFUSED
    # A stop here (Ctrl-C) cancels the job itself: interrupted.
    ours = slurm.JobEnd("42", "CANCELLED", "None", 0, 1.0, 5.0, why_cancelled="the command following it was stopped")
    assert submitted_result(caught, ours, stopped_here=True, output="o").status is RunStatus.INTERRUPTED
    done = slurm.JobEnd("42", "COMPLETED", "None", 0, 1.0, 5.0)
    ok = Result(status=RunStatus.OK)
    assert submitted_result(ok, done, stopped_here=False, output="o") is ok and ok.status is RunStatus.OK


@pytest.mark.parametrize("followed, said", [(True, "the run command following it was stopped before it could finish"),
                                             (False, "the run command never followed it")])
def test_cks_postprocess_says_whether_the_job_was_followed_and_cancels_it(tmp_path, monkeypatch, followed, said):
    cancelled = []
    monkeypatch.setattr(program, "cancel", lambda job, timeout: cancelled.append((job, timeout)))
    monkeypatch.setattr(program, "exit_with_the_programs_code", lambda code: None)
    RunSpec(submission=Submission("slurm", "12", {"nodes": 2}, "job.sbatch", "job.out", str(tmp_path / "job"),
                                  0.0)).save(tmp_path)
    if followed:
        (tmp_path / FOLLOWING_FILE).write_text("1\n")
    out = program.postprocess({"misc": {program.RUN_FOLDER_KEY: str(tmp_path)}})
    assert out["characteristics"]["failure_reason"] == f"Slurm job 12 was cancelled: {said}"
    assert out["characteristics"]["status"] == "interrupted" and cancelled == [("12", 2)]


def test_a_lost_controller_that_takes_no_cancel_ends_the_following_at_once(tmp_path):
    """slurmctld silent for UNANSWERED_S, then scancel fails: no job state can come, so the command ends there
    instead of waiting CANCEL_WAIT_S more for one."""
    now = [0.0]

    def state_of(job_id):
        now[0] += 1.0
        return JobState("RUNNING") if now[0] < 2 else JobState("UNKNOWN")

    def silent_cancel(job_id):
        now[0] += 2.0
        raise UserError("Slurm's scancel did not answer within 2 s; is slurmctld up? (check with sinfo)")

    end = follow("7", TWO_NODES, tmp_path / "job.out", io.StringIO(), lambda: None, clock=lambda: now[0],
                 state_of=state_of, cancel_job=silent_cancel, poll_s=0)
    assert end.why_cancelled.startswith(f"Slurm's scontrol did not answer for {UNANSWERED_S} s")
    assert "scancel failed" in end.why_cancelled
    assert now[0] < UNANSWERED_S + 10 < UNANSWERED_S + CANCEL_WAIT_S
