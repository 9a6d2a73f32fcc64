"""`ck reproduce / report / export / import study:sysml19-p3` through the real ck CLI, with real MXNet runs.

Runs are tiny (resnet, 3x32x32, batch 8, 6 batches, Speedometer every 2) through
`--env.*`, which the sweep passes to every run and records.
"""
import hashlib
import json
import os
import signal
import subprocess
import tarfile
from pathlib import Path

import pytest

from reprokit.run.procscan import run_processes
from support.runs import wait_for
from support.testbed import make_testbed

TINY = ["--env.NUM_BATCHES=6", "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8", "--env.WORKER_THREADS=1"]
STUDY = "study:sysml19-p3"


def records_in(store: Path) -> dict[str, Path]:
    folder = store / "records"
    return {p.stem: p for p in folder.glob("*.json") if not p.name.startswith(".")} if folder.exists() else {}


def training(store: Path, record_id_part: str):
    """The run folder of an attempt of that run whose worker trains; its run id."""
    for spec in store.glob(f"runs/*{record_id_part}*/attempt-*/p3-run.json"):
        log = spec.parent / "logs" / "worker-1.log"
        if log.exists() and "worker rank" in log.read_text():
            return spec.parent, json.loads(spec.read_text())["plan"]["run_id"]
    return None


def no_guard_left(store: Path) -> bool:
    """No process of ours (guard, ck, launcher) still has a command line naming this store."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(store).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return False
        except OSError:
            pass
    return True


def fingerprint(paths):
    return {p.name: (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths}


def test_sweep_killed_between_and_during_runs_resumes_without_losing_or_rewriting_anything(ck, tmp_path):
    store = tmp_path / "store"
    args = ["reproduce", STUDY, f"--store={store}", "--models=resnet", "--variants=baseline,p3", "--repetitions=1", *TINY]

    # 1. SIGKILL between runs: as soon as the first record is stored.
    sweep = ck.popen(*args, new_session=True)
    try:
        assert wait_for(lambda: len(records_in(store)) >= 1 or sweep.poll() is not None, timeout=300, interval=0.01)
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=30)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert len(records_in(store)) == 1, sweep.stdout.read()
    first = fingerprint(records_in(store).values())
    assert wait_for(lambda: no_guard_left(store), timeout=30), "a run outlived its killed sweep"
    [sweep_file] = (store / "sweeps").glob("*.json")
    sweep_id = sweep_file.stem

    # 2. SIGKILL in the middle of the second run: its guard tears the run down.
    sweep = ck.popen("reproduce", STUDY, f"--store={store}", "--resume", new_session=True)
    try:
        found = wait_for(lambda: training(store, "--p3--"), timeout=300)
        assert found, "the second run never started training"
        killed_dir, run_id = found
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=30)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert wait_for(lambda: not run_processes(run_id) and no_guard_left(store), timeout=40), \
        "MXNet roles or the guarded ck outlived the sweep"
    assert len(records_in(store)) == 1

    # 3. SIGTERM in the middle of the second run: the sweep says how to continue and exits non-zero.
    sweep = ck.popen("reproduce", STUDY, f"--store={store}", "--resume", new_session=True)
    try:
        found = wait_for(lambda: (lambda t: t if t and t[0] != killed_dir else None)(training(store, "--p3--")),
                         timeout=300)
        assert found, "the resumed second run never started training"
        os.kill(sweep.pid, signal.SIGTERM)
        output, _ = sweep.communicate(timeout=60)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 1
    assert f"stopped by SIGTERM; the runs stored are kept; continue with: ck reproduce {STUDY} --resume={sweep_id}" in output
    assert wait_for(lambda: not run_processes(found[1]), timeout=20)

    # 4. Resume to the end: the first record untouched, the second run stored once, every attempt's logs kept.
    proc = ck("reproduce", STUDY, f"--store={store}", f"--resume={sweep_id}", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "resuming sweep" in proc.stdout and "1 of 2 run(s) already stored" in proc.stdout
    stored = records_in(store)
    assert sorted(stored) == sorted([f"{sweep_id}--resnet--baseline--native--r1", f"{sweep_id}--resnet--p3--native--r1"])
    assert {k: v for k, v in fingerprint(stored.values()).items() if k in first} == first
    attempts = sorted(p.name for p in (store / "runs" / f"{sweep_id}--resnet--p3--native--r1").iterdir())
    assert len(attempts) >= 3 and killed_dir.name in attempts and found[0].name in attempts[:-1]
    assert all("worker rank" in (d / "logs" / "worker-1.log").read_text() for d in (killed_dir, found[0]))
    record = json.loads(stored[f"{sweep_id}--resnet--p3--native--r1"].read_text())
    assert record["status"] == "ok" and record["result"]["throughput_samples_per_sec"] > 0
    assert record["run_folder"].endswith(attempts[-1])
    prov = record["provenance"]
    assert prov["env_overrides"]["NUM_BATCHES"] == "6" and prov["env_overrides"]["VARIANT"] == "p3"
    assert prov["command"][1:3] == ["run", "program:p3"] and "--env.VARIANT=p3" in prov["command"]
    assert prov["mxnet_version"] == "1.9.1" and prov["ck_version"] == "2.6.4" and prov["hosts"] == ["127.0.0.1"]
    assert [r["kind"] for r in prov["role_plan"]].count("worker") == 2
    assert prov["bandwidth"] == "native" and prov["bandwidth_shaped"] is False
    assert (store / "report" / "report.html").exists()
    assert "not testable here" in (store / "report" / "report.md").read_text()


@pytest.fixture(scope="module")
def one_run_store(ck, tmp_path_factory):
    """A store with one real run (resnet baseline): the other evaluator in the import test."""
    store = tmp_path_factory.mktemp("evaluator-b") / "store"
    proc = ck("reproduce", STUDY, f"--store={store}", "--models=resnet", "--variants=baseline", "--repetitions=1",
              *TINY, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return store


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "report" not in p.parts}


def test_export_import_round_trip_and_refused_bundles_through_ck(ck, one_run_store, tmp_path):
    source = tmp_path / "source-store"
    proc = ck("reproduce", STUDY, f"--store={source}", "--models=resnet", "--variants=baseline", "--repetitions=1",
              *TINY, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    bundle = tmp_path / "evaluator-a.tar.gz"
    proc = ck("export", STUDY, f"--store={source}", f"--out={bundle}")
    assert proc.returncode == 0 and "exported 1 run(s)" in proc.stdout, proc.stdout + proc.stderr

    before = tree(one_run_store)
    tampered = tmp_path / "tampered.tar.gz"
    with tarfile.open(bundle) as src, tarfile.open(tampered, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name.endswith("p3-result.json"):
                data = data.replace(b'"run_success": true', b'"run_success": false')
            member.size = len(data)
            dst.addfile(member, __import__("io").BytesIO(data))
    proc = ck("import", "study", f"--in={tampered}", f"--store={one_run_store}")
    assert proc.returncode == 1
    assert "p3-result.json is " in proc.stdout  # its size is not the manifest's
    assert "(corrupted or tampered with); nothing was imported" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    proc = ck("import", "study", f"--in={tmp_path / 'missing.tar.gz'}", f"--store={one_run_store}")
    assert proc.returncode == 1 and "refusing bundle" in proc.stdout
    assert tree(one_run_store) == before

    proc = ck("import", STUDY, f"--in={bundle}", f"--store={one_run_store}")
    assert proc.returncode == 0 and "imported 1 run(s)" in proc.stdout, proc.stdout + proc.stderr
    proc = ck("report", STUDY, f"--store={one_run_store}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    md = (one_run_store / "report" / "report.md").read_text()
    setups = {line.split("|")[1].strip() for line in md.splitlines() if line.startswith("| embedded default [")}
    assert len(setups) == 2 and "embedded default [here]" in setups  # local and imported side by side
    origin_a = json.loads((source / "origin.json").read_text())["id"]
    assert f"{origin_a} (imported)" in md


@pytest.mark.root
def test_sweep_on_a_testbed_shapes_each_bandwidth_and_restores_the_links(ck, tmp_path):
    """Needs root, iproute2 and sshd (CI has them): a 2-host testbed, links shaped per configuration; then an
    emulated sweep (--emulate) into the same store: its links at the bandwidth divided by k, its runs kept out of
    every measured figure and shown as the claim's emulated figure."""
    make_testbed(ck, "stb2", 2)
    store = tmp_path / "store"

    def qdisc() -> str:
        return subprocess.run(["ip", "netns", "exec", "rk-stb2-h2", "tc", "qdisc", "show", "dev", "eth0"],
                              capture_output=True, text=True, timeout=10).stdout

    try:
        sweep = ck.popen("reproduce", STUDY, f"--store={store}", "--target=stb2", "--models=resnet",
                         "--bandwidths=1500mbit", "--variants=baseline,p3", "--repetitions=1", "--profile=smoke",
                         *TINY)
        shaped = wait_for(lambda: "rate 1500Mbit" in qdisc() or sweep.poll() is not None, timeout=300, interval=0.2)
        output, _ = sweep.communicate(timeout=600)
        assert sweep.returncode == 0, output[-3000:]
        assert shaped and "rate 1500Mbit" not in qdisc(), "links not shaped during the runs, or not restored after"
        emulated = ck.popen("reproduce", STUDY, f"--store={store}", "--target=stb2", "--emulate=v100",
                            "--dilation=2", "--models=resnet",
                            "--repetitions=1", "--profile=smoke", *TINY)
        divided = wait_for(lambda: "rate 2Gbit" in qdisc() or emulated.poll() is not None, timeout=300,
                           interval=0.2)
        emulated_output, _ = emulated.communicate(timeout=600)
        assert emulated.returncode == 0, emulated_output[-3000:]
        assert divided and "rate 2Gbit" not in qdisc(), "4gbit / 2 not shaped during the runs, or not restored"
    finally:
        if sweep.poll() is None:
            sweep.kill()
        ck("testbed", "cluster:stb2", "--down", timeout=60)
        ck("rm", "machine:stb2", "--force")
    assert "testbed stb2: each host's egress is limited with tc" in output
    assert "study: emulated compute (v100 profile, k=2)" in emulated_output
    every = [json.loads(p.read_text()) for p in records_in(store).values()]
    stored = [r for r in every if r["config"]["bandwidth"] == "1500mbit"]
    emulated_runs = [r for r in every if r["config"]["bandwidth"] == "4gbit"]
    assert len(every) == 4 and sorted(r["config"]["variant"] for r in stored) == ["baseline", "p3"]
    # only the claim's own variant and baseline at its bandwidth, not every variant the claims name
    assert sorted(r["config"]["variant"] for r in emulated_runs) == ["baseline", "p3"]
    for r in emulated_runs:
        assert r["status"] == "ok", r["failure_reason"]
        assert r["result"]["compute"] == "emulated" and r["result"]["dilation"] == 2.0
        assert r["provenance"]["links_shaped_to"] == "2000000000bit"
    report = json.loads((store / "report" / "report.json").read_text())
    assert {row["bandwidth"] for row in report["speedups"]} == {"1500mbit"}  # nothing emulated is measured
    [resnet_4gbit] = [v for v in report["labelled"] if v["claim"] == "resnet-4gbit"]
    # Run at the V100's compute, not the paper's GPU's: shown apart, naming its GPU, never the claim's verdict.
    assert resnet_4gbit["emulated"].startswith("not run: ") and "--emulate=p4000" in resnet_4gbit["emulated"]
    other = resnet_4gbit["other_hardware"]
    assert "x [" in other and ", n=1, " in other and "V100 compute emulated" in other
    for r in stored:
        assert r["status"] == "ok", r["failure_reason"]
        assert r["provenance"]["bandwidth_shaped"] is True and r["config"]["bandwidth"] == "1500mbit"
        assert r["config"]["target"]["kind"] == "testbed" and r["provenance"]["hosts"] == ["10.77.0.1", "10.77.0.2"]
    md = (store / "report" / "report.md").read_text()
    assert "the claim is for 4 machines; this target has 2" in md


@pytest.mark.root
def test_quick_on_a_testbed_probes_chooses_bandwidths_records_timelines_and_draws_them(ck, tmp_path):
    """Needs root: `--quick` on a 2-host testbed (resnet, 1 repetition, tiny runs): a baseline probe on the unshaped
    links, bandwidths chosen from it and stored in the sweep, timelines on repetition 1, the report's timeline plot."""
    make_testbed(ck, "stq2", 2)
    store = tmp_path / "store"
    try:
        proc = ck("reproduce", STUDY, f"--store={store}", "--target=stq2", "--quick", "--models=resnet",
                  "--repetitions=1", *TINY, timeout=1200)
        qdisc = subprocess.run(["ip", "netns", "exec", "rk-stq2-h2", "tc", "qdisc", "show", "dev", "eth0"],
                               capture_output=True, text=True, timeout=10).stdout
    finally:
        ck("testbed", "cluster:stq2", "--down", timeout=60)
        ck("rm", "machine:stq2", "--force")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "study: resnet: a baseline probe on the unshaped links" in proc.stdout
    assert "study: note: n=1 < 3 runs per configuration: the report will give no verdict" in proc.stdout
    assert "tbf" not in qdisc, "the links were not restored after the sweep"
    [sweep_file] = (store / "sweeps").glob("*.json")
    sweep = json.loads(sweep_file.read_text())
    [choice] = sweep["choices"]
    assert choice["model"] == "resnet" and choice["parameters"] == 25575912 and choice["hosts"] == 2
    assert choice["bandwidths"] and choice["compute_s_per_iter"] > 0 and choice["comm_s_per_iter"] > 0
    assert (store / choice["probe_run"] / "p3-result.json").exists()
    stored = [json.loads(p.read_text()) for p in records_in(store).values()]
    assert sorted((r["config"]["bandwidth"], r["config"]["variant"]) for r in stored) == \
        sorted((b, v) for b in choice["bandwidths"] for v in ("baseline", "baseline-worker-update", "p3"))
    for r in stored:
        assert r["status"] == "ok", r["failure_reason"]
        assert r["provenance"]["env_overrides"]["TIMELINE"] == "1" and r["result"]["timelines"]
        assert r["result"]["compute_s_per_iter"] > 0
    report = json.loads((store / "report" / "report.json").read_text())
    assert report["timeline"]["model"] == "resnet" and report["bandwidth_choices"][0]["model"] == "resnet"
    assert (store / "report" / "plots" / "timeline.png").exists()
    [verdict] = [v for v in report["verdicts"] if v["claim"] == "resnet-up-to-25"]
    assert verdict["verdict"] == "inconclusive" and verdict["reason"].startswith("CPU testbed")
    assert all(v["verdict"] == "not testable here" for v in report["verdicts"] if v["claim"] == "resnet-4gbit")
