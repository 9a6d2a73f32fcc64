"""VARIANT resolves to the right engine in both worlds: the embedded default, and the authors' artifact installed.

The artifact world uses the stand-in for github anandj91/p3 (tests/support/artifact_standin.py):
its P3 and baseline builds are really built and registered through the CK
packages, and their scripts behave as the authors' where our runs depend on it
(a fixed 500-batch synthetic iterator unless our patch's option bounds it,
Sockeye's 100-update report period and its output folder), record the command
line and DMLC_* environment each role got, and log Speedometer lines.
"""
import json
from pathlib import Path

import pytest

from reprokit.engines.artifact.installed import MANIFEST, Manifest
from support.artifact_standin import LEAN, artifact_envs, make_git_repository, standin_settings, write_patches
from support.ckcli import CkCli, own_ck

SHORT = ["--cmd_key=resnet", "--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1"]


def run_spec(run_dir: Path) -> dict:
    return json.loads((run_dir / "p3-run.json").read_text())


@pytest.mark.parametrize("variant", ["p3", "baseline"])
def test_embedded_world_runs_both_variants_on_stock_mxnet(ck, tmp_path, variant):
    proc, out = ck.run_p3(tmp_path, *SHORT, f"--env.VARIANT={variant}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    result = out["characteristics"]
    assert (result["engine"], result["variant"]) == ("mxnet-1.9.1-cpu", variant)
    spec = run_spec(tmp_path)
    assert spec["engine"]["build"] == "stock"
    assert spec["plan"]["command"][1:3] == ["train.py", "--network"]
    assert "--variant" in spec["plan"]["command"]


def stock_engine_prefix(ck: CkCli) -> str:
    found = json.loads(ck("search", "env", "--tags=lib,mxnet", "--add_meta", "--out=json", check=True).stdout)["lst"]
    return found[0]["meta"]["env"]["CK_ENV_LIB_MXNET"]


def world(root: Path, stock_prefix: str) -> CkCli:
    """A CK of its own (artifact builds change engine selection) with the session's stock engine detected."""
    cli = own_ck(root)
    cli("detect", "soft:lib.mxnet", f"--search_dirs={stock_prefix}", "--quiet", check=True, timeout=300)
    return cli


@pytest.fixture(scope="module")
def artifact_world(ck, tmp_path_factory):
    """Stock MXNet, the P3 build and the baseline build, each registered (CPU builds: the command is then known)."""
    root = tmp_path_factory.mktemp("artifact-world")
    commits = make_git_repository(root / "p3.git")
    write_patches(root / "patches")
    cli = world(root / "ck", stock_engine_prefix(ck))
    for package in ("sysml19-p3-github", "sysml19-p3-baseline-github"):
        proc = cli("install", f"package:{package}", *standin_settings(root / "p3.git", root / "patches", package),
                   "--env.USE_CUDA=0", *LEAN, "--quiet", timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    builds = {v["CK_ENV_TOOL_SYSML19_P3_BUILD"]: v for v in artifact_envs(cli).values()}
    return cli, builds, commits


def standin_records(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("standin-*.json"))]


@pytest.mark.parametrize("variant, branch", [("p3", "master"), ("baseline", "anand-baseline")])
def test_artifact_world_runs_each_variant_on_its_own_build(artifact_world, tmp_path, variant, branch):
    cli, builds, commits = artifact_world
    proc, out = cli.run_p3(tmp_path, "--cmd_key=resnet", f"--env.VARIANT={variant}")
    tree = builds[variant]["CK_ENV_TOOL_SYSML19_P3"]
    engine = f"{'sysml19-p3' if variant == 'p3' else 'sysml19-p3-baseline'}@{commits[branch][:12]}"

    spec = run_spec(tmp_path)
    assert spec["engine"]["name"] == engine and spec["engine"]["build"] == variant
    command = spec["plan"]["command"]
    assert command[:2] == [builds[variant]["CK_ENV_TOOL_SYSML19_P3_PYTHON"],
                           f"{tree}/example/image-classification/train_imagenet.py"]
    assert spec["plan"]["files"] == []  # none of our scripts (and so none of our P3 slicing) is shipped

    # Every role ran the artifact's script from that build, with our launcher's DMLC_* environment.
    records = standin_records(tmp_path)
    roles = sorted(r["env"]["DMLC_ROLE"] for r in records)
    assert roles == ["scheduler", "server", "worker", "worker"]
    for record in records:
        assert record["kind"] == "train_imagenet" and record["mxnet"]["build"] == variant
        assert record["argv"][1:] == command[2:]
        assert record["env"]["DMLC_NUM_WORKER"] == "2" and record["env"]["DMLC_NUM_SERVER"] == "1"
    argv = records[0]["argv"]
    assert argv[argv.index("--network") + 1: argv.index("--network") + 4] == ["resnet", "--num-layers", "50"]
    assert argv[argv.index("--kv-store") + 1] == "dist_sync" and "--gpus" not in argv

    # The smoke profile's batch budget reached the script (its synthetic iterator would run 500 otherwise).
    assert [r["batches"] for r in records if r["env"]["DMLC_ROLE"] == "worker"] == [31, 31]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "p3-result.json").read_text())
    assert result["run_success"] is True and result["throughput_samples_per_sec"] > 0
    assert result["batches_measured"] == 2 * 20  # reports at 10, 20, 30: the first is warm-up
    assert (result["engine"], result["variant"], result["data"]) == (engine, variant, "synthetic")
    assert out["characteristics"]["engine"] == engine


def test_artifact_world_runs_the_bundled_sockeye_on_each_build(artifact_world, tmp_path):
    cli, builds, _ = artifact_world
    for variant in ("p3", "baseline"):
        run_dir = tmp_path / variant
        run_dir.mkdir()
        proc, out = cli.run_p3(run_dir, "--cmd_key=sockeye", f"--env.VARIANT={variant}",
                               f"--env.OUTPUT_FILE={run_dir / 'model'}")
        # The baseline build's Sockeye is the one the installer shipped from the p3 repository.
        tree = builds[variant]["CK_ENV_TOOL_SYSML19_P3"]
        workers = sorted((r for r in standin_records(run_dir) if r["env"]["DMLC_ROLE"] == "worker"),
                         key=lambda r: r["env"]["DMLC_WORKER_ID"])
        assert [w["kind"] for w in workers] == ["sockeye.train"] * 2 and workers[0]["mxnet"]["build"] == variant
        assert workers[0]["env"]["PYTHONPATH"] == f"{tree}/example/sockeye/source"
        argv = workers[0]["argv"]
        assert argv[argv.index("--source") + 1] == f"{tree}/example/sockeye/dataset/iwslt15_en-vi/train-preproc.en"
        # Each worker its own output folder (Sockeye removes it first), and a report period the smoke run measures.
        assert [w["output"] for w in workers] == [str(run_dir / "model"), str(run_dir / "model.worker-1")]
        assert workers[0]["env"]["SOCKEYE_MEASURE_SPEED_EVERY"] == "5"
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        result = json.loads((run_dir / "p3-result.json").read_text())
        assert result["run_success"] is True and result["batches_measured"] == 2 * 10
        assert result["data"] == "iwslt15-bundled" and out["characteristics"]["data"] == "iwslt15-bundled"


def test_engine_embedded_forces_stock_mxnet_in_the_artifact_world(artifact_world, tmp_path):
    cli, _, _ = artifact_world
    proc, out = cli.run_p3(tmp_path, *SHORT, "--env.VARIANT=baseline", "--env.ENGINE=embedded")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (out["characteristics"]["engine"], out["characteristics"]["variant"]) == ("mxnet-1.9.1-cpu", "baseline")
    assert standin_records(tmp_path) == []


def test_only_the_p3_build_installed_refuses_the_baseline_in_one_line(ck, artifact_world, tmp_path):
    _, builds, _ = artifact_world
    cli = world(tmp_path / "ck", stock_engine_prefix(ck))
    # Register the P3 build that is already built (ck detect), and nothing else of the artifact.
    p3_install = Path(builds["p3"]["CK_ENV_TOOL_SYSML19_P3_MANIFEST"]).parent
    cli("detect", "soft:tool.p3", f"--search_dirs={p3_install}", "--search_depth=1", "--quiet", check=True)
    # Detected like installed: the p3-build tag the package gives (what the selection by tag in
    # docs/explanation/engines.md relies on).
    assert len(artifact_envs(cli)) == 1
    found = json.loads(cli("search", "env", "--tags=tool,p3,p3-build", "--out=json", check=True).stdout)["lst"]
    assert len(found) == 1
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc, _ = cli.run_p3(run_dir, "--cmd_key=resnet", "--env.VARIANT=baseline")
    errors = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if line.startswith("p3: error:")]
    assert proc.returncode != 0 and len(errors) == 1
    assert "ck install package:sysml19-p3-baseline-github" in errors[0] and "--env.ENGINE=embedded" in errors[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (run_dir / "logs").exists()


TINY_STUDY = ["--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1"]


def test_the_study_sweeps_our_engine_and_the_authors_build_side_by_side(ck, artifact_world, tmp_path):
    # Without the authors' builds (the session's CK), asking for them is one line naming the package.
    refused = ck("reproduce", "study:sysml19-p3", f"--store={tmp_path / 'refused'}", "--engines=artifact",
                 "--models=resnet", timeout=120)
    assert refused.returncode != 0 and "--engines=artifact needs the authors' " in refused.stdout + refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr and not (tmp_path / "refused" / "sweeps").exists()

    cli, _, _ = artifact_world  # both builds registered: the default adds them
    store = tmp_path / "store"
    proc = cli("reproduce", "study:sysml19-p3", f"--store={store}", "--models=resnet", "--variants=baseline",
               "--repetitions=1", *TINY_STUDY, timeout=900)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "study: engines: embedded (stock MXNet 1.9.1: its own P3 and its two baselines), artifact (the authors' " \
           "baseline and P3 builds) (default: both of the authors' builds are registered" in output
    records = {r["config"]["engine"]: r for r in (json.loads(p.read_text()) for p in (store / "records").glob("*.json"))}
    assert set(records) == {"embedded", "artifact"}
    for kind, engine in (("embedded", "mxnet-1.9.1"), ("artifact", "sysml19-p3-baseline@")):
        record = records[kind]
        assert record["status"] == "ok" and record["result"]["engine"].startswith(engine)
        assert f"--env.ENGINE={kind}" in record["provenance"]["command_line"]
    md = (store / "report" / "report.md").read_text()
    [row] = [line for line in md.splitlines() if line.startswith("| embedded default [here] | smoke | resnet | native |")
             and line.count("n=1") == 2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4].endswith(", n=1") and cells[5] == "not measured"  # the authors' baseline; their P3 did not run
    assert cells[6].endswith(", n=1")  # MXNet 1.9.1's baseline; its worker-update baseline and P3 did not run
    assert cells[7:9] == ["not measured", "not measured"]
    assert cells[9:] == ["not measured"] * 3  # no P3 ratio on either engine, over either baseline


def registered_build(cli: CkCli, folder: Path, python: str, commit: str) -> None:
    """An install of the P3 build, as `ck install` leaves it (artifact/artifact.json, src/), registered by `ck detect`,
    whose interpreter is ``python``."""
    root = folder / "artifact"
    (root / "src").mkdir(parents=True)
    manifest = Manifest(build="p3", package="sysml19-p3-github", source={}, commit=commit, version="1.1.0", cuda="",
                        cudnn=False, make=[], installed_at="2026-11-27T00:00:00Z", python=python)
    (root / MANIFEST).write_text(json.dumps(manifest.to_dict()))
    cli("detect", "soft:tool.p3", f"--search_dirs={root}", "--search_depth=1", "--quiet", check=True)


def test_an_emulated_run_on_the_authors_build_is_our_train_py_in_its_interpreter_on_ps_lites_own_van(ck, tmp_path):
    """Emulated compute on one of the authors' builds: what our run gives their interpreter. The registered build's
    interpreter here is the session's stock MXNet (their fork takes over an hour to build); how their MXNet 1.1 runs
    it is measured in docs/notebook/emulation.md ("Both P3 implementations")."""
    stock_prefix = stock_engine_prefix(ck)
    cli = world(tmp_path / "ck", stock_prefix)
    registered_build(cli, tmp_path / "install", f"{stock_prefix}/bin/python", "c647954" * 6)
    run_dir = tmp_path / "run"
    job = ["--cmd_key=resnet", "--env.VARIANT=p3", "--env.ENGINE=artifact", "--env.NUM_WORKERS=2",
           "--env.NUM_SERVERS=1", "--env.BATCH_SIZE=8", "--env.NUM_BATCHES=5", "--env.DISP_BATCHES=2",
           "--env.COMPUTE=emulated"]
    proc, out = cli.run_p3(run_dir, *job)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = out["characteristics"]
    assert (result["engine"], result["variant"], result["compute"]) == ("sysml19-p3@c647954c6479", "p3", "emulated")
    assert result["emulated_wait_s_per_iter"] > 0 and result["params_in_sync"] is True
    assert result.get("comm_s_per_iter") is None and result.get("p3_slice_size") is None  # no probes, no stock knobs
    spec = run_spec(run_dir)
    command = spec["plan"]["command"]
    assert command[:2] == [f"{stock_prefix}/bin/python", "train.py"]
    assert command[command.index("--ps-van") + 1] == "zmq" and command[command.index("--comm-probes") + 1] == "0"
    assert not any(key.startswith(("DMLC_PS_", "MXNET_KVSTORE")) for key in spec["plan"]["extra_env"])
    worker_log = (run_dir / "logs" / "worker-0.log").read_text()
    assert "ps-van: role=worker van=zmq" in worker_log and "p3-comm:" not in worker_log

    refused, _ = cli.run_p3(tmp_path / "busy", *job, "--env.COMPUTE_WAIT=busy")
    errors = [line for line in (refused.stdout + refused.stderr).splitlines() if line.startswith("p3: error:")]
    assert refused.returncode != 0 and len(errors) == 1 and "COMPUTE_WAIT=busy" in errors[0]
    assert "Traceback" not in refused.stdout + refused.stderr


def test_an_emulated_sockeye_run_on_the_authors_build_trains_its_profiles_arrays_with_train_py(ck, tmp_path):
    """Their Sockeye scripts cannot emulate either: emulated Sockeye is our train.py over the profile's arrays in
    their interpreter (here, as above, the session's stock MXNet standing in for it), with no Sockeye needed."""
    stock_prefix = stock_engine_prefix(ck)
    cli = world(tmp_path / "ck", stock_prefix)
    registered_build(cli, tmp_path / "install", f"{stock_prefix}/bin/python", "c647954" * 6)
    run_dir = tmp_path / "run"
    proc, out = cli.run_p3(run_dir, "--cmd_key=sockeye", "--env.VARIANT=p3", "--env.ENGINE=artifact",
                           "--env.NUM_WORKERS=2", "--env.NUM_SERVERS=1", "--env.NUM_BATCHES=5", "--env.DISP_BATCHES=2",
                           "--env.COMPUTE=emulated", "--env.DILATION=4")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = out["characteristics"]
    assert (result["engine"], result["model"], result["compute"]) == ("sysml19-p3@c647954c6479", "sockeye", "emulated")
    assert result["params_in_sync"] is True and result["throughput_samples_per_sec"] > 0
    command = run_spec(run_dir)["plan"]["command"]
    assert command[:4] == [f"{stock_prefix}/bin/python", "train.py", "--network", "profile"]
