"""The setup hooks of our packages (their custom.py)."""
from __future__ import annotations

import os
import sys

from reprokit.ck.errors import ck_command
from reprokit.paths import SRC_DIR
from reprokit.values import decimal, whole_number


def framework_setup(i: dict) -> dict:
    """Install scripts run reprokit with the framework's interpreter (FRAMEWORK_PYTHON, PYTHONPATH=REPROKIT_SRC)."""
    return {"return": 0, "install_env": {"FRAMEWORK_PYTHON": sys.executable, "REPROKIT_SRC": str(SRC_DIR)}}


@ck_command
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
