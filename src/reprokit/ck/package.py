"""The setup hooks of our packages (their custom.py)."""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

from reprokit.ck.errors import CkDict, access, ck_command
from reprokit.ck.registry import env_entries, find_engine
from reprokit.ck.script import install_parameters, refuse_shell_syntax_in_labels
from reprokit.core.errors import UserError
from reprokit.core.paths import SRC_DIR
from reprokit.core.values import decimal, plain_setting, whole_number
from reprokit.data.imagenet import FULL_TRAIN_NEEDS_URL, TRAIN_TAGS, choose_train_folder
from reprokit.data.recordio import READY_NEEDS_URL

INSTALL_SCRIPT_WRITES = "stock CK writes every install variable into the install script (quoted only around spaces)"


def install_hook(setup: Callable[[CkDict], CkDict]) -> Callable[[CkDict], CkDict]:
    """A package's setup hook, refusing shell syntax in what CK writes into the install script next.

    CK calls setup after merging the package's variables, --env.* and its own into ``new_env`` and before
    rendering them as ``export NAME=VALUE`` lines (double quotes only around values holding a space); the
    hook's own ``install_env`` joins them. So this is the last moment before the script exists.
    """
    @ck_command
    @functools.wraps(setup)
    def hook(i: CkDict) -> CkDict:
        refuse_shell_syntax({**i.get("new_env", {}),
                             **({"INSTALL_DIR": i["install_path"]} if i.get("install_path") else {})})
        refuse_shell_syntax_in_labels(i, INSTALL_SCRIPT_WRITES)  # the env entry registered next carries them
        out = setup(i)  # only plain values reach it: shell syntax is named before any other complaint
        if out.get("return", 0) == 0:
            # -DNAME=VALUE and --param=VALUE reach the script without passing any hook (see ck/script.py)
            refuse_shell_syntax({**out.get("install_env", {}), **install_parameters()})
        return out
    return hook


def refuse_shell_syntax(written: CkDict) -> None:
    for name, value in written.items():
        plain_setting(str(name), value, INSTALL_SCRIPT_WRITES, spaces_quoted=True)


def pre_path_hook(pre_path: Callable[[CkDict], CkDict]) -> Callable[[CkDict], CkDict]:
    """A package's pre_path hook. CK runs it before setup, with the same variables (``install_env``): they are
    refused first, as install_hook does, so that a bad value is never looked at or reported as something else."""
    @ck_command
    @functools.wraps(pre_path)
    def hook(i: CkDict) -> CkDict:
        refuse_shell_syntax(i.get("install_env", {}))
        return pre_path(i)
    return hook


def repair_install_paths(i: CkDict) -> None:
    """Point this package's env entries registered by an older reprokit at their install folder.

    Those set path_install to the data inside the install folder; CK installs a
    package again into that path, which nested a second copy in the first. An
    entry of this package is one tagged with all the package's tags whose full
    path is its install folder plus the package's end_full_path_universal.
    """
    end = i.get("cfg", {}).get("end_full_path_universal", "")
    tags = ",".join(t for t in i.get("cfg", {}).get("tags", []) if t)
    if not (end and tags):
        return
    found = access({"action": "search", "module_uoa": "env", "tags": tags, "add_meta": "yes"})
    for entry in found.get("lst", []) if found.get("return") == 0 else []:
        customize = entry.get("meta", {}).get("customize", {})
        full_path, path_install = customize.get("full_path", ""), customize.get("path_install", "")
        if not (customize.get("used_package_uid") and full_path.endswith(os.sep + end)):
            continue  # detected, not installed by a package
        folder = full_path[:-len(end) - 1]
        if path_install and path_install != folder and path_install.startswith(folder + os.sep):
            meta = entry["meta"]
            meta["customize"]["path_install"] = folder
            updated = access({"action": "update", "module_uoa": "env", "data_uoa": entry["data_uid"],
                              "repo_uoa": entry.get("repo_uid", ""), "dict": meta, "substitute": "yes",
                              "ignore_update": "yes"})
            if updated.get("return", 1) > 0:
                raise UserError(f"cannot repair env {entry['data_uid']} (its path_install {path_install} should be "
                                f"{folder}): {updated.get('error')}; remove it with: ck rm env:{entry['data_uid']} --force")
            print(f"package: env {entry['data_uid']} now records its install folder {folder} (was {path_install})",
                  flush=True)


@pre_path_hook
def framework_pre_path(i: CkDict) -> CkDict:
    """Before CK picks the install folder: repair older env entries of this package (repair_install_paths)."""
    repair_install_paths(i)
    return {"return": 0}


def _url_given(i: CkDict, missing: str) -> CkDict:
    repair_install_paths(i)
    if not str(i.get("install_env", {}).get("PACKAGE_URL", "")).strip():
        raise UserError(missing)
    return {"return": 0}


@pre_path_hook
def imagenet_train_pre_path(i: CkDict) -> CkDict:
    """Full ImageNet needs the user's own copy (a login at image-net.org): refuse to start without PACKAGE_URL."""
    return _url_given(i, FULL_TRAIN_NEEDS_URL)


@pre_path_hook
def recordio_ready_pre_path(i: CkDict) -> CkDict:
    """The authors' converted set needs a location given by the user: refuse to start without PACKAGE_URL."""
    return _url_given(i, READY_NEEDS_URL)


@install_hook
def framework_setup(i: CkDict) -> CkDict:
    """Install scripts run reprokit with the framework's interpreter (FRAMEWORK_PYTHON, PYTHONPATH=REPROKIT_SRC)."""
    return {"return": 0, "install_env": {"FRAMEWORK_PYTHON": sys.executable, "REPROKIT_SRC": str(SRC_DIR)}}


@pre_path_hook
def recordio_pre_path(i: CkDict) -> CkDict:
    """Choose the train folder to convert and the engine that converts it; check the conversion settings.

    Runs before CK looks for this package's env entry and picks the install
    folder: the source's kind (e.g. imagenet-min) joins the package's tags and
    the folder's name, so each kind has its own conversion. Converting the full
    set after the small one adds it; converting a kind again replaces only that
    kind's conversion (never, say, hours of full ImageNet by a synthetic set).
    """
    repair_install_paths(i)
    given = i.get("install_env", {})
    folder = choose_train_folder(env_entries(TRAIN_TAGS), str(given.get("IMAGENET_TRAIN_ENV", "")).strip())
    python = find_engine("p3", "embedded").python  # stock MXNet: its im2rec and OpenCV
    decimal(given.get("TRAIN_RATIO", ""), "TRAIN_RATIO", "--env.TRAIN_RATIO=VALUE", 0.01, 1.0)
    whole_number(given.get("RESIZE", ""), "RESIZE", "--env.RESIZE=N", 0, 100_000)
    whole_number(given.get("QUALITY", ""), "QUALITY", "--env.QUALITY=N", 1, 100)
    threads = str(given.get("NUM_THREADS", "")).strip() or str(os.cpu_count() or 1)
    whole_number(threads, "NUM_THREADS", "--env.NUM_THREADS=N", 1, 1024)
    tags = i["tags"]  # CK's own list: it searches and registers the env entry with these tags
    # The kind itself says what the set is (imagenet-min, ...); from-KIND keeps the search apart even for the
    # kind "imagenet", which is also one of every conversion's tags.
    tags.extend(t for t in (folder.kind, f"from-{folder.kind}") if t not in tags)
    i["customize"]["extra_suggested_path"] = f"-{folder.kind}"
    print(f"dataset: converting the {folder.kind} train folder {folder.root} ({folder.classes} classes) "
          f"with {threads} process(es)", flush=True)
    return {"return": 0,
            "install_env": {"ENGINE_PYTHON": python, "REPROKIT_SRC": str(SRC_DIR), "SOURCE_DIR": str(folder.root),
                            "SOURCE_KIND": folder.kind, "NUM_THREADS": threads}}
