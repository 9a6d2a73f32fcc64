"""Which registered engine a run uses: the embedded stock MXNet, or the authors' P3 / baseline build."""
from __future__ import annotations

from collections.abc import Sequence

from reprokit.core.errors import UserError
from reprokit.core.values import shown
from reprokit.engines.artifact.engine import ARTIFACT_NAME_PREFIX
from reprokit.engines.artifact.installed import BASELINE_PACKAGE_HINT, P3_PACKAGES_HINT
from reprokit.engines.base import ARTIFACT, EMBEDDED, InstalledEngine, builds, engines, get_engine

ENGINE_KINDS = (EMBEDDED, ARTIFACT)
ENGINE_CHOICES = ("", *ENGINE_KINDS)  # "": the artifact when one is registered, else embedded


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "ARTIFACT_BUILDS":  # p3: the authors' fork; baseline: their unmodified MXNet build
        return builds(ARTIFACT)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def artifact_install_hint(build: str) -> str:
    """The command that registers the artifact's ``build`` (p3 or baseline)."""
    return P3_PACKAGES_HINT if build == "p3" else BASELINE_PACKAGE_HINT


def engine_kind(engine_name: str) -> str:
    """The kind of engine a result's ``engine`` name was recorded by: artifact or embedded."""
    return ARTIFACT if str(engine_name or "").startswith(ARTIFACT_NAME_PREFIX) else EMBEDDED


def stock_mxnet_version(engine_name: str) -> str | None:
    """The MXNet version a result's ``engine`` name records for the stock engine (mxnet-1.9.1-cpu...); None for
    another engine (the artifact's builds record their commit instead)."""
    kind, _, version = str(engine_name or "").partition("-")
    return version.split("-")[0] or None if kind == "mxnet" else None


def select_engine(candidates: Sequence[InstalledEngine], variant: str, engine: str = "",
                  pinned: str = "") -> InstalledEngine:
    """The engine for ``variant``: the embedded stock MXNet, or the artifact's P3 / baseline build.

    ``engine`` is the ENGINE knob: "" uses the artifact when any of its builds
    is registered (the P3 build for p3, the baseline build for baseline) and
    the embedded engine otherwise; "embedded" and "artifact" force one side.
    ``pinned`` (ENGINE_ENV) names one env entry and wins over both.
    """
    if engine not in ENGINE_CHOICES:
        raise UserError(f"unknown ENGINE {shown(engine)}; valid ones: embedded, artifact (or empty: the artifact when "
                        f"installed); fix it with --env.ENGINE=embedded")
    # A variant none of the authors' builds runs (bytescheduler) is the embedded engine's, whatever is installed.
    embedded_only = not any(variant in e.variants for e in engines() if e.side == ARTIFACT)
    if embedded_only and (engine == ARTIFACT or (pinned and any(pinned == c.env_uid and c.engine.side == ARTIFACT
                                                                for c in candidates))):
        given = f"ENGINE_ENV={pinned} (an artifact build)" if pinned else "ENGINE=artifact"
        raise UserError(f"VARIANT={variant} runs on the embedded engine only (stock MXNet 1.9.1), not with {given}; "
                        f"use --env.ENGINE=embedded")
    if pinned:
        found = [c for c in candidates if pinned == c.env_uid]
        if not found:
            tags = dict.fromkeys(e.env_tags for e in engines())
            raise UserError(f"ENGINE_ENV={pinned} is not a registered engine; list them with: "
                            + " and ".join(f"ck show env --tags={t}" for t in tags))
        chosen = found[0]
        if variant not in chosen.engine.variants:
            raise UserError(f"ENGINE_ENV={pinned} is the artifact's {chosen.build} build and cannot run VARIANT={variant} "
                            f"(P3 is compiled into the fork); pin the {variant} build or use --env.VARIANT={chosen.build}")
        return chosen
    stock = [c for c in candidates if c.engine.side == EMBEDDED]
    artifacts = [c for c in candidates if c.engine.side == ARTIFACT]
    if engine == "embedded" or (engine == "" and (not artifacts or embedded_only)):
        if not stock:
            raise UserError("the MXNet engine is not installed (no usable CK env with tags lib,mxnet); "
                            f"install it with: {get_engine('stock').install_hint}")
        return max(stock, key=lambda c: c.rank)
    wanted = [c for c in artifacts if variant in c.engine.variants]
    if not wanted:
        hint = artifact_install_hint(variant)
        have = ", ".join(sorted({c.build.value for c in artifacts})) or "no build"
        raise UserError(f"VARIANT={variant} needs the artifact's {variant} build, but only {have} of the artifact is "
                        f"installed; install it with: {hint} --quiet, or run the embedded engine with --env.ENGINE=embedded")
    return max(wanted, key=lambda c: c.rank)
