"""The authors' builds as engines: their P3 fork runs p3, their baseline build runs baseline.

Each runs the artifact's own scripts (``engines.artifact.command``), P3 compiled
into the fork: none of program/p3's scripts is shipped, so their runs report
neither the knobs MXNet's P3 reads, nor the van each role logged, nor p3-comm lines.
"""
from __future__ import annotations

import os

from reprokit.data.registered import EnvEntry
from reprokit.engines.artifact.command import image_command, sockeye_command, worker_slots
from reprokit.engines.artifact.installed import BASELINE_PACKAGE_HINT, P3_PACKAGES_HINT, ArtifactEnv
from reprokit.engines.base import (
    ARTIFACT,
    EngineKind,
    InstalledEngine,
    P3Knobs,
    Reports,
    RoleCommand,
    RunJob,
    SchedulerKnobs,
    ScriptKnobs,
    register_engine,
)
from reprokit.engines.stock import FINISH_LINE, P3_VAN_EXIT_GRACE_S, engine_files
from reprokit.vocabulary import PsVan, Variant

ARTIFACT_NAME_PREFIX = "sysml19-p3"  # every artifact engine name starts so (artifact_engine_name)
ARTIFACT_TAGS = "tool,p3"  # soft:tool.p3's env entries: both builds


def artifact_engine_name(build: str, commit: str) -> str:
    base = ARTIFACT_NAME_PREFIX if build == "p3" else f"{ARTIFACT_NAME_PREFIX}-baseline"
    return f"{base}@{commit[:12] or 'unknown'}"


class ArtifactBuild:
    """One of the authors' builds; ``kind`` is set by the registration."""
    kind: EngineKind
    side = ARTIFACT
    switches: tuple[str, ...] = ()  # their P3 is compiled into ps-lite's own van; MXNet 1.1 has none of 1.9.1's knobs
    busy_waits = False  # MXNet 1.1 lacks MXEnginePushSync
    variants: tuple[Variant, ...] = ()
    reports = Reports()
    env_tags = ARTIFACT_TAGS
    install_hint = ""

    def installed_from_env(self, entry: EnvEntry) -> InstalledEngine | None:
        env = ArtifactEnv.from_env(entry.variables)
        if env.build != self.kind.value:
            return None  # the other build's entry
        if not (env.python and os.path.exists(env.python) and env.tree and os.path.isdir(env.tree)):
            return None  # an entry whose install was removed
        return InstalledEngine(env_uid=entry.uid, build=self.kind, name=artifact_engine_name(env.build, env.commit),
                               python=env.python, rank=(env.installed_at,), tree=env.tree, cuda=env.cuda)

    def for_run(self, installed: InstalledEngine, image_model: bool, variant: Variant) -> InstalledEngine:
        return installed

    def role_env(self, variant: Variant, p3: P3Knobs, scheduler: SchedulerKnobs | None = None) -> dict[str, str]:
        return {}  # the build is the variant

    def script_knobs(self, variant: Variant, p3: P3Knobs) -> ScriptKnobs:
        """For an emulated run (train.py): ps-lite's default van, the Trainer's priorities standing (P3_PRIORITY is
        stock MXNet's knob), no engine probes (MXNet 1.1 lacks their engine call), and string keys."""
        return ScriptKnobs(ps_van=PsVan.ZMQ, p3_priority=True, comm_probes=False, string_keys=True)

    def role_command(self, installed: InstalledEngine, job: RunJob) -> RoleCommand:
        """The artifact's own training command: every role runs it, each worker with its own arguments."""
        if job.emulated:
            return emulated_command(installed, job)
        slots = worker_slots(job.worker_hosts)
        if job.model == "sockeye":
            return sockeye_command(installed, job, slots)
        return image_command(installed, job, slots)


def emulated_command(installed: InstalledEngine, job: RunJob) -> RoleCommand:
    """Emulated compute on one of the authors' builds: program/p3's train.py in the build's own interpreter.

    Their scripts cannot emulate; train.py's waits need only MXNet 1.1's Python custom operators, and its Gluon
    Trainer pushes and pulls at priority -index, through the build's own kvstore and ps-lite (P3 compiled in, or
    not). Their roles may hang at exit, as with their own scripts: the run ends them once every worker is done.
    """
    return RoleCommand([installed.python, job.script, *job.script_args, *job.data.args],
                       [str(f) for f in engine_files()], finish_pattern=FINISH_LINE,
                       finish_grace_s=P3_VAN_EXIT_GRACE_S,
                       finish_note="the authors' builds may hang at exit after training; nothing was lost")


@register_engine("p3")
class P3Fork(ArtifactBuild):
    variants: tuple[Variant, ...] = (Variant.P3,)
    install_hint = P3_PACKAGES_HINT


@register_engine("baseline")
class BaselineBuild(ArtifactBuild):
    variants: tuple[Variant, ...] = (Variant.BASELINE,)
    install_hint = BASELINE_PACKAGE_HINT
