"""A run submitted as a batch job (``ck run program:p3 --target=NAME --submit``), followed to its end.

The preprocess submits the job (``cluster.slurm.submit``; the job runs the same ck command without ``--submit``,
its run folder ``job/`` inside this one) and records it in the run specification. The run command then follows
the job here: the job's output streams to the console, a stop (Ctrl-C, a signal, ck gone) cancels it, and when
it ends, the result of the run inside it becomes this run's result, with the job beside it (``batch_job``). A
job that did not complete (refused, cancelled, timed out, failed) gives a failed result naming Slurm's state and
reason; the run inside it left no result to store.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from reprokit.cluster.slurm import JobEnd, SlurmJob, follow
from reprokit.run.launch import StopRequest
from reprokit.run.result import RESULT_FILE, Result
from reprokit.run.spec import Submission
from reprokit.vocabulary import RunStatus


def follow_submission(submission: Submission, console: TextIO, stop: StopRequest) -> Result:
    job = SlurmJob(**{**submission.job, "extra": tuple(submission.job.get("extra", ()))})
    end = follow(submission.job_id, job, Path(submission.output), console, lambda: stop.reason)
    inner = Path(submission.job_folder)
    result: Result | None = None
    if (inner / RESULT_FILE).exists():
        try:
            result = Result.load(inner)
        except (OSError, ValueError, KeyError, TypeError):
            result = None
    result = submitted_result(result, end, stopped_here=bool(stop.reason), output=submission.output)
    result.batch_job = _job_record(submission, end)
    return result


def submitted_result(inner: Result | None, end: JobEnd, stopped_here: bool, output: str) -> Result:
    """The run's result from the job's end and the result the run inside it wrote (None: it wrote none).

    A job Slurm ended short (cancelled, timed out) is a failed run: the run inside may have caught Slurm's SIGTERM
    in time to call itself interrupted, or been killed before writing anything, and the status must not depend on
    which. Interrupted is kept for a stop here (Ctrl-C, a signal to this command), which cancels the job."""
    if end.why_cancelled:
        return Result.failed(end.describe(), RunStatus.INTERRUPTED if stopped_here else RunStatus.FAILED)
    if inner is None:
        return Result.failed(f"{end.describe()}; the run inside it wrote no {RESULT_FILE} (the job's output: "
                             f"{output})")
    if not end.completed:  # Slurm's word first; what the run inside said, after it
        inner_reason = inner.failure_reason if not inner.run_success else "after its run succeeded"
        inner.failure_reason = f"{end.describe()}: {inner_reason}"
        if inner.status in (RunStatus.OK, RunStatus.INTERRUPTED):  # a refusal inside stays one
            inner.status = RunStatus.FAILED
    return inner


def _job_record(submission: Submission, end: JobEnd) -> dict[str, Any]:
    return {"scheduler": submission.scheduler, "job_id": end.job_id, "state": end.state, "reason": end.reason,
            "exit_code": end.exit_code, "pending_s": round(end.pending_s, 3), "running_s": round(end.running_s, 3),
            "cancelled": end.why_cancelled or None, "script": submission.script, "output": submission.output}
