"""CK's dict-in/dict-out boundary: what the hooks of CK entries call.

Everything here converts CK's input dicts into typed calls of the core and the
core's answers back into CK's return dicts. No logic of its own beyond that.
"""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

from reprokit.run import settings as run_settings
from reprokit.engines.mxnet import MXNET_LIBRARY, interpreter_of, prefix_of, sockeye_in_engine, version_of
from reprokit.engines.artifact import BUILDS as ARTIFACT_BUILDS, ENGINE_TAGS as ARTIFACT_TAGS, ENV_PREFIX as ARTIFACT_ENV
from reprokit.engines.artifact import MANIFEST as ARTIFACT_MANIFEST, P3_PACKAGES_HINT as ARTIFACT_INSTALL
from reprokit.engines.artifact import EngineChoice, artifact_command, artifact_engine_name, load_installed, select_engine
from reprokit.engines.artifact import env_variables as artifact_env_variables
from reprokit.errors import UserError
from reprokit.run.command import SPEC_FILE
from reprokit.cluster import hosts as cluster_hosts
from reprokit.run.plan import (LOCALHOST, RolePlan, check_port_free, layout_cluster, layout_roles, pick_free_port,
                   worker_threads_per_host, write_json)
from reprokit.cluster.ssh import resolve as ssh_resolve
from reprokit.run.result import RESULT_FILE
from reprokit.paths import SRC_DIR

from reprokit.paths import PROGRAM_DIR
# Shipped into every role's working folder: the training scripts and what they import.
ENGINE_FILES = [PROGRAM_DIR / name for name in (run_settings.IMAGE_SCRIPT, run_settings.TRANSLATION_SCRIPT,
                                                "p3_slicing.py", "p3_kvstore.py", "synthetic_corpus.py")]


Engine = EngineChoice  # the engine a run uses: stock MXNet (lib-mxnet) or the authors' P3/baseline build

ENGINE_TAGS = "lib,mxnet"
ENGINE_INSTALL = "ck install package:lib-mxnet --quiet"


def _env_entries(ck: Any, tags: str) -> list[dict]:
    r = ck.access({"action": "search", "module_uoa": "env", "tags": tags, "add_meta": "yes"})
    if r["return"] > 0:
        raise UserError(f"cannot search CK's env entries: {r['error']}")
    return r["lst"]


def _stock_engine(entry: dict) -> Engine | None:
    meta = entry.get("meta", {})
    python = meta.get("env", {}).get("CK_ENV_LIB_MXNET_PYTHON", "")
    if not (python and os.path.exists(python)):
        return None
    version = meta.get("customize", {}).get("version", "")
    return Engine(env_uid=entry["data_uid"], build="stock", name=f"mxnet-{version}-cpu", python=python,
                  rank=tuple(int(x) for x in version.split(".") if x.isdigit()))


def _artifact_engine(entry: dict) -> Engine | None:
    variables = entry.get("meta", {}).get("env", {})
    python, tree = variables.get(f"{ARTIFACT_ENV}_PYTHON", ""), variables.get(ARTIFACT_ENV, "")
    build = variables.get(f"{ARTIFACT_ENV}_BUILD", "")
    if not (python and os.path.exists(python) and tree and os.path.isdir(tree)) or build not in ARTIFACT_BUILDS:
        return None  # an entry whose install was removed
    return Engine(env_uid=entry["data_uid"], build=build,
                  name=artifact_engine_name(build, variables.get(f"{ARTIFACT_ENV}_COMMIT", "")), python=python,
                  rank=(variables.get(f"{ARTIFACT_ENV}_INSTALLED_AT", ""),), tree=tree,
                  cuda=variables.get(f"{ARTIFACT_ENV}_CUDA") == "1")


def find_engine(ck: Any, env: dict) -> Engine:
    """The engine for this run's VARIANT (see artifact.select_engine): --env.ENGINE_ENV=UID pins one,
    --env.ENGINE=embedded|artifact forces a side, else the artifact when installed and stock MXNet otherwise."""
    entries = [(e, _stock_engine(e)) for e in _env_entries(ck, ENGINE_TAGS)]
    entries += [(e, _artifact_engine(e)) for e in _env_entries(ck, ARTIFACT_TAGS)]
    pinned = str(env.get("ENGINE_ENV", "")).strip()
    pinned = next((e["data_uid"] for e, _ in entries if pinned == e["data_uoa"]), pinned)
    return select_engine([c for _, c in entries if c is not None], str(env.get("VARIANT", "")).strip() or "p3",
                         str(env.get("ENGINE", "")).strip(), pinned)


def mxnet_soft_dirs(i: dict) -> dict:
    """Search only where engines and their libraries are installed (CK_TOOLS, CK_DIRS, --search_dirs), not /usr, /opt or ~."""
    from os.path import expanduser

    system = {"/usr", "/opt", expanduser("~")}
    return {"return": 0, "dirs": [d for d in i.get("dirs", []) if d not in system] or ["/nonexistent"]}


def _soft_candidates(i: dict, nothing_found: str) -> dict:
    """One candidate per real file (venvs show lib and lib64 twins); nothing found is an error.

    Stock CK would otherwise ask whether to open wiki pages, which fails with stdin closed.
    """
    unique: dict[str, str] = {}
    for path in sorted(i.get("list", []), key=len):
        unique.setdefault(os.path.realpath(path), path)
    if not unique:
        return {"return": 1, "error": nothing_found}
    return {"return": 0, "list": list(unique.values())}


def mxnet_soft_limit(i: dict) -> dict:
    return _soft_candidates(i, f"no MXNet engine ({MXNET_LIBRARY}) found in the searched folders; "
                               f"pass the prefix with --search_dirs=DIR, or install one with: {ENGINE_INSTALL}")


def mxnet_soft_version(i: dict) -> dict:
    try:
        python = interpreter_of(prefix_of(i["full_path"]))
        return {"return": 0, "version": version_of(python)}
    except UserError as exc:
        return {"return": 1, "error": str(exc)}


def mxnet_soft_setup(i: dict) -> dict:
    """Register the engine's prefix, interpreter and library folder in the env entry."""
    customize = i["customize"]
    env = i["env"]
    prefix_var = customize["env_prefix"]
    try:
        prefix = prefix_of(customize["full_path"])
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    customize["path_install"] = str(prefix)
    env[prefix_var] = str(prefix)
    env[prefix_var + "_PYTHON"] = str(interpreter_of(prefix))
    env[prefix_var + "_LIB"] = str(Path(customize["full_path"]).parent)
    return {"return": 0, "bat": ""}


SOCKEYE_INSTALL = "ck install package:lib-sockeye --quiet"


def sockeye_soft_limit(i: dict) -> dict:
    return _soft_candidates(i, "no Sockeye (sockeye/__init__.py) found in the searched folders; pass the "
                               f"site-packages folder with --search_dirs=DIR, or install it with: {SOCKEYE_INSTALL}")


def sockeye_soft_version(i: dict) -> dict:
    from reprokit.engines.mxnet import sockeye_version_in

    try:
        return {"return": 0, "version": sockeye_version_in(Path(i["full_path"]))}
    except UserError as exc:
        return {"return": 1, "error": str(exc)}


def sockeye_soft_setup(i: dict) -> dict:
    """Register the folder that holds the sockeye package (the one the engine's .pth file names)."""
    customize = i["customize"]
    site = Path(customize["full_path"]).parent.parent
    customize["path_install"] = str(site)
    i["env"][customize["env_prefix"]] = str(site)
    return {"return": 0, "bat": ""}


def artifact_package_setup(i: dict) -> dict:
    """The install script runs reprokit.engines.artifact with the framework's interpreter."""
    return {"return": 0, "install_env": {"FRAMEWORK_PYTHON": sys.executable,
                                         "REPROKIT_SRC": str(SRC_DIR)}}


def artifact_soft_dirs(i: dict) -> dict:
    return mxnet_soft_dirs(i)


def artifact_soft_limit(i: dict) -> dict:
    """Nothing found is one line (stock CK would ask whether to open wiki pages, and fail with stdin closed)."""
    found = sorted(set(i.get("list", [])))
    if not found:
        return {"return": 1, "error": f"no installed artifact ({ARTIFACT_MANIFEST}) found in the searched folders; pass "
                                      f"the install folder with --search_dirs=DIR, or install it with: {ARTIFACT_INSTALL}"}
    return {"return": 0, "list": found}


def artifact_soft_version(i: dict) -> dict:
    try:
        return {"return": 0, "version": load_installed(i["full_path"]).manifest.version}
    except UserError as exc:
        return {"return": 1, "error": str(exc)}


def artifact_soft_setup(i: dict) -> dict:
    """Register the artifact's source tree, interpreter, build (p3|baseline), commit and CUDA flag."""
    customize = i["customize"]
    try:
        installed = load_installed(customize["full_path"])
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    customize["path_install"] = str(installed.root.parent)  # INSTALL_DIR: a reinstall swaps artifact/ there
    i["env"].update(artifact_env_variables(installed))
    return {"return": 0, "bat": ""}


def mxnet_package_setup(i: dict) -> dict:
    """The install script builds the engine's prefix with the framework's interpreter."""
    return {"return": 0, "install_env": {"FRAMEWORK_PYTHON": sys.executable}}


def _cluster_config(i: dict) -> Any:
    return (i.get("device_cfg") or {}).get("remote_params", {}).get("cluster_config")


def _spec(i: dict, run_dir: Path) -> dict:
    env = i.get("env", {})
    cmd_key = i.get("misc", {}).get("cmd_key", "")
    cluster_data = _cluster_config(i)
    settings = run_settings.resolve(cmd_key, env, default_profile="smoke" if cluster_data is None else "paper")
    engine = find_engine(i["ck_kernel"], env)
    if settings.script == run_settings.TRANSLATION_SCRIPT and not engine.is_artifact:
        from dataclasses import replace

        engine = replace(engine, name=f"{engine.name}+sockeye-{sockeye_in_engine(engine.python)}")
    data = _run_data(i["ck_kernel"], env, settings)
    common = dict(
        run_id=uuid.uuid4().hex,
        command=[engine.python, settings.script, *settings.train_args(), *(data.train_args() if data else [])],
        files=[str(f) for f in ENGINE_FILES],
        timeout_s=settings.timeout_s,
    )
    spec = {"settings": settings.to_dict(), "variant": settings.variant,
            "engine": {"name": engine.name, "python": engine.python, "env_uid": engine.env_uid,
                       "build": engine.build, **({"tree": engine.tree, "cuda": engine.cuda} if engine.is_artifact else {})}}
    if cluster_data is None:
        hosts = [LOCALHOST]
        if settings.ps_root_port is None:
            port = pick_free_port(LOCALHOST)
        else:
            check_port_free(LOCALHOST, settings.ps_root_port)
            port = settings.ps_root_port
        num_workers = settings.num_workers or 2
        plan = RolePlan(hosts=hosts, roles=layout_roles(hosts, num_workers, settings.num_servers or 1),
                        scheduler_host=LOCALHOST, scheduler_port=port,
                        worker_threads=settings.worker_threads or worker_threads_per_host(num_workers), **common)
    else:
        cluster = cluster_hosts.parse(cluster_data, source="the machine's hosts.json (see: ck load machine:NAME)")
        plan = RolePlan(
            hosts=cluster.names,
            roles=layout_cluster(cluster.hosts, settings.num_workers, settings.num_servers),
            scheduler_host=cluster.names[0],
            scheduler_port=settings.ps_root_port or 0,  # 0: the launcher finds a free one on that host
            worker_threads=settings.worker_threads,  # 0: the launcher asks each host for its cores
            addresses={h.host: ssh_resolve(h, cluster).hostname for h in cluster.hosts},
            interfaces={h.host: h.interface for h in cluster.hosts if h.interface},
            **common,
        )
        spec["cluster"] = cluster_data
    if engine.is_artifact:
        _run_artifact_scripts(plan, engine, settings, getattr(data, "rec", ""))
    spec["data"] = data.to_dict() if data else {"name": "synthetic"}
    spec["plan"] = plan.to_dict()
    return spec


def _run_artifact_scripts(plan: RolePlan, engine: Engine, settings: "run_settings.RunSettings", data_train: str) -> None:
    """The artifact runs its own training scripts (P3 is compiled into it): none of ours is shipped."""
    run = artifact_command(engine, settings.model, settings.batch_size, settings.image_shape, settings.num_epochs,
                           settings.num_batches, settings.disp_batches, len(plan.workers), data_train=data_train,
                           sockeye_output=getattr(settings, "output_file", ""))  # sockeye runs only
    plan.command = run.command
    plan.extra_env.update(run.extra_env)
    plan.files = []


def p3_preprocess(i: dict) -> dict:
    """Write the run specification (settings, engine, role plan) and the hosts file into the run folder.

    Bad input is recorded in the specification instead of returned as a CK
    error: the run command then prints it as one line and exits non-zero,
    which stock CK reports as a failed run (a preprocess error would not
    change ck's exit code, and breaks --treat_return_code_as_exit_code).
    """
    run_dir = Path.cwd()
    for stale in (RESULT_FILE, "launch.json"):
        (run_dir / stale).unlink(missing_ok=True)
    try:
        spec = _spec(i, run_dir)
    except UserError as exc:
        spec = {"error": str(exc)}
    else:
        plan = RolePlan.from_dict(spec["plan"])
        (run_dir / "hosts").write_text("".join(f"{h}\n" for h in plan.hosts))
        counts = {k: sum(r.kind == k for r in plan.roles) for k in ("scheduler", "server", "worker")}
        s = spec["settings"]
        print(f"p3: plan: {counts['scheduler']} scheduler, {counts['server']} server(s), {counts['worker']} "
              f"worker(s) on {', '.join(plan.hosts)}; {s['model']} batch {s['batch_size']} shape "
              f"{s['image_shape'] or 'n/a'}; profile {s['profile']}; engine {spec['engine']['name']}", flush=True)
    write_json(run_dir / SPEC_FILE, spec)
    src = str(SRC_DIR)
    return {"return": 0, "new_env": {"REPROKIT_PYTHON": sys.executable, "REPROKIT_SRC": src}}


def p3_postprocess(i: dict) -> dict:
    """Hand the unified result to CK as the run's characteristics."""
    import json

    run_dir = Path.cwd()
    result_path = run_dir / RESULT_FILE
    if result_path.exists():
        result = json.loads(result_path.read_text())
    else:
        spec_path = run_dir / SPEC_FILE
        spec = json.loads(spec_path.read_text()) if spec_path.exists() else {}
        if spec.get("error"):
            reason = spec["error"]  # already printed by the run command
        else:
            reason = f"the run wrote no {RESULT_FILE} in {run_dir}"
            print(f"p3: FAILED: {reason}", flush=True)
        result = {"run_success": False, "failure_reason": reason}
    result["run_folder"] = str(run_dir)
    return {"return": 0, "characteristics": result}


def machine_cluster_data(ck: Any, name: str) -> Any:
    """The hosts.json data a cluster machine entry was registered with."""
    r = ck.access({"action": "load", "module_uoa": "machine", "data_uoa": name})
    if r["return"] > 0:
        raise UserError(f"there is no machine entry {name!r}; register it with: "
                        f"ck add machine:{name} --type=cluster --config_file=hosts.json --quiet")
    data = r["dict"].get("device_cfg", {}).get("remote_params", {}).get("cluster_config")
    if data is None:
        raise UserError(f"machine:{name} is not a cluster; register one with --type=cluster --config_file=hosts.json")
    return data


def _machine_cluster(ck: Any, name: str) -> "cluster_hosts.ClusterConfig":
    if not name:
        raise UserError("name the machine: ck check cluster:NAME")
    return cluster_hosts.parse(machine_cluster_data(ck, name), source=f"machine:{name}")


def cluster_check(i: dict, ck: Any) -> dict:
    from dataclasses import asdict, replace

    from reprokit.cluster.preflight import check_cluster, table

    try:
        cluster = _machine_cluster(ck, i.get("data_uoa", ""))
        if i.get("accept_new_host_keys") in ("yes", True):
            cluster = replace(cluster, accept_new_host_keys=True)
        try:
            python = find_engine(ck, {}).python
        except UserError:
            if not all(h.python for h in cluster.hosts):
                raise
            python = ""
        port = run_settings.resolve_port(str(i.get("port", ""))) or 0
        data = find_image_data(ck, {"DATA": i.get("data", ""), "DATASET_ENV": i.get("dataset_env", "")})
        # The converted train set must be at the same path on every host.
        checks = check_cluster(cluster, python, [os.path.dirname(data.rec)] if data else [], scheduler_port=port)
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    print(table(checks), flush=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        return {"return": 1, "error": f"{len(failed)} of {len(checks)} host(s) failed: "
                                      + "; ".join(c.problems[0] for c in failed)}
    print(f"cluster: all {len(checks)} host(s) ready", flush=True)
    return {"return": 0, "hosts": [asdict(c) for c in checks]}


def _testbed_dir(name: str, given: str) -> Path:
    if given:
        return Path(given).expanduser()
    tools = os.environ.get("CK_TOOLS") or os.path.expanduser("~/CK-TOOLS")
    return Path(tools) / f"testbed-{name}"


def cluster_testbed(i: dict) -> dict:
    import json

    from reprokit.cluster import testbed as testbed

    name = i.get("data_uoa", "")
    try:
        if not name:
            raise UserError("name the testbed: ck testbed cluster:NAME --hosts=N")
        state_dir = _testbed_dir(name, i.get("dir", ""))
        if i.get("down") in ("yes", True):
            removed = testbed.destroy(name, state_dir)
            print(f"testbed {name}: removed {len(removed)} namespace(s)" if removed
                  else f"testbed {name}: nothing to remove", flush=True)
            return {"return": 0, "removed": removed}
        if i.get("shape"):
            described = state_dir / "testbed.json"
            if not described.exists():
                raise UserError(f"there is no testbed {name} (no {described}); create it with --hosts=N")
            rate = None if i["shape"] == "off" else i["shape"]
            testbed.shape(name, json.loads(described.read_text())["hosts"], rate)
            print(f"testbed {name}: links {'unlimited' if rate is None else 'limited to ' + rate}", flush=True)
            return {"return": 0}
        raw = str(i.get("hosts", "3"))
        if not raw.isdigit():
            raise UserError(f"--hosts must be a whole number, got {raw!r}")
        hosts_json = testbed.create(name, int(raw), state_dir, rate=i.get("rate") or None)
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    print(f"testbed {name}: {raw} host(s) ready; register it with:\n"
          f"  ck add machine:{name} --type=cluster --config_file={hosts_json} --quiet", flush=True)
    return {"return": 0, "hosts_json": str(hosts_json)}


# ---------------------------------------------------------------- IWSLT15 en-vi (reprokit.data.iwslt)


def iwslt_soft_limit(i: dict) -> dict:
    """Folders whose files make a complete corpus, each once; nothing found is one error line."""
    from reprokit.data.iwslt import INSTALL_HINT, check_corpus

    folders: dict[str, str] = {}
    for path in i.get("list", []):
        try:
            check_corpus(Path(path).parent)
        except UserError:
            continue
        folders.setdefault(os.path.realpath(path), path)
    if not folders:
        return {"return": 1, "error": "no IWSLT15 en-vi corpus (train/tst2012/tst2013 .en/.vi and vocab files) in the "
                                      f"searched folders; pass its folder with --search_dirs=DIR, or {INSTALL_HINT}"}
    return {"return": 0, "list": list(folders.values())}


def iwslt_soft_version(i: dict) -> dict:
    from reprokit.data.iwslt import KIND_SYNTHETIC, describe

    try:
        corpus = describe(Path(i["full_path"]).parent)
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    return {"return": 0, "version": "synthetic" if corpus.name == KIND_SYNTHETIC else "2015"}


def iwslt_soft_setup(i: dict) -> dict:
    """Register the corpus folder, its kind (iwslt15, iwslt15-synthetic) and its number of training pairs."""
    from reprokit.data.iwslt import describe

    customize, env = i["customize"], i["env"]
    prefix = customize["env_prefix"]
    try:
        corpus = describe(Path(customize["full_path"]).parent)
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    customize["path_install"] = corpus.folder
    env[prefix] = corpus.folder
    env[prefix + "_KIND"] = corpus.name
    env[prefix + "_PAIRS"] = str(corpus.train_pairs)
    return {"return": 0, "bat": ""}


def find_corpus(ck: Any, env: dict) -> "Any":
    """The corpus a Sockeye run reads (iwslt.Corpus), or None to generate the synthetic one per worker."""
    from reprokit.data.iwslt import TAGS, choose_corpus

    return choose_corpus(_env_list(ck, TAGS), str(env.get("DATA", "")), str(env.get("DATASET_ENV", "")).strip())


# ---------------------------------------------------------------- ImageNet data (reprokit.data.imagenet, reprokit.data.recordio)


def _env_list(ck: Any, tags: str) -> "list":
    from reprokit.data.imagenet import EnvEntry

    r = ck.access({"action": "search", "module_uoa": "env", "tags": tags, "add_meta": "yes"})
    if r["return"] > 0:
        raise UserError(f"cannot search CK's env entries: {r['error']}")
    return [EnvEntry(uid=e["data_uid"], alias=e.get("data_uoa", ""), variables=e.get("meta", {}).get("env", {}))
            for e in r["lst"]]


def imagenet_soft_dirs(i: dict) -> dict:
    """Our own bounded search (datasets.find_train_roots) over --search_dirs and CK_DIRS only.

    Not /usr, /opt, ~ (a whole-disk walk) nor CK_TOOLS (installed datasets are
    registered already). CK then looks only one level into each train folder found.
    """
    from os.path import expanduser

    from reprokit.data.imagenet import find_train_roots

    skip = {"/usr", "/opt", expanduser("~"), os.environ.get("CK_TOOLS") or expanduser("~/CK-TOOLS")}
    roots = find_train_roots([d for d in i.get("dirs", []) if d not in skip])
    return {"return": 0, "dirs": [str(r) for r in roots] or ["/nonexistent"]}


def imagenet_soft_limit(i: dict) -> dict:
    """CK matched class folders (nXXXXXXXX); each train folder once. Nothing found is one error line."""
    from reprokit.data.imagenet import DETECT_DEPTH, TRAIN_INSTALL_HINT, is_train_root

    roots: dict[str, str] = {}
    for path in i.get("list", []):
        parent = os.path.dirname(path)
        roots.setdefault(os.path.realpath(parent), parent)
    found = [r for r in roots.values() if is_train_root(Path(r))]
    if not found:
        return {"return": 1, "error": f"no ImageNet train folder (class folders like n01440764 holding JPEG files) "
                                      f"within {DETECT_DEPTH} levels of the searched folders; pass its folder with "
                                      f"--search_dirs=DIR, or {TRAIN_INSTALL_HINT.replace('; ', ', ')}"}
    return {"return": 0, "list": found, "skip_sort": "yes"}


def imagenet_soft_version(i: dict) -> dict:
    from reprokit.data.imagenet import describe

    try:
        return {"return": 0, "version": describe(i["full_path"]).version}
    except UserError as exc:
        return {"return": 1, "error": str(exc)}


def imagenet_soft_setup(i: dict) -> dict:
    """Register the train folder, its kind (imagenet, imagenet-min, imagenet-synthetic) and class count."""
    from reprokit.data.imagenet import describe

    customize, env = i["customize"], i["env"]
    prefix = customize["env_prefix"]
    try:
        folder = describe(customize["full_path"])
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    customize["path_install"] = str(folder.root)
    env[prefix] = str(folder.root)
    env[prefix + "_KIND"] = folder.kind
    env[prefix + "_CLASSES"] = str(folder.classes)
    return {"return": 0, "bat": ""}


def imagenet_package_setup(i: dict) -> dict:
    """Downloads and the synthetic set run in the framework's interpreter (Pillow, no MXNet)."""
    return {"return": 0, "install_env": {"FRAMEWORK_PYTHON": sys.executable,
                                         "REPROKIT_SRC": str(SRC_DIR)}}


def _number(env: dict, key: str, kind: type, low: float, high: float) -> Any:
    raw = str(env.get(key, "")).strip()
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise UserError(f"{key} must be a {'whole ' if kind is int else ''}number from {low} to {high}, got {raw!r}; "
                        f"fix it with --env.{key}=VALUE")
    return value


def recordio_package_setup(i: dict) -> dict:
    """Choose the train folder to convert and the engine that converts it; check the conversion settings."""
    from reprokit.data.imagenet import TRAIN_TAGS, choose_train_folder

    ck, given = i["ck_kernel"], i.get("new_env", {})
    try:
        folder = choose_train_folder(_env_list(ck, TRAIN_TAGS), str(given.get("IMAGENET_TRAIN_ENV", "")).strip())
        python = find_engine(ck, {"ENGINE": "embedded"}).python  # stock MXNet: its im2rec and OpenCV
        _number(given, "TRAIN_RATIO", float, 0.01, 1.0)
        _number(given, "RESIZE", int, 0, 100_000)
        _number(given, "QUALITY", int, 1, 100)
        threads = str(given.get("NUM_THREADS", "")).strip() or str(os.cpu_count() or 1)
        _number({"NUM_THREADS": threads}, "NUM_THREADS", int, 1, 1024)
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    print(f"dataset: converting the {folder.kind} train folder {folder.root} ({folder.classes} classes) "
          f"with {threads} process(es)", flush=True)
    return {"return": 0,
            "install_env": {"ENGINE_PYTHON": python, "REPROKIT_SRC": str(SRC_DIR),
                            "SOURCE_DIR": str(folder.root), "SOURCE_KIND": folder.kind, "NUM_THREADS": threads},
            # The env says which kind it holds (e.g. imagenet-synthetic), so nobody mistakes one for another.
            "soft_cfg": {"tags": ",".join([*i.get("tags", []), folder.kind])}}


def recordio_soft_setup(i: dict) -> dict:
    """Register the .rec/.idx files of a finished conversion (its recordio.json is written last)."""
    from reprokit.data.recordio import read_manifest

    customize, env = i["customize"], i["env"]
    prefix = customize["env_prefix"]
    try:
        folder = Path(customize["full_path"]).parent
        manifest = read_manifest(folder)
    except UserError as exc:
        return {"return": 1, "error": str(exc)}
    customize["path_install"] = str(folder)
    env[prefix] = str(folder)
    for part, infix in (("train", ""), ("val", "_VAL")):
        if part in manifest["parts"]:
            env[f"{prefix}{infix}_REC"] = manifest["parts"][part]["rec"]
            env[f"{prefix}{infix}_IDX"] = manifest["parts"][part]["idx"]
            env[f"{prefix}{infix}_IMAGES"] = str(manifest["parts"][part]["images"])
    env[prefix + "_KIND"] = manifest["kind"]
    env[prefix + "_CLASSES"] = str(manifest["classes"])
    env[prefix + "_SOURCE"] = manifest["source"]
    env[prefix + "_CONVERTED_AT"] = manifest.get("converted_at", "")
    return {"return": 0, "bat": ""}


def find_image_data(ck: Any, env: dict) -> "Any":
    """The converted train set a run reads (datasets.RecordioData), or None for synthetic batches."""
    from reprokit.data.imagenet import RECORDIO_TAGS, choose_recordio

    return choose_recordio(_env_list(ck, RECORDIO_TAGS), str(env.get("DATA", "")),
                           str(env.get("DATASET_ENV", "")).strip())


def _run_data(ck: Any, env: dict, settings: Any) -> Any:
    """What a run reads: a converted ImageNet train set (image models) or a registered IWSLT15 corpus (sockeye);
    None for generated data (synthetic batches, or the synthetic corpus written by every Sockeye worker)."""
    if settings.script == run_settings.TRANSLATION_SCRIPT:
        return find_corpus(ck, env)
    return find_image_data(ck, env)


def soft_hooks(soft: str) -> tuple:
    """The (dirs, limit, version_cmd, setup) hooks of one of our soft entries, for its customize.py."""
    return {
        "lib.mxnet": (mxnet_soft_dirs, mxnet_soft_limit, mxnet_soft_version, mxnet_soft_setup),
        "lib.sockeye": (mxnet_soft_dirs, sockeye_soft_limit, sockeye_soft_version, sockeye_soft_setup),
        "tool.p3": (artifact_soft_dirs, artifact_soft_limit, artifact_soft_version, artifact_soft_setup),
        "dataset.imagenet.train": (imagenet_soft_dirs, imagenet_soft_limit, imagenet_soft_version,
                                   imagenet_soft_setup),
        "dataset.iwslt15.en-vi": (mxnet_soft_dirs, iwslt_soft_limit, iwslt_soft_version, iwslt_soft_setup),
    }[soft]
