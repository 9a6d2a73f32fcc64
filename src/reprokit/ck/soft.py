"""The hooks of our soft entries (dirs, limit, version_cmd, setup), one set per soft, for their customize.py.

Searches are bounded (never /usr, /opt or ~), each found item appears once, and
"nothing found" is one error line: stock CK would otherwise ask whether to open
wiki pages, which fails with stdin closed.
"""
from __future__ import annotations

import os
from os.path import expanduser
from pathlib import Path

from reprokit.ck.errors import CkDict, access, ck_command
from reprokit.ck.script import refuse_shell_syntax_in_labels
from reprokit.core.errors import UserError
from reprokit.core.values import plain_setting
from reprokit.data import iwslt
from reprokit.data.imagenet import DETECT_DEPTH, TRAIN_INSTALL_HINT, describe, find_train_roots, is_train_root
from reprokit.data.iwslt import INSTALL_HINT, KIND_SYNTHETIC, check_corpus
from reprokit.data.recordio import read_manifest
from reprokit.engines.artifact.installed import MANIFEST, P3_PACKAGES_HINT, ArtifactEnv, build_tag, load_installed
from reprokit.engines.bytescheduler.install import PACKAGE_HINT, installed_commit, installed_version
from reprokit.engines.mxnet import MXNET_LIBRARY, interpreter_of, prefix_of, sockeye_version_in, version_of

ENV_SCRIPT_WRITES = ("stock CK writes the env entry's variables into its env script (quoted only around spaces), "
                     "which every run and install using it sources")
ENGINE_INSTALL = "ck install package:lib-mxnet --quiet"
SOCKEYE_INSTALL = "ck install package:lib-sockeye --quiet"


def installed_dirs(i: CkDict) -> CkDict:
    """Search only where engines and their libraries are installed (CK_TOOLS, CK_DIRS, --search_dirs)."""
    system = {"/usr", "/opt", expanduser("~")}
    return {"return": 0, "dirs": [d for d in i.get("dirs", []) if d not in system] or ["/nonexistent"]}


def _one_per_file(i: CkDict, nothing_found: str) -> CkDict:
    """One candidate per real file (venvs show lib and lib64 twins)."""
    unique: dict[str, str] = {}
    for path in sorted(i.get("list", []), key=len):
        unique.setdefault(os.path.realpath(path), path)
    if not unique:
        raise UserError(nothing_found)
    return {"return": 0, "list": list(unique.values())}


def install_folder(i: CkDict, folder: str | Path) -> str:
    """CK's path_install for an env entry whose data lies in ``folder``.

    A second `ck install` of a package installs into the path_install of the
    package's env entry (INSTALL_DIR), so for a package install it must be the
    install folder: pointing it at the data inside made a reinstall nest a copy
    in the data and fail in stock CK ("can't find lib path!"). The install
    folder is the full path without the package's end_full_path_universal.
    A detected folder is its own.
    """
    customize = i["customize"]
    package, full_path = customize.get("used_package_uid", ""), customize.get("full_path", "")
    if package and full_path:
        loaded = access({"action": "load", "module_uoa": "package", "data_uoa": package})
        end = loaded.get("dict", {}).get("end_full_path_universal", "") if loaded.get("return") == 0 else ""
        if end and full_path.endswith(os.sep + end):
            return str(full_path[:-len(end) - 1])
    return str(folder)


def _register(i: CkDict, folder: str | Path, **variables: str) -> CkDict:
    """Point the env entry at ``folder`` and record its variables under the soft's prefix (path_install: install_folder)."""
    customize, env = i["customize"], i["env"]
    prefix = customize["env_prefix"]
    customize["path_install"] = install_folder(i, folder)
    env[prefix] = str(folder)
    env.update({f"{prefix}_{k}": v for k, v in variables.items()})
    return _plain_env(i)


def _plain_env(i: CkDict) -> CkDict:
    """Refuse shell syntax in what CK writes into the env script next: a found folder named like a command
    must not become one in every later run."""
    written = {**i["env"], "path_install": i["customize"].get("path_install", "")}
    for name, value in written.items():
        plain_setting(str(name), value, ENV_SCRIPT_WRITES, spaces_quoted=True)
    refuse_shell_syntax_in_labels(i, ENV_SCRIPT_WRITES)
    return {"return": 0, "bat": ""}


# ---------------------------------------------------------------- lib.mxnet: the stock engine's prefix

@ck_command
def mxnet_limit(i: CkDict) -> CkDict:
    return _one_per_file(i, f"no MXNet engine ({MXNET_LIBRARY}) found in the searched folders; pass the prefix with "
                            f"--search_dirs=DIR, or install one with: {ENGINE_INSTALL}")


@ck_command
def mxnet_version(i: CkDict) -> CkDict:
    return {"return": 0, "version": version_of(interpreter_of(prefix_of(i["full_path"])))}


@ck_command
def mxnet_setup(i: CkDict) -> CkDict:
    """Register the engine's prefix, interpreter and library folder."""
    full_path = i["customize"]["full_path"]
    prefix = prefix_of(full_path)
    return _register(i, prefix, PYTHON=str(interpreter_of(prefix)), LIB=str(Path(full_path).parent))


# ---------------------------------------------------------------- lib.sockeye: Sockeye for the engine

@ck_command
def sockeye_limit(i: CkDict) -> CkDict:
    return _one_per_file(i, "no Sockeye (sockeye/__init__.py) found in the searched folders; pass the site-packages "
                            f"folder with --search_dirs=DIR, or install it with: {SOCKEYE_INSTALL}")


@ck_command
def sockeye_version(i: CkDict) -> CkDict:
    return {"return": 0, "version": sockeye_version_in(Path(i["full_path"]))}


@ck_command
def sockeye_setup(i: CkDict) -> CkDict:
    """Register the folder that holds the sockeye package (the one the engine's .pth file names)."""
    return _register(i, Path(i["customize"]["full_path"]).parent.parent)


# ---------------------------------------------------------------- lib.bytescheduler: ByteScheduler for the engine

@ck_command
def bytescheduler_limit(i: CkDict) -> CkDict:
    return _one_per_file(i, "no ByteScheduler (bytescheduler/__init__.py) found in the searched folders; pass the "
                            f"site-packages folder with --search_dirs=DIR, or install it with: {PACKAGE_HINT} --quiet")


@ck_command
def bytescheduler_version(i: CkDict) -> CkDict:
    return {"return": 0, "version": installed_version(Path(i["full_path"]).parent.parent)}


@ck_command
def bytescheduler_setup(i: CkDict) -> CkDict:
    """Register the folder that holds the bytescheduler package (the one the engine's .pth file names), and the
    byteps commit it was installed from."""
    site = Path(i["customize"]["full_path"]).parent.parent
    return _register(i, site, COMMIT=installed_commit(site))


# ---------------------------------------------------------------- tool.p3: the authors' artifact

@ck_command
def artifact_limit(i: CkDict) -> CkDict:
    found = sorted(set(i.get("list", [])))
    if not found:
        raise UserError(f"no installed artifact ({MANIFEST}) found in the searched folders; pass the install folder "
                        f"with --search_dirs=DIR, or install it with: {P3_PACKAGES_HINT}")
    return {"return": 0, "list": found}


@ck_command
def artifact_version(i: CkDict) -> CkDict:
    return {"return": 0, "version": load_installed(i["full_path"]).manifest.version}


@ck_command
def artifact_setup(i: CkDict) -> CkDict:
    """Register the artifact's source tree, interpreter, build (p3|baseline), commit and CUDA flag."""
    installed = load_installed(i["customize"]["full_path"])
    i["customize"]["path_install"] = install_folder(i, installed.root.parent)  # a reinstall swaps artifact/ there
    i["env"].update(ArtifactEnv.of(installed).to_env())
    tags = i.get("tags")  # CK saves this very list as the entry's tags: `ck detect` gets the package's build tag too
    if isinstance(tags, list) and build_tag(installed.manifest.build) not in tags:
        tags.append(build_tag(installed.manifest.build))
    return _plain_env(i)


# ---------------------------------------------------------------- dataset.imagenet.train: train folders

def imagenet_dirs(i: CkDict) -> CkDict:
    """Our own bounded search (find_train_roots) over --search_dirs and CK_DIRS only.

    Not /usr, /opt, ~ (a whole-disk walk) nor CK_TOOLS (installed datasets are
    registered already). CK then looks only one level into each train folder found.
    """
    skip = {"/usr", "/opt", expanduser("~"), os.environ.get("CK_TOOLS") or expanduser("~/CK-TOOLS")}
    roots = find_train_roots([d for d in i.get("dirs", []) if d not in skip])
    return {"return": 0, "dirs": [str(r) for r in roots] or ["/nonexistent"]}


@ck_command
def imagenet_limit(i: CkDict) -> CkDict:
    """CK matched class folders (nXXXXXXXX); each train folder once."""
    roots: dict[str, str] = {}
    for path in i.get("list", []):
        parent = os.path.dirname(path)
        roots.setdefault(os.path.realpath(parent), parent)
    found = [r for r in roots.values() if is_train_root(Path(r))]
    if not found:
        raise UserError(f"no ImageNet train folder (class folders like n01440764 holding JPEG files) within "
                        f"{DETECT_DEPTH} levels of the searched folders; pass its folder with --search_dirs=DIR, or "
                        f"{TRAIN_INSTALL_HINT.replace('; ', ', ')}")
    return {"return": 0, "list": found, "skip_sort": "yes"}


@ck_command
def imagenet_version(i: CkDict) -> CkDict:
    return {"return": 0, "version": describe(i["full_path"]).version}


@ck_command
def imagenet_setup(i: CkDict) -> CkDict:
    """Register the train folder, its kind (imagenet, imagenet-min, imagenet-synthetic) and class count."""
    folder = describe(i["customize"]["full_path"])
    return _register(i, folder.root, KIND=folder.kind, CLASSES=str(folder.classes))


# ---------------------------------------------------------------- dataset.imagenet.train.p3: RecordIO conversions

@ck_command
def recordio_setup(i: CkDict) -> CkDict:
    """Register the .rec/.idx files of a finished conversion (its recordio.json is written last)."""
    folder = Path(i["customize"]["full_path"]).parent
    manifest = read_manifest(folder)
    variables = {"KIND": manifest.kind, "CLASSES": str(manifest.classes), "SOURCE": manifest.source,
                 "CONVERTED_AT": manifest.converted_at}
    for name, infix in (("train", ""), ("val", "VAL_")):
        part = manifest.parts.get(name)
        if part is not None:
            variables.update({f"{infix}REC": part.rec, f"{infix}IDX": part.idx, f"{infix}IMAGES": str(part.images)})
    return _register(i, folder, **variables)


# ---------------------------------------------------------------- dataset.iwslt15.en-vi: corpus folders

@ck_command
def iwslt_limit(i: CkDict) -> CkDict:
    """Folders whose files make a complete corpus, each once."""
    folders: dict[str, str] = {}
    for path in i.get("list", []):
        try:
            check_corpus(Path(path).parent)
        except UserError:
            continue
        folders.setdefault(os.path.realpath(path), path)
    if not folders:
        raise UserError("no IWSLT15 en-vi corpus (train/tst2012/tst2013 .en/.vi and vocab files) in the searched "
                        f"folders; pass its folder with --search_dirs=DIR, or {INSTALL_HINT}")
    return {"return": 0, "list": list(folders.values())}


@ck_command
def iwslt_version(i: CkDict) -> CkDict:
    corpus = iwslt.describe(Path(i["full_path"]).parent)
    return {"return": 0, "version": "synthetic" if corpus.name == KIND_SYNTHETIC else "2015"}


@ck_command
def iwslt_setup(i: CkDict) -> CkDict:
    """Register the corpus folder, its kind (iwslt15, iwslt15-synthetic) and its number of training pairs."""
    corpus = iwslt.describe(Path(i["customize"]["full_path"]).parent)
    return _register(i, corpus.folder, KIND=corpus.name, PAIRS=str(corpus.train_pairs))
