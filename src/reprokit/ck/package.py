"""The setup hooks of our packages (their custom.py)."""
from __future__ import annotations

import functools
import os
import sys
from typing import Callable

from reprokit.ck.errors import ck_command
from reprokit.paths import SRC_DIR
from reprokit.values import decimal, plain_setting, whole_number

INSTALL_SCRIPT_WRITES = "stock CK writes every install variable into the install script (quoted only around spaces)"


def install_hook(setup: Callable[[dict], dict]) -> Callable[[dict], dict]:
    """A package's setup hook, refusing shell syntax in what CK writes into the install script next.

    CK calls setup after merging the package's variables, --env.* and its own into ``new_env`` and before
    rendering them as ``export NAME=VALUE`` lines (double quotes only around values holding a space); the
    hook's own ``install_env`` joins them. So this is the last moment before the script exists.
    """
    @ck_command
    @functools.wraps(setup)
    def hook(i: dict) -> dict:
        out = setup(i)
        if out.get("return", 0) == 0:
            written = {**i.get("new_env", {}), **out.get("install_env", {})}
            if i.get("install_path"):
                written["INSTALL_DIR"] = i["install_path"]
            for name, value in written.items():
                plain_setting(str(name), value, INSTALL_SCRIPT_WRITES, spaces_quoted=True)
        return out
    return hook


@install_hook
def framework_setup(i: dict) -> dict:
    """Install scripts run reprokit with the framework's interpreter (FRAMEWORK_PYTHON, PYTHONPATH=REPROKIT_SRC)."""
    return {"return": 0, "install_env": {"FRAMEWORK_PYTHON": sys.executable, "REPROKIT_SRC": str(SRC_DIR)}}


@install_hook
def recordio_setup(i: dict) -> dict:
    """Choose the train folder to convert and the engine that converts it; check the conversion settings."""
    from reprokit.ck.registry import env_entries, find_engine
    from reprokit.data.imagenet import TRAIN_TAGS, choose_train_folder

    given = i.get("new_env", {})
    folder = choose_train_folder(env_entries(TRAIN_TAGS), str(given.get("IMAGENET_TRAIN_ENV", "")).strip())
    python = find_engine("p3", "embedded").python  # stock MXNet: its im2rec and OpenCV
    decimal(given.get("TRAIN_RATIO", ""), "TRAIN_RATIO", "--env.TRAIN_RATIO=VALUE", 0.01, 1.0)
    whole_number(given.get("RESIZE", ""), "RESIZE", "--env.RESIZE=N", 0, 100_000)
    whole_number(given.get("QUALITY", ""), "QUALITY", "--env.QUALITY=N", 1, 100)
    threads = str(given.get("NUM_THREADS", "")).strip() or str(os.cpu_count() or 1)
    whole_number(threads, "NUM_THREADS", "--env.NUM_THREADS=N", 1, 1024)
    print(f"dataset: converting the {folder.kind} train folder {folder.root} ({folder.classes} classes) "
          f"with {threads} process(es)", flush=True)
    return {"return": 0,
            "install_env": {"ENGINE_PYTHON": python, "REPROKIT_SRC": str(SRC_DIR), "SOURCE_DIR": str(folder.root),
                            "SOURCE_KIND": folder.kind, "NUM_THREADS": threads},
            # The env says which kind it holds (e.g. imagenet-synthetic), so nobody mistakes one for another.
            "soft_cfg": {"tags": ",".join([*i.get("tags", []), folder.kind])}}
