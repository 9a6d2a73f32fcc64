"""Every document that crosses a process or disk boundary is one typed class whose to_dict/from_dict round trip
keeps it whole (docs/reference/layout.md, "Documents")."""
import json
import tempfile
from pathlib import Path

import pytest

from reprokit.cluster.hosts import parse
from reprokit.core.errors import UserError
from reprokit.data.recordio import Part, RecordioManifest
from reprokit.engines.base import InstalledEngine, get_engine
from reprokit.run.result import RESULT_FORMAT, Result
from reprokit.run.settings import resolve
from reprokit.run.spec import SPEC_FORMAT, RunData, RunSpec, build_spec
from reprokit.study.store.records import Record
from reprokit.vocabulary import RunStatus
from support.study_data import records


def through_json(document):
    """As it crosses a boundary: JSON text, then back."""
    return type(document).from_dict(json.loads(json.dumps(document.to_dict())))


def test_the_run_spec_and_its_plan_settings_engine_data_and_cluster_survive_the_file():
    data = {"hosts": ["a", {"host": "b", "port": 2222}]}
    engine = InstalledEngine("mxnet-1.9.1-cpu", "/usr/bin/python3", "e1")
    spec = build_spec(resolve("resnet", {"NUM_WORKERS": "3"}, "paper"), engine,
                      RunData("imagenet-min", ["--data-train", "t.rec"], "t.rec", "u1", 900, "images", split=True),
                      parse(data))
    again = through_json(spec)
    assert again.to_dict() == spec.to_dict()
    assert (again.settings, again.engine, again.data) == (spec.settings, spec.engine, spec.data)
    assert again.engine.engine is get_engine("stock")


def test_a_result_keeps_its_status_and_reads_one_written_before_status_existed():
    result = Result(RunStatus.INTERRUPTED, "run stopped by SIGINT", model="resnet", hosts=["a"])
    assert through_json(result) == result
    assert result.to_dict()["run_success"] is False and result.to_dict()["interrupted"] is True
    old = {"run_success": False, "interrupted": True, "failure_reason": "x"}
    assert Result.from_dict(old).status is RunStatus.INTERRUPTED
    assert Result.from_dict({"run_success": True}).status is RunStatus.OK


def test_a_recordio_manifest_and_a_study_record_round_trip():
    manifest = RecordioManifest("imagenet-min", "/src", 4, {"train": Part("train", "t.rec", "t.idx", 76, 0, "t.lst")},
                                76, "2026-11-26T00:00:00+00:00", threads=2, seconds=1.5)
    assert through_json(manifest) == manifest
    [record, *_] = records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0])
    again = Record.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.to_dict() == record.to_dict() and again.status is RunStatus.OK


def test_the_run_spec_and_the_result_carry_their_format_and_refuse_another():
    spec = RunSpec.refused("no such model")
    result = Result(RunStatus.FAILED, "x")
    assert spec.to_dict()["format"] == SPEC_FORMAT and result.to_dict()["format"] == RESULT_FORMAT
    for document, data in ((RunSpec, spec.to_dict()), (Result, result.to_dict())):
        with pytest.raises(ValueError, match="written by another version of this framework"):
            document.from_dict({**data, "format": data["format"].replace("/1", "/2")})
        assert document.from_dict({k: v for k, v in data.items() if k != "format"}).to_dict() == data  # older files
    with pytest.raises(UserError, match=r"cannot read the run specification .*: format 'reprokit-run-spec/2'"):
        folder = Path(tempfile.mkdtemp())
        (folder / "p3-run.json").write_text(json.dumps({**spec.to_dict(), "format": "reprokit-run-spec/2"}))
        RunSpec.load(folder / "p3-run.json")
