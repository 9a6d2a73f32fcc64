"""Stock MXNet 1.9.1 from PyPI as an engine: program/p3's scripts (train.py, sockeye_run.py) in every role.

Its P3 is MXNet's own (switched on by DMLC_PS_VAN_TYPE=p3 in every role), and ByteScheduler is installed for it
(package bytescheduler-github), so it runs every variant; its scripts report the van each role ran and each
worker's p3-comm line.
"""
from __future__ import annotations

import os
from pathlib import Path

from reprokit.core.paths import PROGRAM_DIR
from reprokit.core.shipping import wire_files
from reprokit.data.registered import EnvEntry
from reprokit.engines.base import (
    EMBEDDED,
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
from reprokit.engines.bytescheduler import ByteSchedulerVariant
from reprokit.engines.mxnet import sockeye_in_engine
from reprokit.vocabulary import PS_VAN_VARIABLE, PsVan, Variant

# Beside the training scripts but not part of a run: CK's hooks run in CK's process; layer_profile.py is run once,
# by hand, to extract the study's layer profiles (see study/layer_profiles.json).
NOT_SHIPPED = ("ck_hooks.py", "layer_profile.py")
FINISH_LINE = r"Parameter checksum: rank="  # the last line of train.py and sockeye_run.py, after every output
P3_VAN_EXIT_GRACE_S = 5.0  # a role that can exit does so within milliseconds, or seconds on a loaded host
PYTHON_ENV = "CK_ENV_LIB_MXNET_PYTHON"  # soft:lib.mxnet's interpreter of the engine's prefix
# MXNet 1.9.1's knobs beside the van: P3's water mark, its slice bound, and where the optimizer runs.
WATER_MARK, SLICE_THRESHOLD, UPDATE_ON_KVSTORE = ("DMLC_PS_WATER_MARK", "MXNET_KVSTORE_SLICE_THRESHOLD",
                                                  "MXNET_UPDATE_ON_KVSTORE")
# SLICE_THRESHOLD for P3_SLICE_SIZE=0 (no slicing): P3StoreDist reads it as an int and loops forever on 0, so
# "no slicing" is a bound no array reaches.
NO_SLICING_THRESHOLD = P3Knobs.MAX_SLICE_SIZE + 1


def engine_files() -> list[Path]:
    """Shipped into every role's working folder: the training scripts, everything beside them they import, and the
    package reprokit.wire they import too (in its folders there: core.shipping)."""
    return [*sorted(p for p in PROGRAM_DIR.glob("*.py") if p.name not in NOT_SHIPPED), *wire_files()]


@register_engine("stock")
class StockMXNet:
    kind: EngineKind  # set by @register_engine
    side = EMBEDDED
    switches: tuple[str, ...] = (PS_VAN_VARIABLE, WATER_MARK, SLICE_THRESHOLD, UPDATE_ON_KVSTORE,
                                 *ByteSchedulerVariant.SWITCHES)
    busy_waits = True
    variants: tuple[Variant, ...] = (Variant.BASELINE, Variant.BASELINE_WORKER_UPDATE, Variant.P3,
                                     Variant.BYTESCHEDULER)
    reports = Reports(p3_knobs=True, ps_van=True, comm_probes=True)
    env_tags = "lib,mxnet"
    install_hint = "ck install package:lib-mxnet --quiet"

    def installed_from_env(self, entry: EnvEntry) -> InstalledEngine | None:
        python = entry.variables.get(PYTHON_ENV, "")
        if not (python and os.path.exists(python)):
            return None  # an entry whose install was removed
        version = entry.customize.get("version", "")
        return InstalledEngine(env_uid=entry.uid, build=self.kind, name=f"mxnet-{version}-cpu", python=python,
                               rank=tuple(int(x) for x in version.split(".") if x.isdigit()))

    def for_run(self, installed: InstalledEngine, image_model: bool, variant: Variant) -> InstalledEngine:
        """Sockeye runs name the Sockeye the engine's interpreter imports too; ByteScheduler runs the ByteScheduler,
        checked patched (or a one-line refusal naming the package)."""
        if variant is Variant.BYTESCHEDULER:
            found = ByteSchedulerVariant.in_engine(installed.python)
            return installed.named(ByteSchedulerVariant.engine_name(installed.name, found))
        if image_model:
            return installed
        return installed.named(f"{installed.name}+sockeye-{sockeye_in_engine(installed.python)}")

    def role_env(self, variant: Variant, p3: P3Knobs, scheduler: SchedulerKnobs | None = None) -> dict[str, str]:
        """P3 is switched on in every role (its van, water mark and slice bound); baseline-worker-update moves the
        optimizer to the workers; bytescheduler gives its workers ByteScheduler's knobs."""
        if variant is Variant.BASELINE_WORKER_UPDATE:
            return {UPDATE_ON_KVSTORE: "0"}
        if variant is Variant.P3:
            return {PS_VAN_VARIABLE: PsVan.P3.value, WATER_MARK: str(p3.water_mark),
                    SLICE_THRESHOLD: str(p3.slice_size or NO_SLICING_THRESHOLD)}
        if variant is Variant.BYTESCHEDULER and scheduler is not None:
            return ByteSchedulerVariant.role_env(scheduler.partition, scheduler.credit)
        return {}

    def script_knobs(self, variant: Variant, p3: P3Knobs) -> ScriptKnobs:
        van = PsVan(self.role_env(variant, p3).get(PS_VAN_VARIABLE, PsVan.ZMQ.value))
        return ScriptKnobs(ps_van=van, p3_priority=p3.priority, comm_probes=True, string_keys=False)

    def role_command(self, installed: InstalledEngine, job: RunJob) -> RoleCommand:
        command = [installed.python, job.script, *job.script_args, *job.data.args]
        files = [str(f) for f in engine_files()]
        env = self.role_env(job.variant, job.p3, job.scheduler)
        if job.variant != Variant.P3:
            return RoleCommand(command, files, env)
        # MXNet 1.9.1's P3 van never joins its sender thread, so workers and servers stay alive after training
        # (the wheel cannot be patched): once every worker printed its last line, the run ends them.
        return RoleCommand(command, files, env, finish_pattern=FINISH_LINE,
                           finish_grace_s=P3_VAN_EXIT_GRACE_S,
                           finish_note="MXNet 1.9.1's P3 van may keep its roles alive after training; nothing was lost")

