"""The CK side of `ck reproduce / report / predict / export / import study:NAME` (module/study).

What the study needs from CK is asked here: the study entry, the results
store's default place (CK's local repository), the models of the study's
program and a machine's cluster description. The rest is reprokit.study on
plain values: options (what the user asked for), sweep, report and bundle.
"""
from __future__ import annotations

import os

from reprokit.ck.errors import CkDict, access, ck_command
from reprokit.ck.registry import artifact_builds, engine_check, machine_cluster_data
from reprokit.core.errors import UserError
from reprokit.core.outputs import output_file, output_folder
from reprokit.core.values import shown
from reprokit.study.paper import claims
from reprokit.study.store import bundle
from reprokit.study.store.records import Store, store_dir
from reprokit.study.sweep import driver as sweep, options
from reprokit.study.whatif import predict as model


def load_study(name: str) -> claims.Study:
    if not name:
        raise UserError("name the study: ck ACTION study:NAME (ck list study)")
    r = access({"action": "load", "module_uoa": "study", "data_uoa": name})
    if r["return"] > 0:
        raise UserError(f"there is no study {shown(name)}; list them with: ck list study")
    return claims.from_meta(r["data_alias"] or name, r["dict"])


def study_store(given: str, study: claims.Study) -> Store:
    """--store=DIR, or <CK local repo>/study-results/<study>."""
    local = ""
    if not given:
        r = access({"action": "where", "module_uoa": "repo", "data_uoa": "local"})
        if r["return"] > 0:
            raise UserError(f"cannot find CK's local repository for the results store: {r['error']}; give --store=DIR")
        local = r["path"]
    return Store(store_dir(given, local, study.name), study.name)


def _program_meta(study: claims.Study) -> CkDict:
    r = access({"action": "load", "module_uoa": "program", "data_uoa": study.program})
    if r["return"] > 0:
        raise UserError(f"program:{study.program} is not registered with CK (python -m reprokit.bootstrap)")
    meta: CkDict = r["dict"]
    return meta


def program_models(study: claims.Study) -> set[str]:
    """The models the study's program can run: its cmd_keys."""
    return set(_program_meta(study).get("run_cmds", {}))


def check_setting_names(i: CkDict, study: claims.Study) -> None:
    """Every --env.NAME of a sweep known to the program (its run_vars, or a pass-through prefix), before the first
    run: a typo would otherwise fail every run of the sweep and leave its failed records in the store."""
    from reprokit.ck.program import unknown_setting  # noqa: PLC0415  paramiko (~140 ms): reproduce only

    why = unknown_setting(options.env_overrides(i), _program_meta(study).get("run_vars", {}), "--env.")
    if why:
        raise UserError(why)


def _study_and_store(i: CkDict) -> tuple[claims.Study, Store]:
    study = load_study(str(i.get("data_uoa", "") or ""))
    return study, study_store(str(i.get("store", "") or ""), study)


@ck_command
def reproduce(i: CkDict) -> CkDict:
    """Run the study's matrix on a target through `ck run program:P`, storing one record per run; then report."""
    study, store = _study_and_store(i)
    check_setting_names(i, study)
    if i.get("store"):  # where every record goes: checked before the first run
        output_folder(store.root, "--store")
    if i.get("submit"):
        from reprokit.study.sweep.submit import submit_sweep  # noqa: PLC0415  paramiko: --submit only

        job_id = submit_sweep(i, study, store, program_models(study), machine_cluster_data,
                              artifact_builds=artifact_builds(), engine_check=engine_check())
        return {"return": 0, "slurm_job": job_id}
    summary = sweep.reproduce(i, study, store, program_models(study), machine_cluster_data,
                              artifact_builds=artifact_builds(), engine_check=engine_check())
    from reprokit.study.report.render import write_report  # noqa: PLC0415  pandas, scipy, matplotlib: not for a refusal

    paths = write_report(study, store, program_models(study), options.report_dir(i, store.root),
                         timeline_config=options.timeline_config(i))
    sweep.failed_runs(summary, paths["html"])
    return {"return": 0, "sweep_id": summary.sweep_id, "report": str(paths["html"])}


@ck_command
def report(i: CkDict) -> CkDict:
    """Write the Markdown, HTML and JSON reports (plots, timelines, verdicts, badges) from every stored and imported run."""
    from reprokit.study.report.render import write_report  # noqa: PLC0415  pandas, scipy (~1.3 s): report only

    study, store = _study_and_store(i)
    if i.get("store") and not os.path.isdir(store.root):  # a mistyped --store would otherwise get an empty report
        raise UserError(f"there is no study store at {shown(store.root)}; give the --store that ck reproduce or ck import "
                        f"study wrote, or leave it out for the default store")
    out_dir = output_folder(options.report_dir(i, store.root), "--out_dir")  # before the analysis
    docs = str(i.get("docs", "") or "")
    if docs:  # --docs=NAME: the repository's results page NAME, from this store's records
        from reprokit.study.report import results_pages  # noqa: PLC0415  pandas, scipy, jinja2 (~1.2 s): --docs only

        name = results_pages.check_name(docs)
        summary = results_pages.summarise(study, store.all_records(), program_models(study), name,
                                          str(i.get("title", "") or name))
        pages = results_pages.write_summary(summary)
        print(f"study: results page {results_pages.RESULTS_DIR / (name + '.md')} and its summary written from "
              f"{len(summary['runs'])} record(s); {len(pages)} page(s) regenerated", flush=True)
    paths = write_report(study, store, program_models(study), out_dir, timeline_config=options.timeline_config(i))
    return {"return": 0, "html": str(paths["html"]), "markdown": str(paths["markdown"]), "json": str(paths["json"])}


@ck_command
def predict(i: CkDict) -> CkDict:
    """Predict baseline and p3 iteration times from the iteration model: a table (printed) and a plot."""
    study, store = _study_and_store(i)
    out_dir = options.report_dir(i, store.root) if i.get("out_dir") else store.root / "predict"
    paths = model.run(i, study, out_dir)
    return {"return": 0, "plot": str(paths["plot"]), "table": str(paths["table"])}


@ck_command
def export(i: CkDict) -> CkDict:
    """Write every local run (records and run folders) into a bundle: --out=FILE.tar.gz."""
    study = load_study(str(i.get("data_uoa", "") or ""))
    out = output_file(options.bundle_out(i, study.name), "--out")
    done = bundle.export(study_store(str(i.get("store", "") or ""), study), out)
    skipped = done["left_out"]
    print(f"study: exported {done['records']} run(s) ({done['files']} files) to {done['path']}"
          + (f"; left out {skipped['timelines']} timeline(s), {skipped['bytes'] / 1e6:.0f} MB (bundles carry no timelines)"
             if skipped["timelines"] else ""), flush=True)
    return {"return": 0, "bundle": str(done["path"])}


@ck_command
def import_bundle(i: CkDict) -> CkDict:
    """Add another evaluator's runs (a bundle from ck export) to the store, beside the local ones."""
    given = options.bundle_in(i, i.get("data_uoa"))
    # `ck import study --in=F`: the bundle names its study
    study = load_study(str(i.get("data_uoa", "") or "") or bundle.bundle_study(given))
    store = study_store(str(i.get("store", "") or ""), study)
    if i.get("store"):
        output_folder(store.root, "--store")
    done = bundle.import_bundle(store, given)
    if done["already"]:
        print(f"study: every run of this bundle was imported before ({done['path']}); nothing changed", flush=True)
    else:
        again = f" ({done['skipped']} imported before, left out)" if done["skipped"] else ""
        print(f"study: imported {done['records']} run(s){again} into {done['path']}; "
              f"see them beside yours with: ck report study:{study.name}", flush=True)
    return {"return": 0, "imported": str(done["path"]), "already": done["already"]}
