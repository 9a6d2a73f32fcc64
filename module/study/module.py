"""CK module `study`: a paper's claims, the sweep that checks them, the report. Thin calls into reprokit.

    ck reproduce study:NAME [--target=MACHINE] [--models=a,b] [--bandwidths=1gbit,4gbit] [--variants=baseline,p3]
                            [--repetitions=N] [--quick] [--profile=smoke|paper] [--link_capacity=RATE]
                            [--env.K=V ...] [--resume[=SWEEP]] [--store=DIR]
    ck report study:NAME [--out_dir=DIR] [--store=DIR]
    ck export study:NAME --out=FILE.tar.gz [--store=DIR]
    ck import study:NAME --in=FILE.tar.gz [--store=DIR]

This file is the boundary: CK's dict-in/dict-out style stays here; the logic
lives in reprokit.study.claims, study_store, study_sweep, study_analysis,
study_report and study_bundle.
"""
import os
import sys

cfg = {}  # set by CK: this module's meta
work = {}  # set by CK
ck = None  # set by CK: the kernel

_SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from pathlib import Path  # noqa: E402

from reprokit.ck import boundary as ck_boundary  # noqa: E402
from reprokit.study import claims as studies  # noqa: E402
from reprokit.errors import UserError  # noqa: E402
from reprokit.study.store import Store  # noqa: E402

CK_OUTPUT_MODES = ("", "con", "json", "json_file")


def init(i):
    return {"return": 0}


def _error(i, exc):
    """One line; the ck CLI prints it (also with `--out=FILE.tar.gz`) and exits 1."""
    return {"return": 1, "error": str(exc)}


def _load_study(i):
    name = i.get("data_uoa", "")
    if not name:
        raise UserError("name the study: ck ACTION study:NAME (ck list study)")
    r = ck.access({"action": "load", "module_uoa": work["self_module_uid"], "data_uoa": name})
    if r["return"] > 0:
        raise UserError(f"there is no study {name!r}; list them with: ck list study")
    return studies.from_meta(r["data_alias"] or name, r["dict"])


def _store(i, study):
    given = str(i.get("store", "") or "")
    local = ""
    if not given:
        r = ck.access({"action": "where", "module_uoa": "repo", "data_uoa": "local"})
        if r["return"] > 0:
            raise UserError(f"cannot find CK's local repository for the results store: {r['error']}; give --store=DIR")
        local = r["path"]
    return Store(studies.store_dir(given, local, study.name), study.name)


def _program_models(study):
    r = ck.access({"action": "load", "module_uoa": "program", "data_uoa": study.program})
    if r["return"] > 0:
        raise UserError(f"program:{study.program} is not registered with CK (python -m reprokit.bootstrap)")
    return set(r["dict"].get("run_cmds", {}))


def _machine_config(name):
    return ck_boundary.machine_cluster_data(ck, name)


def _flag(i, key):
    return str(i.get(key, "")).lower() in ("yes", "true", "1", "on")


def reproduce(i):
    """Run the study's matrix on a target through `ck run program:P`, storing one record per run; then report."""
    from reprokit.study import sweep as sweeps

    try:
        study = _load_study(i)
        store = _store(i, study)
        program_models = _program_models(study)
        resume = i.get("resume")
        if resume not in (None, "", "no"):
            given = [k for k in ("target", "models", "bandwidths", "variants", "repetitions", "quick", "profile",
                                 "link_capacity") if i.get(k) not in (None, "", {})]
            given += [f"env.{k}" for k in studies.parse_env_overrides(i)]
            if given:
                raise UserError(f"--resume continues a sweep with its own settings; drop --{', --'.join(given)}")
            known = store.sweeps()
            if not known:
                raise UserError(f"there is no sweep to resume in {store.root}; start one with: ck reproduce study:{study.name}")
            sweep = store.sweep(resume) if resume != "yes" else known[-1]
            target_info = sweep["target"]
            data = _machine_config(target_info["name"]) if target_info["name"] else None
            target = studies.make_target(target_info["name"], data, target_info.get("link_capacity"))
        else:
            sweep = _new_sweep(i, study, store, program_models, sweeps)
            target = studies.make_target(sweep["target"]["name"],
                                         _machine_config(sweep["target"]["name"]) if sweep["target"]["name"] else None,
                                         sweep["target"].get("link_capacity"))
        if target.shaping and os.geteuid() != 0:
            raise UserError(f"shaping the links of testbed {target.testbed} needs root (tc in its namespaces); run as root")
        print(f"study: sweep {sweep['sweep_id']} on {target.label}: {target.bandwidth_note()}", flush=True)
        print(f"study: results store {store.root}", flush=True)
        summary = sweeps.run_sweep(study, store, sweep, target, sweeps.testbed_shaper(target))
        print(sweeps.summary_line(summary, store.root), flush=True)
        if summary.stopped:
            raise UserError(f"sweep {summary.sweep_id} {summary.stopped}; the runs stored are kept; continue with: "
                            f"ck reproduce study:{study.name} --resume={summary.sweep_id}")
        paths = _write_report(i, study, store, program_models)
        if summary.failed:
            raise UserError(f"{len(summary.failed)} run(s) failed (stored with their reasons, see {paths['html']}); "
                            f"first: {summary.failed[0]}")
    except UserError as exc:
        return _error(i, exc)
    return {"return": 0, "sweep_id": summary.sweep_id, "report": str(paths["html"])}


def _new_sweep(i, study, store, program_models, sweeps):
    quick = _flag(i, "quick")
    matrix = study.quick if quick else study.matrix
    target_name = str(i.get("target", "") or "")
    data = _machine_config(target_name) if target_name else None
    target = studies.make_target(target_name, data, i.get("link_capacity") or None)
    models = studies.select(i.get("models"), study.matrix.models, "model(s)") or list(matrix.models)
    missing = [m for m in models if m not in program_models]
    for m in missing:
        print(f"study: skipping {m}: program:{study.program} has no cmd_key {m!r} yet "
              f"(its claims are reported as not testable here)", flush=True)
    models = [m for m in models if m in program_models]
    if not models:
        raise UserError(f"none of the chosen models can run: program:{study.program} has "
                        f"{', '.join(sorted(program_models))}; choose with --models=")
    variants = studies.select(i.get("variants"), study.variants, "variant(s)") or list(matrix.variants)
    requested_bw = studies.select(i.get("bandwidths"), _any_rate(i.get("bandwidths")), "bandwidth(s)")
    bandwidths = list(studies.sweep_bandwidths(target, requested_bw, matrix))
    raw_reps = str(i.get("repetitions", "") or matrix.repetitions)
    if not raw_reps.isdigit() or int(raw_reps) < 1:
        raise UserError(f"--repetitions must be a whole number of at least 1, got {raw_reps!r}")
    profile = str(i.get("profile", "") or "")
    if not profile:
        profile = matrix.profile if (quick or target.kind != "embedded") else "smoke"
    from reprokit.run import settings as run_settings

    if profile not in run_settings.PROFILES:
        raise UserError(f"unknown --profile {profile!r}; valid ones: {', '.join(sorted(run_settings.PROFILES))}")
    user_env = studies.parse_env_overrides(i)
    sweeps.check_env(user_env)
    request = sweeps.SweepRequest(models=models, variants=variants, bandwidths=bandwidths, repetitions=int(raw_reps),
                                  profile=profile, env={**dict(matrix.env), **user_env}, quick=quick)
    options = {k: i[k] for k in ("target", "models", "bandwidths", "variants", "repetitions", "quick", "profile",
                                 "link_capacity") if i.get(k) not in (None, "", {})}
    options.update({f"env.{k}": v for k, v in user_env.items()})
    restore = None
    if target.kind == "testbed":
        restore = studies.testbed_of(data).get("rate")
    return sweeps.create_sweep(store, study, target, request, options, restore_rate=restore)


def _any_rate(raw):
    """--bandwidths takes any tc rate: the allowed list is the request itself, checked by rate_bps."""
    names = [n.strip() for n in str(raw or "").split(",") if n.strip()]
    for name in names:
        studies.rate_bps(name)
    return names


def _write_report(i, study, store, program_models):
    from reprokit.study import analysis as study_analysis, report as study_report

    records = store.all_records()
    analysis = study_analysis.analyse(study, records, program_models)
    out_dir = Path(str(i.get("out_dir", "") or store.root / "report")).expanduser().resolve()
    paths = study_report.render(study, analysis, records, out_dir, store.root, program_models)
    counts = {}
    for verdict in analysis.overall.values():
        counts[verdict] = counts.get(verdict, 0) + 1
    print(f"study: {len(analysis.runs)} run(s) analysed; claims: "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), flush=True)
    for badge in analysis.badges:
        print(f"study: badge {badge.name}: {badge.status}", flush=True)
    print(f"study: report {paths['html']} and {paths['markdown']} ({paths['seconds']:.1f} s)", flush=True)
    return paths


def report(i):
    """Write the Markdown and HTML reports (plots, verdicts, badges) from every stored and imported run."""
    try:
        study = _load_study(i)
        store = _store(i, study)
        paths = _write_report(i, study, store, _program_models(study))
    except UserError as exc:
        return _error(i, exc)
    return {"return": 0, "html": str(paths["html"]), "markdown": str(paths["markdown"])}


def export(i):
    """Write every local run (records and run folders) into a bundle: --out=FILE.tar.gz."""
    from reprokit.study import bundle as study_bundle

    try:
        study = _load_study(i)
        out = str(i.get("out_file", "") or "")
        if not out and i.get("out") not in CK_OUTPUT_MODES:
            out = str(i["out"])
        if not out.endswith((".tar.gz", ".tgz")):
            raise UserError(f"name the bundle file: ck export study:{study.name} --out=FILE.tar.gz")
        done = study_bundle.export(_store(i, study), Path(out))
    except UserError as exc:
        return _error(i, exc)
    print(f"study: exported {done['records']} run(s) ({done['files']} files) to {done['path']}", flush=True)
    return {"return": 0, "bundle": str(done["path"])}


def import_bundle(i):
    """Add another evaluator's runs (a bundle from ck export) to the store, beside the local ones."""
    from reprokit.study import bundle as study_bundle

    try:
        given = str(i.get("in", "") or "")
        if not given:
            raise UserError(f"name the bundle: ck import study:{i.get('data_uoa') or 'NAME'} --in=FILE.tar.gz")
        if not i.get("data_uoa"):  # `ck import study --in=F`: the bundle names its study
            i = {**i, "data_uoa": study_bundle.bundle_study(Path(given))}
        study = _load_study(i)
        done = study_bundle.import_bundle(_store(i, study), Path(given))
    except UserError as exc:
        return _error(i, exc)
    if done["already"]:
        print(f"study: bundle already imported as {done['path']}; nothing changed", flush=True)
    else:
        print(f"study: imported {done['records']} run(s) into {done['path']}; "
              f"see them beside yours with: ck report study:{study.name}", flush=True)
    return {"return": 0, "imported": str(done["path"]), "already": done["already"]}
