"""program:p3's CK hooks: ask CK for the engine, the data and the machine, then hand plain values to the run.

Bad input is recorded in the run specification instead of returned as a CK error:
the run command then prints it as one line and exits non-zero, which stock CK
reports as a failed run (a preprocess error would not change ck's exit code, and
breaks --treat_return_code_as_exit_code).

Except shell syntax: stock CK has already written every setting into its run
script (`export NAME=VALUE`, unquoted) when it calls the preprocess, and runs
that script next. A value a shell would read as syntax therefore stops ck right
here, with one line and exit code 2: nothing of the script runs.

Run folder: ``--tmp_dir=DIR`` is the run folder; without it (CK's shared
``program/p3/tmp``) each run gets its own (``run.folders``), the run command is
started there (a ``cd`` in the script CK writes) and the postprocess finds it in
``misc``, which CK hands to both hooks. While the run command runs, ck's own
SIGINT/SIGTERM/SIGHUP go to the launcher (``run.lifeline``).
"""
from __future__ import annotations

import difflib
import os
import shlex
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reprokit.ck.errors import CkDict
from reprokit.ck.registry import engine_for_run, env_entries
from reprokit.ck.script import exit_with_the_programs_code, run_arguments, run_batch_name, run_option, user_settings
from reprokit.cluster.hosts import parse as parse_cluster
from reprokit.cluster.slurm import POLL_TIMEOUT_S, argv_without, cancel, job_of, job_to_submit, submit_command
from reprokit.core.errors import UserError, say_failure
from reprokit.core.paths import SRC_DIR
from reprokit.core.values import plain_setting, shown
from reprokit.data.imagenet import RECORDIO_TAGS, choose_recordio
from reprokit.data.iwslt import TAGS as CORPUS_TAGS, choose_corpus
from reprokit.engines.base import InstalledEngine
from reprokit.run import lifeline
from reprokit.run.folders import new_run_folder
from reprokit.run.launchers import choose_launcher, in_slurm_allocation
from reprokit.run.procscan import kill_run_processes, process_identity
from reprokit.run.result import RESULT_FILE, Result
from reprokit.run.settings import MODELS, RunSettings, default_profile, resolve
from reprokit.run.spec import FOLLOWING_FILE, SPEC_FILE, RunData, RunSpec, Submission, build_spec
from reprokit.vocabulary import RunStatus

SCRIPT_WRITES_SETTINGS = "stock CK writes every --env setting unquoted into its run script"
SCRIPT_RUNS_BY_NAME = "stock CK runs its run script by this name, unquoted, through bash -c"
SCRIPT_WRITES_PATHS = "stock CK writes this path unquoted into its run script: move it to a plain path"


def run_data(image_model: bool, mode: str = "", pinned: str = "") -> RunData:
    """What a run reads: a converted ImageNet train set (image models) or a registered IWSLT15 corpus (sockeye);
    generated data (synthetic batches, or the synthetic corpus each Sockeye worker writes) when none is chosen."""
    if image_model:
        found = choose_recordio(env_entries(RECORDIO_TAGS), mode, pinned)
        if found is None:
            return RunData()
        return RunData(found.name, found.train_args(), found.rec, found.env_uid, found.images, "images", split=True)
    corpus = choose_corpus(env_entries(CORPUS_TAGS), mode, pinned)
    if corpus is None:
        return RunData()
    return RunData(corpus.name, corpus.train_args(), "", corpus.env_uid, corpus.train_pairs, "sentence pairs")


def run_engine(settings: RunSettings, env: CkDict) -> InstalledEngine:
    return engine_for_run(settings, str(env.get("ENGINE", "")).strip(), str(env.get("ENGINE_ENV", "")).strip())


def decided_run(i: CkDict, cluster_data: object, allocation_env: Mapping[str, str] | None) -> tuple[RunSettings, InstalledEngine, RunData]:
    """The run's settings, engine and data, decided from ck's input (the profile's default from the cluster data
    and, inside an allocation, its environment)."""
    env = i.get("env", {})
    settings = resolve(i.get("misc", {}).get("cmd_key", ""), env, default_profile(cluster_data, allocation_env))
    engine = run_engine(settings, env)
    if settings.script != MODELS[settings.model].script:  # emulated Sockeye: train.py reads no corpus
        given = [f"--env.{k}" for k in ("DATA", "DATASET_ENV")
                 if str(env.get(k, "")).strip() not in ("", "synthetic")]
        if given:
            raise UserError(f"an emulated Sockeye run reads no corpus (its workers build only Sockeye's arrays); "
                            f"drop {' and '.join(given)}")
        return settings, engine, RunData()
    data = run_data(MODELS[settings.model].is_image, str(env.get("DATA", "")), str(env.get("DATASET_ENV", "")).strip())
    return settings, engine, data


def _cluster_data(i: CkDict) -> Any:  # hosts.json as CK stored it: checked by cluster.hosts.parse
    return (i.get("device_cfg") or {}).get("remote_params", {}).get("cluster_config")


def make_spec(i: CkDict, run_dir: Path | None = None) -> RunSpec:
    env = i.get("env", {})
    cluster_data = _cluster_data(i)
    launcher = choose_launcher(str(env.get("LAUNCHER", "")), cluster_data is not None, os.environ)
    source = "the machine's hosts.json (see: ck load machine:NAME)"
    if launcher.inside_job and cluster_data is None:  # the job's nodes
        cluster_data, source = dict(launcher.job_hosts or {}), launcher.job_where
    if not launcher.runs_in_described_job and job_of(cluster_data, "the machine's hosts.json") is not None \
            and not any(key in cluster_data for key in ("hosts", "nodefile", "hostlist")):
        raise UserError("the machine's hosts.json describes a Slurm job, not hosts: add --submit to run as that job "
                        "(or run inside an allocation, e.g. salloc)")
    cluster = None
    if cluster_data is not None:
        # An allocation (nodefile, hostlist) is expanded now, from this run's environment.
        cluster = parse_cluster(cluster_data, source=source)
    if cluster is not None:
        launcher.check_hosts(cluster.names, os.environ)
    settings, engine, data = decided_run(i, cluster_data, os.environ if launcher.reads_job_environment else None)
    if cluster is not None and cluster.allocation:
        print(f"p3: hosts from {cluster.allocation}: {', '.join(cluster.names)}", flush=True)
    # The run reads the hosts spelled out, so it uses exactly the hosts planned here.
    return build_spec(settings, engine, data, cluster, run_dir=str(run_dir) if run_dir else None,
                      launcher=launcher.name, inside_job=launcher.inside_job)


# ck run options the run inside a submitted job must not repeat: the submission, our run folder, our output file.
NOT_FOR_THE_JOB = ("--submit", "--tmp_dir", "--out", "--out_file", "--treat_return_code_as_exit_code")


def submit_run(i: CkDict, run_dir: Path) -> RunSpec:
    """--submit: check what can be checked before the job queues, then submit the same ck command as the batch job
    hosts.json's ``slurm`` section describes (cluster.slurm); the run command follows it (run.submit)."""
    job = job_to_submit(_cluster_data(i), "the machine's hosts.json", in_slurm_allocation(os.environ), "the run")
    decided_run(i, _cluster_data(i), os.environ)  # as the job will decide it: a typo fails now, not after the queue
    job_folder = run_dir / "job"
    job_folder.mkdir(exist_ok=True)
    command = [os.path.abspath(sys.argv[0]), *argv_without(sys.argv[1:], *NOT_FOR_THE_JOB),
               f"--tmp_dir={job_folder}", "--treat_return_code_as_exit_code=yes"]
    submitted_at = time.time()
    job_id, script, output = submit_command(job, command, run_dir)
    print(f"p3: submitted Slurm job {job_id} ({' '.join(job.sbatch_options())}): {script}", flush=True)
    return RunSpec(submission=Submission("slurm", job_id, asdict(job), str(script), str(output), str(job_folder),
                                         submitted_at))


# Settings a user may pass through to the engine's processes besides the program's own (its run_vars).
PASS_THROUGH = ("MXNET_", "OMP_", "KMP_", "MKL_", "OPENBLAS_", "CK_")


def unknown_setting(given: Iterable[str], known: Iterable[str], option: str = "") -> str | None:
    """Why the first setting no program setting or pass-through prefix knows is refused (with the likeliest
    meant), or None. ``option``: how the setting was given, shown before its name (``--env.`` for a study's)."""
    known = sorted(known)
    for name in given:
        if name in known or name.startswith(PASS_THROUGH):
            continue
        meant = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        if meant:
            return (f"unknown setting {option}{shown(name, quoted=False)} (did you mean {meant[0]}?); the settings are in "
                    f"docs/reference/settings.md, 'Run settings'")
        return (f"unknown setting {option}{shown(name, quoted=False)}; program:p3's settings are {', '.join(known)}, and "
                f"variables starting {', '.join(PASS_THROUGH)} pass through to the engine")
    return None


def refuse_bad_settings(env: CkDict, ours: CkDict, run_dir: Path, known: Iterable[str] = ()) -> None:
    """Stop ck before its run script runs when a setting (or a path of ours beside them) holds shell syntax, or
    when the user gave a setting nobody knows (a typo would otherwise run with the default)."""
    try:
        for name, value in env.items():
            plain_setting(str(name), value, SCRIPT_WRITES_SETTINGS)
        for name, value in ours.items():
            plain_setting(name, value, SCRIPT_WRITES_PATHS)
        plain_setting("run_batch_name", run_batch_name(), SCRIPT_RUNS_BY_NAME)
        why = unknown_setting(user_settings(), known)
        if why:
            raise UserError(why)
        arguments = run_arguments()  # `ck run ... -- ARGS`: appended to the run command (see ck/script.py)
        if arguments:
            raise UserError(f"program:p3 takes no arguments after -- (got {shown(arguments)}), and stock CK would "
                            f"append them unquoted to its run script, so they are refused before anything runs: "
                            f"drop them, and give settings as --env.NAME=VALUE")
    except UserError as exc:
        say_failure(f"p3: error: {exc}")
        RunSpec.refused(str(exc)).save(run_dir)  # the run folder says why, as for any refused input
        result = Result.failed(str(exc), RunStatus.REFUSED)
        result.run_folder = str(run_dir)
        result.save(run_dir)
        raise SystemExit(RunStatus.REFUSED.exit_code) from None


RUN_FOLDER_KEY = "p3_run_folder"  # in CK's misc: where the preprocess put this run


def run_folder(i: CkDict) -> Path:
    """--tmp_dir names the run folder; CK's shared default (program/p3/tmp) gets a new one per run."""
    shared = Path.cwd()
    if str(i.get("misc", {}).get("tmp_dir", "tmp")) not in ("", "tmp"):
        return shared
    return new_run_folder(shared)


def preprocess(i: CkDict) -> CkDict:
    """Choose the run folder; write the run specification and the hosts file into it."""
    try:
        run_dir = run_folder(i)
    except UserError as exc:  # no folder to say why in (a full disk, an overlong name): this line says it
        say_failure(f"p3: error: {exc}")
        raise SystemExit(RunStatus.REFUSED.exit_code) from None
    i.setdefault("misc", {})[RUN_FOLDER_KEY] = str(run_dir)
    for stale in (RESULT_FILE, "launch.json"):
        (run_dir / stale).unlink(missing_ok=True)
    ours = {"REPROKIT_PYTHON": sys.executable, "REPROKIT_SRC": str(SRC_DIR),
            lifeline.CK_PROCESS_ENV: process_identity(os.getpid()) or ""}
    refuse_bad_settings(i.get("env", {}), ours, run_dir, known=(i.get("meta") or {}).get("run_vars", {}))
    lifeline.clear(run_dir)
    lifeline.forward_stops(run_dir)
    lifeline.watch_launcher(run_dir)
    try:
        if run_option("submit"):
            spec = submit_run(i, run_dir)
        else:
            spec = make_spec(i, run_dir)
    except UserError as exc:
        spec = RunSpec.refused(str(exc))
    else:
        if spec.submission is None:
            (run_dir / "hosts").write_text("".join(f"{h}\n" for h in spec.accepted().plan.hosts))
            print(f"p3: plan: {spec.describe()}", flush=True)
    spec.save(run_dir)
    return {"return": 0, "bat": f"cd {shlex.quote(str(run_dir))}", "new_env": ours}


def postprocess(i: CkDict) -> CkDict:
    """Hand the unified result to CK as the run's characteristics."""
    run_dir = Path(i.get("misc", {}).get(RUN_FOLDER_KEY) or Path.cwd())
    if (run_dir / RESULT_FILE).exists():
        result = Result.load(run_dir)
    else:
        try:
            spec = RunSpec.load(run_dir / SPEC_FILE)
        except UserError:
            spec = RunSpec()
        if spec.error:
            result = Result.failed(spec.error, RunStatus.REFUSED)  # already printed by the run command
        elif spec.submission is not None:  # submitted; its follower did not end (or never began): the job goes too
            job = spec.submission.job_id
            try:
                cancel(job, timeout=POLL_TIMEOUT_S)
                cancelled = f"Slurm job {job} was cancelled"
            except UserError as exc:
                cancelled = f"Slurm job {job} could not be cancelled ({exc}; check squeue for it)"
            how = ("the run command following it was stopped before it could finish"
                   if (run_dir / FOLLOWING_FILE).exists() else "the run command never followed it")
            result = Result.failed(f"{cancelled}: {how}", RunStatus.INTERRUPTED)
            say_failure(f"p3: FAILED: {result.failure_reason}", stdout=True)
        elif (run_dir / lifeline.UNRECORDED_FILE).exists():  # it said why itself (a full disk kept its result)
            result = Result.failed(f"the run ended without writing {RESULT_FILE} in {run_dir}; its own p3: line "
                                   f"said why")
        elif (run_dir / lifeline.LAUNCHER_FILE).exists() or (run_dir / lifeline.STOP_FILE).exists():
            # It started and was killed before it could finish, or was stopped before it could start.
            # Its roles died with it (PR_SET_PDEATHSIG); anything they started that is still here goes now.
            if spec.plan is not None:
                kill_run_processes(spec.plan.run_id)
            frozen = lifeline.read_line(run_dir / lifeline.FROZEN_FILE)
            result = Result.failed(frozen or f"the launcher was stopped before it finished (no {RESULT_FILE} in "
                                             f"{run_dir}); the run was interrupted", status=RunStatus.FAILED if frozen else RunStatus.INTERRUPTED)
            try:
                result.save(run_dir)
            except OSError:  # a full disk: the line below still says what happened
                pass
            say_failure(f"p3: FAILED: {result.failure_reason}", stdout=True)
        else:
            result = Result.failed(f"the run wrote no {RESULT_FILE} in {run_dir}")
            say_failure(f"p3: FAILED: {result.failure_reason}", stdout=True)
    result.run_folder = str(run_dir)
    if not result.run_success:
        exit_with_the_programs_code(result.status.exit_code)  # non-zero (1, 2 refused, 130) without CK's flag
    return {"return": 0, "characteristics": result.to_dict()}
