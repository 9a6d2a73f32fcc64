"""The schema records and bundle manifests are checked with (no ck): what a record may hold, in one line."""
import json
import math

import pytest
from test_study_store import STORED_RECORD

from reprokit.core import schema as s
from reprokit.core.errors import UserError
from reprokit.study.store import identity
from reprokit.study.store.bundle import MANIFEST_SCHEMA, member_name_ok
from reprokit.study.store.records import Record, Store, check_record, write_once
from support.study_data import records


def stored(**changes) -> dict:
    record = json.loads(json.dumps(STORED_RECORD))
    record.update(changes)
    return record


def refusal(data) -> str:
    with pytest.raises(s.Invalid) as refused:
        check_record(data)
    return str(refused.value)


def test_a_stored_record_fits_the_schema():
    check_record(stored())
    check_record(stored(status="failed", failure_reason="worker#1 on 10.77.0.2 was killed by SIGKILL\n", result=None,
                        run_folder=None))


@pytest.mark.parametrize("path", [("record_id",), ("sweep_id",), ("study",), ("origin", "id"), ("origin", "host"),
                                  ("config", "model"), ("config", "variant"), ("config", "profile"),
                                  ("config", "target", "name"), ("config", "target", "testbed")])
@pytest.mark.parametrize("value", ["../../../tmp/x", "/etc/passwd", "a/b", "..", ".hidden", "", "a b", "x\n",
                                   "<script>", 7, None, ["resnet"]])
def test_identifiers_are_plain_names(path, value):
    data = stored()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    if (path, value) in ((("config", "target", "testbed"), None), (("config", "target", "name"), "")):
        check_record(data)  # no testbed (a cluster, the embedded default); no name (the embedded default)
        return
    where = ".".join(path)
    assert refusal(data).startswith(f"{where} must be ") or refusal(data).startswith(f"{where} must be a host")


@pytest.mark.parametrize("value, words", [
    ("12.5", "must be a finite number, got '12.5'"), (math.nan, "must be a finite number, got nan"),
    (math.inf, "must be a finite number, got inf"), (True, "must be a finite number, got True"),
    (-1.0, "must be from 0 to 1e+09, got -1"), (2e9, "must be from 0 to 1e+09, got 2e+09"),
])
def test_the_figures_the_analysis_reads_are_finite_numbers_in_range(value, words):
    data = stored()
    data["result"]["throughput_samples_per_sec"] = value
    assert refusal(data) == f"result.throughput_samples_per_sec {words}"


def test_types_ranges_and_unknown_keys():
    assert refusal(stored(status="maybe")) == "status must be one of ok, failed; got 'maybe'"
    data = stored()
    data["config"]["repetition"] = 0
    assert refusal(data) == "config.repetition must be from 1 to 100000, got 0"
    data["config"]["repetition"] = True
    assert refusal(data) == "config.repetition must be a whole number, got True"
    data = stored()
    data["config"]["bandwidth"] = "fast"
    assert refusal(data) == "config.bandwidth must be a rate like 100mbit or 4gbit, or native, got 'fast'"
    assert refusal(stored(local=True)).startswith("it has unknown key(s) 'local'; known: format, record_id")
    data = stored()
    data["config"]["target"]["hosts"] = []
    assert refusal(data) == "config.target.hosts must hold 1 to 1024 items, holds 0"
    assert refusal(stored(failure_reason="\x1b[31mred")) == "failure_reason holds a control character: '\\x1b[31mred'"
    assert refusal(stored(run_folder="runs/other/attempt-1")).startswith("run_folder must be runs/<record_id>/attempt-N")
    data = stored()
    data.pop("config")
    assert refusal(data) == "it has no 'config'"


def test_result_and_provenance_hold_bounded_json():
    data = stored()
    data["result"]["engine_specific"] = {"a": [1, 2, {"b": None}]}  # engines add their own keys
    data["provenance"]["role_plan"] = [{"kind": "worker", "index": 0, "host": "10.77.0.1"}]
    check_record(data)
    data["provenance"]["deep"] = [[[[[[["x"]]]]]]]
    assert refusal(data) == "provenance.deep[0][0][0][0][0][0] is nested deeper than 6 levels"
    data = stored()
    data["provenance"]["repo_revision"] = 5
    assert refusal(data) == "provenance.repo_revision must be text, got 5"  # the report shows it as text


def test_a_long_value_is_cut_in_the_message():
    assert len(refusal(stored(record_id="x/" * 1000))) < 200


def test_a_record_read_from_a_store_is_one_line_naming_the_file_and_the_field(tmp_path):
    data = stored()
    data["config"]["model"] = "../../../../tmp/x"
    write_once(tmp_path / "records" / "r.json", data)
    with pytest.raises(UserError) as refused:
        Store(tmp_path, "sysml19-p3").all_records()
    assert str(refused.value) == (f"run record {tmp_path / 'records' / 'r.json'} is invalid: config.model must be a "
                                  f"plain name (letters, digits, '.', '_', '-'; at most 128), got '../../../../tmp/x'")


def test_bundle_member_names():
    for good in ("records/s--resnet--p3--4gbit--r1.json", "runs/s--resnet--p3--4gbit--r1/attempt-2/logs/worker-0.log",
                 "runs/r/attempt-1/p3-run.json"):
        assert member_name_ok(good), good
    for bad in ("manifest.json", "records/../x.json", "records/a/b.json", "records/.x.json", "/records/a.json",
                "runs/r/attempt-1", "runs/r/attempt-0/x", "runs/r/attempt-1/../../x", "runs/r/attempt-1/./x",
                "runs/../r/attempt-1/x", "runs/r/attempt-1//x", "runs/r/attempt-1/x\x1b", "runs/r/attempt-1/a\\b",
                "other/a.json", "records/a.json/"):
        assert not member_name_ok(bad), bad


def test_the_manifest_schema_names_the_field():
    manifest = {"format": "reprokit-study-bundle/2", "study": "sysml19-p3",
                "origin": {"id": "a" * 40, "host": "h", "study": "sysml19-p3"}, "public_key": "0" * 64,
                "signature": "0" * 128, "created": "now", "nonce": "n", "records": 1,
                "left_out": {"timelines": 0, "bytes": 0}, "total_bytes": 2,
                "files": {"records/r.json": {"sha256": "0" * 64, "size": 2}}}
    MANIFEST_SCHEMA.check(manifest, "")
    manifest["files"]["records/../../r.json"] = {"sha256": "0" * 64, "size": 2}
    with pytest.raises(s.Invalid, match=r"^files key 'records/\.\./\.\./r\.json' must be records/<record id>\.json"):
        MANIFEST_SCHEMA.check(manifest, "")
    manifest["files"].pop("records/../../r.json")
    manifest["total_bytes"] = 1 << 40
    with pytest.raises(s.Invalid, match=r"^total_bytes must be from 0 to 1073741824"):
        MANIFEST_SCHEMA.check(manifest, "")


def test_a_new_store_is_named_by_its_key_and_signs_what_it_exports(tmp_path):
    store = Store(tmp_path / "s", "sysml19-p3")
    origin = store.origin()
    assert origin.id == identity.fingerprint(store.public_key()) and len(origin.id) == 40
    assert oct((tmp_path / "s" / "origin.key").stat().st_mode & 0o777) == "0o600"
    signature = identity.sign(store.signing_key(), b"manifest")
    assert identity.verify(store.public_key(), signature, b"manifest")
    assert not identity.verify(store.public_key(), signature, b"manifest, edited")
    assert Store(tmp_path / "s", "sysml19-p3").origin() == origin  # made once


def test_a_store_made_before_keys_keeps_its_id_and_gets_a_key_when_it_exports(tmp_path):
    write_once(tmp_path / "origin.json", {"id": "0123456789abcdef0123456789abcdef", "host": "vm", "study": "sysml19-p3"})
    store = Store(tmp_path, "sysml19-p3")
    assert store.public_key() is None and store.origin().id == "0123456789abcdef0123456789abcdef"
    store.signing_key()
    assert store.public_key() is not None and store.origin().id == "0123456789abcdef0123456789abcdef"


def test_a_run_read_twice_is_counted_once(tmp_path):
    store = Store(tmp_path, "sysml19-p3")
    [record] = records("resnet", "4gbit", [100.0], [])
    for bundle in ("b1", "b2"):  # two imports of one run, as stores that imported a store's exports twice hold
        write_once(tmp_path / "imported" / bundle / "records" / f"{record.record_id}.json", record.to_dict())
    assert [r.run_id for r in store.all_records()] == [f"o-local/{record.record_id}"]
    assert Record.from_dict(record.to_dict()).run_id == record.run_id


def test_an_imported_bundle_with_an_unreadable_record_is_left_out_whole_when_asked(tmp_path):
    store = Store(tmp_path, "sysml19-p3")
    good, bad = records("resnet", "4gbit", [100.0, 101.0], [])
    write_once(tmp_path / "imported" / "b1" / "records" / f"{good.record_id}.json", good.to_dict())
    broken = bad.to_dict()
    broken["result"]["throughput_samples_per_sec"] = "fast"
    write_once(tmp_path / "imported" / "b2" / "records" / f"{good.record_id}-2.json", good.to_dict())
    write_once(tmp_path / "imported" / "b2" / "records" / f"{bad.record_id}.json", broken)
    with pytest.raises(UserError, match="result.throughput_samples_per_sec must be a finite number"):
        store.all_records()
    left_out: list[str] = []
    assert [r.imported_from for r in store.all_records(left_out)] == ["b1"]
    [problem] = left_out
    assert "must be a finite number, got 'fast'" in problem and problem.endswith(
        f"its bundle is left out: remove {tmp_path / 'imported' / 'b2'} and import the bundle again")
