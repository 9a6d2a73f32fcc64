"""The options of `ck reproduce / export / import study:NAME` as plain values: which sweep to run, with what.

CK hands a command's options over as one mapping of strings (``--models=a,b``
is ``{"models": "a,b"}``, ``--quick`` is ``{"quick": "yes"}``, ``--env.K=V`` is
``{"env.K": "V"}``); ck.access callers may give real values (an int, an
``env`` dict). Nothing here talks to CK: the machine, the program's models and
the study come in as values.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from reprokit.core.errors import UserError
from reprokit.core.values import plain_setting, shown
from reprokit.emulation.profile import EMULATED, check_dilation, check_name, named_profiles
from reprokit.engines.base import ARTIFACT, EMBEDDED
from reprokit.engines.choice import ARTIFACT_BUILDS, ENGINE_KINDS, artifact_install_hint
from reprokit.run import settings as run_settings
from reprokit.study.paper.claims import DEFAULT_SUBJECT, MIN_RUNS, Matrix, Study, Subject
from reprokit.study.paper.planning import engine_variants
from reprokit.study.paper.rates import NATIVE, rate_bps
from reprokit.study.paper.target import Target, sweep_bandwidths

if TYPE_CHECKING:
    from reprokit.run.settings import RunSettings

# The ck layer's check of the engine a run would get (its variant's needs), by the ENGINE knob's value.
EngineCheck = Callable[["RunSettings", str], None]

SWEEP_OPTIONS = ("target", "models", "bandwidths", "variants", "engines", "repetitions", "quick", "profile",
                 "link_capacity", "emulate", "dilation")
RESERVED_ENV = {"VARIANT": "--variants", "PROFILE": "--profile", "ENGINE": "--engines",  # the study sets them per run
                "COMPUTE": "--emulate", "COMPUTE_PROFILE": "--emulate", "DILATION": "--dilation"}
# --emulate's default k: a V100's ResNet-50 iteration at batch 32 (83 ms over 214 waits, 0.4 ms each) times 20 is 8 ms
# a wait, well above the 0.6-2 ms MXNet takes to call one here; the claims' links divided by 20 (200mbit to 1.5gbit)
# stay within what a 2-core testbed's ps-lite can carry.
EMULATION_DILATION = 20.0
ENGINE_LABELS = {EMBEDDED: "embedded (stock MXNet 1.9.1: its own P3 and its two baselines)",
                 ARTIFACT: "artifact (the authors' baseline and P3 builds)"}
CK_OUTPUT_MODES = ("", "con", "json", "json_file")  # ck's own --out: not a bundle's name
RUNS_WRITE_SETTINGS = "every run hands it to ck run, whose run script holds it unquoted"


def select(requested: str | None, available: Iterable[str], what: str) -> list[str] | None:
    """A comma-separated option as a list (None when not given); unknown names are refused."""
    if requested is None or requested == "":
        return None
    names = [n.strip() for n in str(requested).split(",") if n.strip()]
    allowed = list(available)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise UserError(f"unknown {what} {shown(', '.join(map(repr, unknown)), quoted=False)}; the study has: "
                        f"{', '.join(allowed)}")
    return names


@dataclass(frozen=True)
class SweepRequest:
    """What a new sweep runs, from the options and the study's matrix."""
    models: list[str]
    variants: list[str]
    bandwidths: list[str]
    repetitions: int
    profile: str
    env: dict[str, str]  # run settings of every run (matrix env, then the user's --env.*)
    quick: bool
    ratios: tuple[float, ...] = ()  # non-empty: bandwidths still to choose from a probe (choice.py); bandwidths is empty
    timeline_repetition: int | None = None
    engines: tuple[str, ...] = (EMBEDDED,)
    why: str = ""  # the matrix's reason for its size (the sweep records it)
    only: tuple[tuple[str, str, str], ...] = ()  # Sweep.only: the (model, bandwidth, variant) run, if not all


@dataclass(frozen=True)
class Resume:
    """--resume[=SWEEP]: continue a stored sweep with its own settings."""
    sweep_id: str | None  # None: the newest sweep of the store


def flag(options: Mapping[str, Any], key: str) -> bool:
    return str(options.get(key, "")).lower() in ("yes", "true", "1", "on")


def env_overrides(options: Mapping[str, Any]) -> dict[str, str]:
    """Run settings given as --env.K=V (the CLI hands them over as 'env.K' keys, ck.access callers as an 'env' dict)."""
    env = options.get("env") or {}
    if not isinstance(env, dict):
        raise UserError("give run settings as --env.NAME=VALUE")
    merged = {str(k): str(v) for k, v in env.items()}
    merged.update({k[len("env."):]: str(v) for k, v in options.items() if k.startswith("env.") and len(k) > 4})
    return merged


def given(options: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep options the user gave, as the sweep records them: values as given, --env.K as 'env.K'."""
    chosen = {k: options[k] for k in SWEEP_OPTIONS if options.get(k) not in (None, "", {})}
    chosen.update({f"env.{k}": v for k, v in env_overrides(options).items()})
    return chosen


def resume_of(options: Mapping[str, Any]) -> Resume | None:
    """The sweep --resume asks for, or None for a new sweep; other sweep options beside it are refused."""
    raw = options.get("resume")
    if raw in (None, "", "no", False):
        return None
    extra = list(given(options))
    if extra:
        raise UserError(f"--resume continues a sweep with its own settings; drop --{', --'.join(extra)}")
    return Resume(None if raw in ("yes", True) else str(raw))


def check_env(env: Mapping[str, str]) -> None:
    for name, value in env.items():  # first: whatever else is wrong with it, shell syntax is the worst
        plain_setting(str(name), value, RUNS_WRITE_SETTINGS)
    for key, option in RESERVED_ENV.items():
        if key in env:
            raise UserError(f"--env.{key} is set by the study per run; choose them with {option} instead")


def sweep_engines(options: Mapping[str, Any], variants: list[str], artifact_builds: Collection[str],
                  console: TextIO = sys.stdout, subject: Subject = DEFAULT_SUBJECT) -> tuple[str, ...]:
    """--engines=embedded,artifact, checked against the authors' builds registered; said up front.

    Default: embedded, plus artifact when both of the authors' builds (baseline and P3) are registered.
    The authors' builds run only their own variants (p3, baseline); other variants run embedded only.
    A study whose subject has no authors' build (its entry's 'subject' names none) runs embedded only: the
    artifact engine's builds are another paper's.
    """
    requested = select(options.get("engines"), ENGINE_KINDS, "engine(s)")
    if not subject.authors_build:
        if requested is not None and ARTIFACT in requested:
            raise UserError(f"this study has no authors' build of {subject.name} (the artifact engine runs P3's "
                            f"authors' builds): choose --engines=embedded")
        print(f"study: engines: embedded (stock MXNet 1.9.1, {subject.name} as variant {subject.variant}; no authors' "
              f"build of {subject.name})", file=console, flush=True)
        return (EMBEDDED,)
    artifact_variants = engine_variants(ARTIFACT, variants)
    note = ""
    if requested is None:
        missing = [b for b in ARTIFACT_BUILDS if b not in artifact_builds]
        engines = [EMBEDDED] + ([ARTIFACT] if not missing and artifact_variants else [])
        if len(engines) > 1:
            why = "both of the authors' builds are registered; --engines=embedded for stock MXNet only"
        elif missing:
            why = (f"the authors' {' and '.join(missing)} build(s) not registered; add them with: "
                   + "; ".join(f"{artifact_install_hint(b)} --quiet" for b in missing))
        else:
            why = "the chosen variants are none of the authors' builds"
        note = f" (default: {why}; choose with --engines=embedded,artifact)"
    else:
        engines = list(dict.fromkeys(requested))
    embedded_only = [v for v in variants if v not in artifact_variants]
    if ARTIFACT in engines:
        if not artifact_variants:
            raise UserError(f"the authors' builds run only {' and '.join(ARTIFACT_BUILDS)}, not {', '.join(variants)}: "
                            f"add them with --variants=baseline,p3, or drop artifact from --engines")
        missing = [v for v in artifact_variants if v not in artifact_builds]
        if missing:
            raise UserError(f"--engines=artifact needs the authors' {missing[0]} build, which is not registered: "
                            f"install it with: {artifact_install_hint(missing[0])} --quiet, or choose --engines=embedded")
        if embedded_only and EMBEDDED not in engines:
            raise UserError(f"{', '.join(embedded_only)} cannot run on the authors' builds (they have only "
                            f"{' and '.join(ARTIFACT_BUILDS)}): add embedded to --engines, or drop it from --variants")
    print(f"study: engines: {', '.join(ENGINE_LABELS[e] for e in engines)}{note}", file=console, flush=True)
    if ARTIFACT in engines and embedded_only:
        print(f"study: {', '.join(embedded_only)} run(s) on the embedded engine only: the authors' builds have "
              f"no such variant", file=console, flush=True)
    return tuple(engines)


def check_runs(study: Study, models: Iterable[str], variants: Iterable[str], env: Mapping[str, str], profile: str,
               target: Target, engines: Iterable[str] = (), engine_check: EngineCheck | None = None) -> None:
    """Every run of a sweep checked as its preprocess will check it, before the first run (or probe): a sweep
    that would fail on its input stores nothing. ``engine_check`` (the ck layer's): the engine each run would get
    on each of ``engines`` has what the run needs (ByteScheduler for its variant, Sockeye). Hosts of a cluster are
    checked when each run starts (their cores, their folders), as they are only reachable then."""
    for name, value in env.items():
        plain_setting(str(name), value, RUNS_WRITE_SETTINGS)
    for model in models:
        for variant in variants:
            run_env = {**env, **study.variants.get(variant, {}), "PROFILE": profile}
            settings = run_settings.resolve(model, run_env, profile)
            if target.kind == "embedded":
                run_settings.local_layout(settings)
                for name, path in run_settings.output_paths(settings).items():
                    if os.path.isabs(path):  # a relative one lands in each run's own (new) folder
                        run_settings.check_writable_here(name, path, run_settings.output_need_bytes(settings),
                                                         folder_ok=name == "OUTPUT_FILE")
            else:
                run_settings.absolute_outputs(settings)
            if engine_check is not None:  # last: the user's own settings are named first
                for engine in engines:
                    engine_check(settings, engine)


def any_rate(raw: object) -> list[str]:
    """--bandwidths takes any tc rate: the allowed list is the request itself, checked by rate_bps."""
    names = [n.strip() for n in str(raw or "").split(",") if n.strip()]
    for name in names:
        rate_bps(name)
    return names


def sweep_request(options: Mapping[str, Any], study: Study, target: Target, program_models: set[str],
                  console: TextIO = sys.stdout, artifact_builds: Collection[str] = (),
                  engine_check: EngineCheck | None = None) -> SweepRequest:
    """A new sweep's models, variants, bandwidths, repetitions, profile and settings, each checked.

    Models the program has no cmd_key for are skipped with a note (their claims are reported as not
    testable); the profile defaults to the matrix's, or smoke on the embedded default (full sweeps only).
    ``artifact_builds``: the authors' builds registered (p3, baseline), for --engines (sweep_engines);
    ``engine_check``: see check_runs.
    """
    quick = flag(options, "quick")
    matrix = study.quick if quick else study.matrix
    emulated = emulation(options, study, target)
    if emulated is not None:
        matrix = emulated
    models = select(options.get("models"), study.matrix.models, "model(s)") or list(matrix.models)
    for m in (m for m in models if m not in program_models):
        print(f"study: skipping {m}: program:{study.program} has no cmd_key {m!r} yet "
              f"(its claims are reported as not testable here)", file=console, flush=True)
    models = [m for m in models if m in program_models]
    if not models:
        raise UserError(f"none of the chosen models can run: program:{study.program} has "
                        f"{', '.join(sorted(program_models))}; choose with --models=")
    variants = select(options.get("variants"), study.variants, "variant(s)") or list(matrix.variants)
    engines = sweep_engines(options, variants, artifact_builds, console, study.subject)
    requested_bw = select(options.get("bandwidths"), any_rate(options.get("bandwidths")), "bandwidth(s)")
    if emulated is not None and requested_bw is None:
        requested_bw = list(matrix.bandwidths)
    ratios = matrix.ratios if target.shaping and requested_bw is None else ()
    bandwidths = [] if ratios else list(sweep_bandwidths(target, requested_bw, matrix))
    raw_reps = str(options.get("repetitions", "") or matrix.repetitions)
    if not raw_reps.isdigit() or int(raw_reps) < 1:
        raise UserError(f"--repetitions must be a whole number of at least 1, got {shown(raw_reps)}")
    if target.kind != "embedded" and int(raw_reps) < MIN_RUNS:
        print(f"study: note: n={raw_reps} < {MIN_RUNS} runs per configuration: the report will give no verdict "
              f"(--repetitions={MIN_RUNS} or more for verdicts)", file=console, flush=True)
    profile = str(options.get("profile", "") or "")
    if not profile:
        profile = matrix.profile if (quick or target.kind != "embedded") else "smoke"
    if profile not in run_settings.PROFILES:
        raise UserError(f"unknown --profile {shown(profile)}; valid ones: {', '.join(sorted(run_settings.PROFILES))}")
    user_env = env_overrides(options)
    check_env(user_env)
    check_runs(study, models, variants, {**dict(matrix.env), **user_env}, profile, target, engines, engine_check)
    if emulated is not None:
        print(f"study: emulated compute ({dict(matrix.env)['COMPUTE_PROFILE']} profile, k="
              f"{dict(matrix.env)['DILATION']}): each link shaped to its bandwidth divided by k; these runs give "
              f"emulated verdicts only, never measured ones", file=console, flush=True)
    # One repetition records timelines (unless --env.TIMELINE decides for every run).
    timeline = None if "TIMELINE" in user_env or matrix.timeline_repetition is None \
        else min(matrix.timeline_repetition, int(raw_reps))
    # An emulated sweep runs each claim's variant and baseline at the claim's bandwidth, not every combination,
    # unless the variants or bandwidths are given.
    only = claim_configurations(study) if emulated is not None and not (
        options.get("variants") or options.get("bandwidths")) else ()
    return SweepRequest(models=models, variants=variants, bandwidths=bandwidths, repetitions=int(raw_reps),
                        profile=profile, env={**dict(matrix.env), **user_env}, quick=quick, ratios=ratios,
                        timeline_repetition=timeline, engines=engines, why=matrix.why, only=only)


def claim_configurations(study: Study) -> tuple[tuple[str, str, str], ...]:
    """(model, bandwidth, variant) of every claim stated at a bandwidth and of its baseline."""
    return tuple(dict.fromkeys((c.model, str(c.bandwidth), v) for c in study.claims if c.bandwidth
                               for v in (c.versus, c.variant)))


def emulation(options: Mapping[str, Any], study: Study, target: Target) -> Matrix | None:
    """--emulate=PROFILE [--dilation=K]: the matrix of the claims stated at a bandwidth (their models, variants and
    bandwidths) with emulated compute, or, for a study whose claims are all "up to", its matrix's models and variants
    at the --bandwidths given; None without --emulate."""
    raw, raw_k = str(options.get("emulate", "") or "").strip(), str(options.get("dilation", "") or "").strip()
    if not raw:
        if raw_k:
            raise UserError("--dilation applies to emulated runs only; add --emulate=GPU (e.g. p4000) or drop "
                            "--dilation")
        return None
    if raw.lower() in ("yes", "true", "1", "on"):
        raw = study.gpu  # the paper's GPU ("": gpus.json's default)
    profile = check_name(raw, "--emulate")
    if profile not in named_profiles():
        profile = os.path.abspath(profile)  # the sweep's runs read it from any folder
    k = check_dilation(raw_k, "--dilation") if raw_k else EMULATION_DILATION
    if not target.shaping:
        raise UserError("--emulate runs at the claims' bandwidths divided by the dilation, so the sweep must shape "
                        "the links: make a testbed as root (ck testbed cluster:NAME --hosts=4) and give "
                        "--target=NAME")
    # The paper's profile trains a whole epoch; an emulated run needs only enough batches for a steady throughput.
    env = {**dict(study.matrix.env), "NUM_BATCHES": "20", "DISP_BATCHES": "5", "COMPUTE": EMULATED,
           "COMPUTE_PROFILE": profile, "DILATION": f"{k:g}"}
    claims = [c for c in study.claims if c.bandwidth]
    if not claims:  # only "up to" claims: judged over the bandwidths the user names, as a measured sweep's
        if not str(options.get("bandwidths", "") or "").strip():
            raise UserError(f"study:{study.name} states no claim at a bandwidth; its claims are judged over the "
                            f"bandwidths an emulated sweep runs: give them with --bandwidths=B1,B2,...")
        return replace(study.matrix, env=tuple(env.items()), ratios=(),
                       why="emulated: the study's models and variants at the bandwidths given")
    variants = list(dict.fromkeys(v for c in claims for v in (c.versus, c.variant)))
    return replace(study.matrix, models=tuple(dict.fromkeys(c.model for c in claims)), variants=tuple(variants),
                   bandwidths=tuple(dict.fromkeys(str(c.bandwidth) for c in claims)), env=tuple(env.items()),
                   ratios=(), why=f"emulated: the {len(claims)} claim(s) stated at a bandwidth")


def timeline_config(options: Mapping[str, Any]) -> tuple[str, str] | None:
    """`ck report --timeline_config=MODEL,BANDWIDTH`: the configuration whose timelines the report plots."""
    raw = str(options.get("timeline_config", "") or "").strip()
    if not raw:
        return None
    parts = [p.strip() for p in raw.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UserError(f"--timeline_config={shown(raw)} is not MODEL,BANDWIDTH; give e.g. "
                        f"--timeline_config=vgg,720mbit")
    if parts[1] != NATIVE:
        rate_bps(parts[1])
    return parts[0], parts[1]


def report_dir(options: Mapping[str, Any], store_root: Path) -> Path:
    """Where the report goes: --out_dir, or the store's report/ folder."""
    return Path(str(options.get("out_dir", "") or store_root / "report")).expanduser().resolve()


def bundle_out(options: Mapping[str, Any], study: str) -> Path:
    """`ck export`'s bundle file: --out=FILE.tar.gz (ck's own --out modes are not names) or --out_file."""
    out = str(options.get("out_file", "") or "")
    if not out and options.get("out") not in (None, *CK_OUTPUT_MODES):
        out = str(options["out"])
    if not out.endswith((".tar.gz", ".tgz")):
        raise UserError(f"name the bundle file: ck export study:{study} --out=FILE.tar.gz")
    return Path(out)


def bundle_in(options: Mapping[str, Any], study: str | None) -> Path:
    """`ck import`'s bundle file: --in=FILE.tar.gz."""
    given_in = str(options.get("in", "") or "")
    if not given_in:
        raise UserError(f"name the bundle: ck import study:{study or 'NAME'} --in=FILE.tar.gz")
    return Path(given_in)
