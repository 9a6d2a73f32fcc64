"""Which registered engine a run uses: the embedded stock MXNet, or the authors' P3 / baseline build."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from reprokit.errors import UserError
from reprokit.values import shown

ARTIFACT_BUILDS = ("p3", "baseline")  # p3: the authors' fork; baseline: their unmodified MXNet build
EMBEDDED, ARTIFACT = "embedded", "artifact"  # the engine kinds: stock MXNet with our scripts, the authors' builds
ENGINE_KINDS = (EMBEDDED, ARTIFACT)
ENGINE_CHOICES = ("", *ENGINE_KINDS)  # "": the artifact when one is registered, else embedded
ARTIFACT_NAME_PREFIX = "sysml19-p3"  # every artifact engine name starts so (artifact_engine_name)
STOCK_TAGS = "lib,mxnet"
ARTIFACT_TAGS = "tool,p3"
STOCK_INSTALL = "ck install package:lib-mxnet --quiet"
P3_PACKAGES_HINT = "ck install package:sysml19-p3-github (or package:sysml19-p3-zenodo)"
BASELINE_PACKAGE_HINT = "ck install package:sysml19-p3-baseline-github"



@dataclass(frozen=True)
class EngineChoice:
    """One registered engine a run may use."""
    env_uid: str
    build: str  # stock | p3 | baseline
    name: str  # recorded in every result: mxnet-1.9.1-cpu, sysml19-p3@c647954, sysml19-p3-baseline@...
    python: str
    rank: tuple  # higher is preferred among engines of the same build (version, install time)
    tree: str = ""  # the artifact's source tree; empty for the embedded engine
    cuda: bool = False

    @property
    def is_artifact(self) -> bool:
        return self.build in ARTIFACT_BUILDS


def artifact_engine_name(build: str, commit: str) -> str:
    base = ARTIFACT_NAME_PREFIX if build == "p3" else f"{ARTIFACT_NAME_PREFIX}-baseline"
    return f"{base}@{commit[:12] or 'unknown'}"


def artifact_install_hint(build: str) -> str:
    """The command that registers the artifact's ``build`` (p3 or baseline)."""
    return P3_PACKAGES_HINT if build == "p3" else BASELINE_PACKAGE_HINT


def engine_kind(engine_name: str) -> str:
    """The kind of engine a result's ``engine`` name was recorded by: artifact or embedded."""
    return ARTIFACT if str(engine_name or "").startswith(ARTIFACT_NAME_PREFIX) else EMBEDDED


def select_engine(candidates: Sequence[EngineChoice], variant: str, engine: str = "", pinned: str = "") -> EngineChoice:
    """The engine for ``variant``: the embedded stock MXNet, or the artifact's P3 / baseline build.

    ``engine`` is the ENGINE knob: "" uses the artifact when any of its builds
    is registered (the P3 build for p3, the baseline build for baseline) and
    the embedded engine otherwise; "embedded" and "artifact" force one side.
    ``pinned`` (ENGINE_ENV) names one env entry and wins over both.
    """
    if engine not in ENGINE_CHOICES:
        raise UserError(f"unknown ENGINE {shown(engine)}; valid ones: embedded, artifact (or empty: the artifact when "
                        f"installed); fix it with --env.ENGINE=embedded")
    if pinned:
        found = [c for c in candidates if pinned == c.env_uid]
        if not found:
            raise UserError(f"ENGINE_ENV={pinned} is not a registered engine; list them with: "
                            f"ck show env --tags=lib,mxnet and ck show env --tags={ARTIFACT_TAGS}")
        chosen = found[0]
        if chosen.is_artifact and chosen.build != variant:
            raise UserError(f"ENGINE_ENV={pinned} is the artifact's {chosen.build} build and cannot run VARIANT={variant} "
                            f"(P3 is compiled into the fork); pin the {variant} build or use --env.VARIANT={chosen.build}")
        return chosen
    stock = [c for c in candidates if c.build == "stock"]
    artifacts = [c for c in candidates if c.is_artifact]
    if engine == "embedded" or (engine == "" and not artifacts):
        if not stock:
            raise UserError("the MXNet engine is not installed (no usable CK env with tags lib,mxnet); "
                            f"install it with: {STOCK_INSTALL}")
        return max(stock, key=lambda c: c.rank)
    wanted = [c for c in artifacts if c.build == variant]
    if not wanted:
        hint = artifact_install_hint(variant)
        have = ", ".join(sorted({c.build for c in artifacts})) or "no build"
        raise UserError(f"VARIANT={variant} needs the artifact's {variant} build, but only {have} of the artifact is "
                        f"installed; install it with: {hint} --quiet, or run the embedded engine with --env.ENGINE=embedded")
    return max(wanted, key=lambda c: c.rank)
