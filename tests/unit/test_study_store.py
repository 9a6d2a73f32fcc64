"""The results store and bundles on constructed records (no ck): write-once records, attempts, export/import."""
import hashlib
import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from reprokit.core.errors import UserError
from reprokit.study.analysis.analyse import analyse
from reprokit.study.store.bundle import export, import_bundle
from reprokit.study.store.records import RECORD_FORMAT, AlreadyStored, Provenance, Record, Store, write_once
from reprokit.study.sweep.provenance import run_provenance, sweep_part
from reprokit.study.sweep.runner import RunOutcome
from reprokit.vocabulary import RunStatus
from support.study_data import ALL_MODELS, TESTBED4, records, study


def snapshot(root: Path) -> dict:
    """Every file under root with the hash of its content: to show that nothing changed."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def filled_store(root: Path, origin_host: str) -> Store:
    store = Store(root, "sysml19-p3")
    origin = store.origin()
    for record in records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0]):
        record_id = record.record_id.replace("--o-local", "")
        run = store.new_attempt_dir(record_id)
        (run / "logs").mkdir()
        (run / "logs" / "worker-0.log").write_text(f"Speed: 1 samples/sec from {origin_host}\n")
        store.put_record(replace(record, record_id=record_id, origin=origin, run_folder=str(run.relative_to(root)),
                                 provenance=Provenance(repo_revision="abc", command_line="ck run program:p3 ...",
                                                       hosts=("10.77.0.1",))))
    return store


def test_records_are_written_once_and_never_replaced(tmp_path):
    path = tmp_path / "records" / "r1.json"
    write_once(path, {"value": 1})
    with pytest.raises(AlreadyStored):
        write_once(path, {"value": 2})
    assert json.loads(path.read_text()) == {"value": 1}
    assert [p.name for p in path.parent.iterdir()] == ["r1.json"]  # no temporary file left behind


def test_a_writer_killed_mid_write_leaves_no_visible_record(tmp_path):
    store = filled_store(tmp_path, "a")
    (store.records_dir / ".half.json.123.abcd.tmp").write_text('{"record_id": "half", "sta')  # killed mid-write
    (store.records_dir / ".half2.json").write_text("{")
    assert len(store.local_records()) == 6


STORED_RECORD = {  # as `ck reproduce` writes a record (provenance shortened)
    "format": RECORD_FORMAT, "record_id": "20250101-120000-abcdef--resnet--p3--300mbit--r1", "study": "sysml19-p3",
    "sweep_id": "20250101-120000-abcdef", "origin": {"id": "0123456789abcdef", "host": "vm", "study": "sysml19-p3"},
    "config": {"model": "resnet", "variant": "p3", "bandwidth": "300mbit", "repetition": 1, "profile": "smoke",
               "target": {"name": "stb2", "label": "stb2", "kind": "testbed", "hosts": ["10.77.0.1", "10.77.0.2"],
                          "shaping": True, "link_capacity": None, "testbed": "stb2"}, "engine": "embedded"},
    "status": "ok", "failure_reason": None,
    "result": {"run_success": True, "throughput_samples_per_sec": 12.5, "params_in_sync": True},
    "provenance": {"bandwidth": "300mbit", "bandwidth_shaped": True, "ck_exit_code": 0, "hosts": ["10.77.0.1"]},
    "run_folder": "runs/20250101-120000-abcdef--resnet--p3--300mbit--r1/attempt-1",
}


def test_a_records_result_reads_as_a_result_whatever_keys_it_has():
    bare = Record.from_dict({**STORED_RECORD, "result": {"throughput_samples_per_sec": 3.0, "engine_own_key": 1}})
    assert not bare.run_result.run_success and bare.run_result.throughput_samples_per_sec == 3.0  # no run_success
    assert Record.from_dict({**STORED_RECORD, "status": "failed", "result": None}).run_result is None


def test_a_stored_record_reads_as_a_typed_record_and_writes_back_byte_for_byte(tmp_path):
    path = tmp_path / "records" / f"{STORED_RECORD['record_id']}.json"
    write_once(path, STORED_RECORD)
    store = Store(tmp_path, "sysml19-p3")
    [record] = store.local_records()
    assert record.ok and record.config.target.kind == "testbed" and record.config.run.label() == "resnet p3 @ 300mbit #1"
    assert record.origin.host == "vm" and record.result.stored["throughput_samples_per_sec"] == 12.5
    typed = record.run_result  # the same result as reprokit.run.result.Result; what is stored stays as stored
    assert typed.run_success and typed.throughput_samples_per_sec == 12.5 and typed.params_in_sync is True
    assert record.to_dict() == STORED_RECORD
    again = Store(tmp_path / "again", "sysml19-p3")
    again.put_record(record)
    assert again.record_path(record.record_id).read_bytes() == path.read_bytes()


def test_a_records_provenance_reads_typed_and_writes_back_as_stored():
    data = json.loads(json.dumps(STORED_RECORD))
    data["provenance"].update(duration_s=61.5, started_at="2026-01-01T10:00:00+0100 (1767258000.000)",
                              env_overrides={"COMPUTE": "emulated", "DILATION": "20", "COMPUTE_PROFILE": "p4000"},
                              links_shaped_to="15mbit", repo_revision="abc", mxnet_version=None, own={"x": [1]})
    record = Record.from_dict(data)
    p = record.provenance
    assert (p.duration_s, p.links_shaped_to, p.repo_revision, p.mxnet_version, p.engine) == (61.5, "15mbit", "abc",
                                                                                             None, None)
    assert p.started_at.startswith("2026-01-01T10:00:00") and p.env_overrides["COMPUTE_PROFILE"] == "p4000"
    assert record.emulated and record.dilation == 20.0 and record.gpu == "p4000"
    assert record.to_dict() == data  # keys the study does not read, and nulls, kept as stored
    odd = Record.from_dict({**data, "provenance": {"duration_s": True, "env_overrides": "COMPUTE=emulated"}})
    assert odd.provenance.duration_s is None and odd.provenance.env_overrides is None and not odd.emulated


def test_a_read_provenance_changed_writes_its_fields_and_keeps_the_keys_only_other_versions_know():
    data = json.loads(json.dumps(STORED_RECORD))
    data["provenance"].update(own={"x": [1]}, duration_s=True)
    changed = replace(Record.from_dict(data).provenance, repo_revision="def")
    assert changed.to_dict()["own"] == {"x": [1]} and changed.to_dict()["repo_revision"] == "def"
    assert changed.to_dict()["hosts"] == ["10.77.0.1"] and changed.to_dict()["duration_s"] is None


def test_the_provenance_a_sweep_builds_for_a_run_is_stored_with_the_keys_the_sweep_always_wrote(tmp_path):
    """Typed from the sweep on, the record's provenance is the JSON object sweeps stored before it was."""
    (tmp_path / "p3-run.json").write_text(json.dumps({
        "engine": {"name": "mxnet-1.9.1-cpu", "env_uid": "u1", "python": "/e/bin/python"},
        "plan": {"hosts": ["10.77.0.1", "10.77.0.2"], "roles": [{"kind": "worker", "index": 0, "host": "10.77.0.1",
                                                                  "port": 9000}]}}))
    environment = Provenance(repo_revision="abc", repo_dirty=None, ck_version="2.6.4", python_version="3.11.7",
                             controller_host="h", platform="Linux-6.1")
    run = run_provenance(environment, tmp_path, ["ck", "run", "program:p3"], RunOutcome(RunStatus.OK, None, None,
                                                                                       1000.0, 1061.5, 0),
                         {"PROFILE": "smoke"})
    emulated = type("Sweep", (), {"dilation": 20.0, "link_rate": lambda self, bandwidth: "15mbit"})()
    stored = sweep_part(run, emulated, TESTBED4, "300mbit", True, "3.11.7").to_dict()
    assert stored.pop("started_at").endswith("(1000.000)") and stored.pop("ended_at").endswith("(1061.500)")
    assert stored == {
        "repo_revision": "abc", "repo_dirty": None, "ck_version": "2.6.4", "python_version": "3.11.7",
        "controller_host": "h", "platform": "Linux-6.1", "engine": "mxnet-1.9.1-cpu", "mxnet_version": "1.9.1",
        "engine_env_uid": "u1", "engine_python": "/e/bin/python", "engine_python_version": "3.11.7",
        "hosts": ["10.77.0.1", "10.77.0.2"], "role_plan": [{"kind": "worker", "index": 0, "host": "10.77.0.1"}],
        "env_overrides": {"PROFILE": "smoke"}, "duration_s": 61.5, "command": ["ck", "run", "program:p3"],
        "command_line": "ck run program:p3", "ck_exit_code": 0, "bandwidth": "300mbit", "bandwidth_shaped": True,
        "target": TESTBED4.to_dict(), "links_shaped_to": "15mbit"}
    measured = type("Sweep", (), {"dilation": 1.0})()
    stored = sweep_part(run, measured, TESTBED4, "native", True, None).to_dict()  # no interpreter named, not shaped
    assert "engine_python_version" not in stored and "links_shaped_to" not in stored
    assert stored["bandwidth_shaped"] is False


def test_runs_on_fairly_shared_links_say_so_in_their_record_and_are_a_setup_of_their_own(tmp_path):
    fair = json.loads(json.dumps(STORED_RECORD))
    fair["record_id"] = fair["record_id"].replace("r1", "r2")
    fair["config"]["repetition"] = 2
    fair["run_folder"] = fair["run_folder"].replace("r1", "r2")
    fair["config"]["target"].update(link_sharing="fair", label=f"{fair['config']['target']['name']} (links shared "
                                                                f"fairly)")
    write_once(tmp_path / "records" / f"{STORED_RECORD['record_id']}.json", STORED_RECORD)
    write_once(tmp_path / "records" / f"{fair['record_id']}.json", fair)
    read = {r.record_id: r for r in Store(tmp_path, "sysml19-p3").local_records()}
    shared = read[fair["record_id"]]
    assert shared.config.target.link_sharing == "fair" and shared.to_dict() == fair  # written back as read
    assert read[STORED_RECORD["record_id"]].config.target.link_sharing == "fifo"  # the default, not written
    assert "link_sharing" not in read[STORED_RECORD["record_id"]].to_dict()["config"]["target"]
    summary = analyse(study(), list(read.values()), ALL_MODELS).summary
    assert sorted(summary["setup"]) == ["stb2 (links shared fairly) [here]", "stb2 [here]"]  # never pooled


def test_runs_on_hosts_with_another_tcp_say_so_in_their_record_and_are_a_setup_of_their_own(tmp_path):
    cubic = json.loads(json.dumps(STORED_RECORD))
    cubic["record_id"] = cubic["record_id"].replace("r1", "r2")
    cubic["config"]["repetition"] = 2
    cubic["run_folder"] = cubic["run_folder"].replace("r1", "r2")
    cubic["config"]["target"].update(link_sharing="fair", tcp="cubic",
                                     label=f"{cubic['config']['target']['name']} (links shared fairly, TCP cubic)")
    write_once(tmp_path / "records" / f"{STORED_RECORD['record_id']}.json", STORED_RECORD)
    write_once(tmp_path / "records" / f"{cubic['record_id']}.json", cubic)
    read = {r.record_id: r for r in Store(tmp_path, "sysml19-p3").local_records()}
    assert read[cubic["record_id"]].config.target.tcp == "cubic" and read[cubic["record_id"]].to_dict() == cubic
    assert "tcp" not in read[STORED_RECORD["record_id"]].to_dict()["config"]["target"]  # the machine's, not written
    summary = analyse(study(), list(read.values()), ALL_MODELS).summary
    assert sorted(summary["setup"]) == ["stb2 (links shared fairly, TCP cubic) [here]", "stb2 [here]"]  # never pooled
    bad = json.loads(json.dumps(cubic))
    bad["config"]["target"]["tcp"] = "../cubic"
    write_once(tmp_path / "bad" / "records" / f"{bad['record_id']}.json", bad)
    with pytest.raises(UserError, match="tcp"):
        Store(tmp_path / "bad", "sysml19-p3").local_records()


def test_records_stored_before_engines_read_as_embedded_unless_their_engine_was_the_authors_build(tmp_path):
    old = json.loads(json.dumps(STORED_RECORD))
    del old["config"]["engine"]  # as records were stored before sweeps had engines
    write_once(tmp_path / "records" / f"{old['record_id']}.json", old)
    artifact = json.loads(json.dumps(old))
    artifact["record_id"] += "-artifact"
    artifact["run_folder"] = f"runs/{artifact['record_id']}/attempt-1"  # a record's run folder is its own
    artifact["provenance"]["engine"] = "sysml19-p3-baseline@c647954abcde"  # ENGINE was empty: the artifact ran
    write_once(tmp_path / "records" / f"{artifact['record_id']}.json", artifact)
    read = {r.record_id: r for r in Store(tmp_path, "sysml19-p3").local_records()}
    first, second = read[old["record_id"]], read[artifact["record_id"]]
    assert (first.config.engine, second.config.engine) == ("embedded", "artifact")
    assert first.config.run.record_id("20250101-120000-abcdef") == old["record_id"]  # resumable under its old name
    analysis = analyse(study(), [first], ALL_MODELS)
    assert list(analysis.summary["engine"]) == ["embedded"]


@pytest.mark.parametrize("change, message", [
    (lambda r: r["config"].update(engine="gpu"), "config.engine must be one of embedded, artifact; got 'gpu'"),
    (lambda r: r.pop("config"), "has no 'config'"),
    (lambda r: r["config"]["target"].pop("kind"), "config.target has no 'kind'"),
    (lambda r: r.update(status="maybe"), "status must be one of ok, failed; got 'maybe'"),
    (lambda r: r["result"].update(throughput_samples_per_sec="12.5"),
     "result.throughput_samples_per_sec must be a finite number, got '12.5'"),
    (lambda r: r["config"].update(model="../../../../tmp/x"), "config.model must be a plain name"),
    (lambda r: r.update(format="reprokit-study-run/9"), "has format 'reprokit-study-run/9', not reprokit-study-run/1"),
    (lambda r: r["provenance"].update(env_overrides={"COMPUTE": "emulated", "DILATION": "fast"}),
     "provenance.env_overrides.DILATION must be a number above 0 and at most 1000, got 'fast'"),
    (lambda r: r["config"]["target"].update(link_sharing="even"),
     "config.target.link_sharing must be one of fifo, fair; got 'even'"),
])
def test_a_malformed_record_is_one_line_naming_its_file(tmp_path, change, message):
    record = json.loads(json.dumps(STORED_RECORD))
    change(record)
    write_once(tmp_path / "records" / "r.json", record)
    with pytest.raises(UserError) as refused:
        Store(tmp_path, "sysml19-p3").all_records()
    assert str(refused.value).startswith(f"run record {tmp_path / 'records' / 'r.json'}") and message in str(refused.value)


def test_attempt_folders_keep_earlier_attempts(tmp_path):
    store = Store(tmp_path, "sysml19-p3")
    first, second = store.new_attempt_dir("r1"), store.new_attempt_dir("r1")
    assert (first.name, second.name) == ("attempt-1", "attempt-2")


def test_origin_is_stable_and_a_store_of_another_study_is_refused(tmp_path):
    assert Store(tmp_path, "sysml19-p3").origin() == Store(tmp_path, "sysml19-p3").origin()
    with pytest.raises(UserError, match="holds results of study 'sysml19-p3'"):
        Store(tmp_path, "other").origin()


def test_export_import_round_trip_keeps_provenance_and_shows_runs_side_by_side(tmp_path):
    source = filled_store(tmp_path / "a", "host-a")
    bundle = export(source, tmp_path / "a.tar.gz")["path"]
    dest = filled_store(tmp_path / "b", "host-b")
    done = import_bundle(dest, bundle)
    assert not done["already"] and done["records"] == 6
    imported = dest.imported_records()
    assert {r.origin.id for r in imported} == {source.origin().id}
    assert {r.imported_from for r in imported} == {done["path"].name}
    assert imported[0].provenance.command_line == "ck run program:p3 ..."
    log = next(done["path"].rglob("worker-0.log")).read_text()
    assert "host-a" in log
    analysis = analyse(study(), dest.all_records(), ALL_MODELS)
    assert len(analysis.setups) == 2 and sorted(s.imported for s in analysis.setups) == [False, True]
    before = snapshot(dest.root)
    assert import_bundle(dest, bundle)["already"]  # a second import changes nothing
    assert snapshot(dest.root) == before
    with pytest.raises(UserError, match="exported from this store"):
        import_bundle(source, bundle)


def rewrite_member(bundle: Path, out: Path, name: str, change) -> None:
    with tarfile.open(bundle, "r:gz") as src, tarfile.open(out, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name == name:
                data = change(data)
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))


def test_tampered_corrupted_and_foreign_bundles_are_refused_and_change_nothing(tmp_path):
    source = filled_store(tmp_path / "a", "host-a")
    bundle = export(source, tmp_path / "a.tar.gz")["path"]
    dest = filled_store(tmp_path / "b", "host-b")
    before = snapshot(dest.root)
    record = next(n for n in tarfile.open(bundle).getnames() if n.startswith("records/"))

    tampered = tmp_path / "tampered.tar.gz"
    rewrite_member(bundle, tampered, record, lambda d: d.replace(b'"throughput_samples_per_sec": 1', b'"throughput_samples_per_sec": 9'))
    assert tarfile.open(tampered).extractfile(record).read() != tarfile.open(bundle).extractfile(record).read()
    with pytest.raises(UserError, match="does not match its checksum"):
        import_bundle(dest, tampered)

    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(bundle.read_bytes()[:-200])
    with pytest.raises(UserError, match="the archive is truncated"):
        import_bundle(dest, truncated)

    foreign = tmp_path / "foreign.tar.gz"
    with tarfile.open(foreign, "w:gz") as tar:
        data = b"hello"
        info = tarfile.TarInfo("notes.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(UserError, match="does not start with manifest.json"):
        import_bundle(dest, foreign)

    other_study = tmp_path / "other.tar.gz"
    rewrite_member(bundle, other_study, "manifest.json",
                   lambda d: d.replace(b'"study": "sysml19-p3"', b'"study": "other-paper"'))
    with pytest.raises(UserError, match="results of study 'other-paper'"):
        import_bundle(dest, other_study)

    escaping = tmp_path / "escaping.tar.gz"
    with tarfile.open(escaping, "w:gz") as tar:
        info = tarfile.TarInfo("records/../../evil.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    with pytest.raises(UserError, match="does not start with manifest.json"):
        import_bundle(dest, escaping)

    assert snapshot(dest.root) == before
    assert not list(dest.imported_dir.glob("*")) if dest.imported_dir.exists() else True


def test_bundles_leave_the_workers_timelines_out_and_count_them(tmp_path):
    source = filled_store(tmp_path / "a", "host-a")
    run = next(source.runs_dir.glob("*/attempt-1"))
    (run / "timeline-worker-0.json").write_text('{"traceEvents": []}' + " " * 1000)
    (run / "timeline-worker-1.json").write_text('{"traceEvents": []}')
    done = export(source, tmp_path / "a.tar.gz")
    assert done["left_out"] == {"timelines": 2, "bytes": 1019 + 19}
    with tarfile.open(done["path"]) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert not [n for n in names if "timeline" in n] and "runs/" + str(run.relative_to(source.runs_dir)) + \
        "/logs/worker-0.log" in names
    assert manifest["left_out"] == done["left_out"]
    dest = filled_store(tmp_path / "b", "host-b")
    assert import_bundle(dest, done["path"])["records"] == 6  # the manifest lists exactly what the bundle holds


def test_a_run_whose_own_text_carries_terminal_escapes_or_a_long_log_is_stored_readable(tmp_path):
    store = Store(tmp_path, "sysml19-p3")
    record = Store(tmp_path / "read", "sysml19-p3").read_record(write_json_record(tmp_path / "r.json"))
    failure = "x" * 9000 + "\nworker#1 said \x1b[31mERROR\x1b[0m: the cause at the end"
    store.put_record(replace(record, status="failed", failure_reason=failure,
                             result={**record.result.stored, "warnings": ["roles \x07still running"], "overlap": float("nan")}))
    [stored] = store.local_records()  # every later read checks the schema: it must pass
    assert "\\x1b[31mERROR" in stored.failure_reason and stored.failure_reason.endswith("the cause at the end")
    assert len(stored.failure_reason) <= 4000 and stored.result.stored["warnings"] == ["roles \\x07still running"]
    assert stored.result.stored["overlap"] is None and stored.run_result.overlap is None


def write_json_record(path: Path) -> Path:
    path.write_text(json.dumps(STORED_RECORD))
    return path
