"""Stock MXNet 1.9.1 from PyPI as an engine: program/p3's scripts (train.py, sockeye_run.py) in every role.

Its P3 is MXNet's own (switched on by DMLC_PS_VAN_TYPE=p3 in every role), and ByteScheduler is installed for it
(package bytescheduler-github), so it runs every variant; its scripts report the van each role ran and each
worker's p3-comm line.
"""
from __future__ import annotations

import os
from pathlib import Path

from reprokit.data.registered import EnvEntry
from reprokit.engines.base import EMBEDDED, EngineKind, InstalledEngine, Reports, RoleCommand, RunJob
from reprokit.engines.bytescheduler import ByteSchedulerVariant
from reprokit.engines.mxnet import sockeye_in_engine
from reprokit.engines.registry import register_engine
from reprokit.core.paths import PROGRAM_DIR
from reprokit.vocabulary import Variant

# Beside the training scripts but not part of a run: CK's hooks run in CK's process; layer_profile.py is run once,
# by hand, to extract the study's layer profiles (see study/layer_profiles.json).
NOT_SHIPPED = ("ck_hooks.py", "layer_profile.py")
FINISH_LINE = r"Parameter checksum: rank="  # the last line of train.py and sockeye_run.py, after every output
P3_VAN_EXIT_GRACE_S = 5.0  # a role that can exit does so within milliseconds, or seconds on a loaded host
PYTHON_ENV = "CK_ENV_LIB_MXNET_PYTHON"  # soft:lib.mxnet's interpreter of the engine's prefix


def engine_files() -> list[Path]:
    """Shipped into every role's working folder: the training scripts and everything beside them they import."""
    return sorted(p for p in PROGRAM_DIR.glob("*.py") if p.name not in NOT_SHIPPED)


@register_engine("stock")
class StockMXNet:
    kind: EngineKind  # set by @register_engine
    side = EMBEDDED
    stock_knobs = True
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

    def role_command(self, installed: InstalledEngine, job: RunJob) -> RoleCommand:
        command = [installed.python, job.script, *job.script_args, *job.data.args]
        files = [str(f) for f in engine_files()]
        if job.variant != Variant.P3:
            return RoleCommand(command, files, dict(job.role_env))
        # MXNet 1.9.1's P3 van never joins its sender thread, so workers and servers stay alive after training
        # (the wheel cannot be patched): once every worker printed its last line, the run ends them.
        return RoleCommand(command, files, dict(job.role_env), finish_pattern=FINISH_LINE,
                           finish_grace_s=P3_VAN_EXIT_GRACE_S,
                           finish_note="MXNet 1.9.1's P3 van may keep its roles alive after training; nothing was lost")

