"""The command that ``ck run program:p3`` executes in the run folder.

    python -P -m reprokit.run.command p3-run.json

``-P`` keeps the run folder off ``sys.path``: a local run ships ``reprokit/__init__.py`` and ``reprokit/wire``
there for the engine's scripts, and that copy must not hide the framework from the next run in the same folder.

Reads the run specification the preprocess wrote, launches and supervises every
role, parses the workers' logs into the unified result (``p3-result.json``),
prints one summary line, and exits 0 only if the run succeeded: stock CK's
program module turns this exit code into ``run_success``. A run stopped from
outside (a signal to it or to ck, ck gone: see ``lifeline``) is torn down,
marked ``interrupted`` in its result, and exits 130.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from reprokit.core.errors import UserError, say_failure
from reprokit.core.jsonfile import write_json
from reprokit.core.paths import disk_error
from reprokit.run import lifeline
from reprokit.run.forecast import EpochForecast
from reprokit.run.launch import Outcome, StopRequest
from reprokit.run.launchers import get_launcher
from reprokit.run.result import Result, build
from reprokit.run.spec import FOLLOWING_FILE, SPEC_FILE, RunSpec
from reprokit.run.submit import follow_submission
from reprokit.vocabulary import RunStatus


def main(argv: list[str] | None = None) -> int:
    stop = StopRequest()
    stop.install()  # first: a Ctrl-C from here on tears the run down instead of printing a traceback
    argv = sys.argv[1:] if argv is None else argv
    spec_path = Path(argv[0] if argv else SPEC_FILE).resolve()
    run_dir = spec_path.parent
    try:
        spec = RunSpec.load(spec_path)
    except UserError as exc:
        say_failure(f"p3: error: {exc}")
        return RunStatus.REFUSED.exit_code
    if spec.error:  # the preprocess refused the input; say why, once
        say_failure(f"p3: error: {spec.error}")
        return RunStatus.REFUSED.exit_code

    lifeline.launcher_started(run_dir, stop.request)
    lifeline.watch(os.environ.get(lifeline.CK_PROCESS_ENV), stop.request, "the ck run that started it")
    if spec.submission is not None:
        return _follow(spec, run_dir, stop)
    forecast = EpochForecast.for_run(spec, sys.stdout)
    watch = forecast.watch if forecast is not None else None
    try:
        outcome: Outcome = get_launcher(spec.launcher_name).run(spec, run_dir, sys.stdout, stop, watch)
    except OSError as exc:
        full = disk_error(exc, "the run folder", run_dir)  # a full disk or an overlong name: not a bug of ours
        outcome = Outcome(RunStatus.FAILED, str(full)) if full else _internal_error(exc, run_dir)
    except Exception as exc:
        outcome = _internal_error(exc, run_dir)
    if forecast is not None and forecast.message:
        outcome.warnings.insert(0, forecast.message)
    try:
        write_json(run_dir / "launch.json", outcome.to_dict())
        result = build(spec, outcome, run_dir)
        result.save(run_dir)
    except OSError as exc:  # the run is over and torn down; only its record could not be kept
        full = disk_error(exc, "the run's result", run_dir)
        say_failure(f"p3: error: {full or f'cannot write the result into {run_dir}: {exc.strerror or exc}'}"
                    f" (the run itself: {'succeeded' if outcome.success else outcome.reason})")
        lifeline.ended_unrecorded(run_dir)  # that line is the run's last: ck's postprocess must not add its own
        return RunStatus.FAILED.exit_code
    try:
        result.say_summary()
        for warning in result.warnings[len(outcome.warnings):]:  # those build found (its docstring)
            print(f"p3: warning: {warning}", flush=True)
    except OSError:  # nobody reads our output any more (ck was killed with its terminal): the result is saved
        pass
    return result.status.exit_code


def _follow(spec: RunSpec, run_dir: Path, stop: StopRequest) -> int:
    """--submit: follow the batch job the preprocess submitted; its run's result is ours."""
    assert spec.submission is not None
    (run_dir / FOLLOWING_FILE).write_text(f"{time.time():.3f}\n")  # ck's postprocess: it was followed
    try:
        result = follow_submission(spec.submission, sys.stdout, stop)
    except UserError as exc:  # Slurm's commands stopped answering: the job may live on, so say which it is
        result = Result.failed(f"{exc} (Slurm job {spec.submission.job_id}); check squeue for it")
    result.save(run_dir)
    result.say_summary()
    return result.status.exit_code


def _internal_error(exc: Exception, run_dir: Path) -> Outcome:
    """A bug of ours: say so in one line, keep the details for a report."""
    try:
        (run_dir / "launcher-error.txt").write_text(traceback.format_exc())
    except OSError:
        pass
    return Outcome(RunStatus.FAILED, f"internal launcher error ({type(exc).__name__}: {exc}); "
                          f"details in {run_dir / 'launcher-error.txt'}")


if __name__ == "__main__":
    sys.exit(main())
