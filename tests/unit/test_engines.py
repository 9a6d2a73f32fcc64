"""The engine registry: three engines, the variants each runs, what their runs report, and what they store."""
import re
from pathlib import Path

import pytest

import reprokit
from reprokit.data.registered import EnvEntry
from reprokit.engines.artifact.installed import ENV_PREFIX, ArtifactEnv
from reprokit.engines.base import (
    ARTIFACT,
    EMBEDDED,
    EngineKind,
    InstalledEngine,
    engine_switches,
    engines,
    get_engine,
    register_engine,
)
from reprokit.engines.choice import stock_mxnet_version
from reprokit.run.launch import local_environment
from reprokit.run.remote import role_command
from support.runs import fake_plan


def test_three_engines_are_registered_each_with_the_variants_it_runs():
    assert [(e.kind.value, e.side) for e in engines()] == [("stock", EMBEDDED), ("p3", ARTIFACT),
                                                            ("baseline", ARTIFACT)]
    assert get_engine("stock").variants == ("baseline", "baseline-worker-update", "p3", "bytescheduler")
    assert get_engine(EngineKind.P3).variants == ("p3",)
    assert get_engine("baseline").variants == ("baseline",)
    with pytest.raises(KeyError, match="no engine is registered as 'gpu'"):
        get_engine("gpu")
    with pytest.raises(ValueError, match="already registered"):
        register_engine("p3")(type("Again", (), {}))


def test_only_stock_mxnet_reports_the_p3_knobs_the_van_and_the_p3_comm_probes():
    assert {"p3_slice_size", "ps_van", "mechanism", "timelines"} <= set(get_engine("stock").reports.field_names())
    assert get_engine("p3").reports.field_names() == [] and get_engine("baseline").reports.field_names() == []


def test_the_run_spec_stores_an_engine_under_the_keys_it_always_had():
    engine = InstalledEngine(name="sysml19-p3@c647954", python="/a/bin/python", env_uid="e1", build="p3",
                             tree="/a/src", cuda=True, rank=("2026-01-01",))
    stored = engine.to_dict()
    assert stored == {"name": "sysml19-p3@c647954", "python": "/a/bin/python", "env_uid": "e1", "build": "p3",
                      "tree": "/a/src", "cuda": True}
    assert InstalledEngine.from_dict(stored) == engine and InstalledEngine.from_dict(stored).engine is get_engine("p3")


def test_artifact_env_keys_are_written_and_read_by_one_class(tmp_path):
    python, tree = tmp_path / "prefix/bin/python", tmp_path / "src"
    python.parent.mkdir(parents=True)
    python.write_text("")
    tree.mkdir()
    env = ArtifactEnv(tree=str(tree), python=str(python), build="baseline", commit="1234567890abcdef", cuda=False,
                      lib=str(tree / "lib"), manifest="/m/artifact.json", installed_at="2026-01-01T00:00:00")
    variables = env.to_env()
    assert list(variables) == [ENV_PREFIX, *(f"{ENV_PREFIX}_{k}" for k in ("PYTHON", "BUILD", "COMMIT", "CUDA", "LIB",
                                                                           "MANIFEST", "INSTALLED_AT"))]
    assert variables[f"{ENV_PREFIX}_CUDA"] == "0" and ArtifactEnv.from_env(variables) == env
    entry = EnvEntry(uid="u1", alias="", variables=variables, customize={})
    assert get_engine("p3").installed_from_env(entry) is None  # the other build's entry
    found = get_engine("baseline").installed_from_env(entry)
    assert (found.name, found.build, found.rank) == ("sysml19-p3-baseline@1234567890ab", "baseline",
                                                     ("2026-01-01T00:00:00",))


def test_a_role_takes_the_engines_switches_from_its_plan_never_from_the_launching_shell(monkeypatch):
    assert engine_switches()[:4] == ("DMLC_PS_VAN_TYPE", "DMLC_PS_WATER_MARK", "MXNET_KVSTORE_SLICE_THRESHOLD",
                                     "MXNET_UPDATE_ON_KVSTORE")
    assert {"BYTESCHEDULER_PARTITION", "BYTESCHEDULER_CREDIT", "BYTESCHEDULER_CREDIT_TUNING"} <= set(engine_switches())
    for name in engine_switches():
        monkeypatch.setenv(name, "from-the-shell")
    plan = fake_plan()
    plan.extra_env = {"MXNET_KVSTORE_SLICE_THRESHOLD": "50000"}
    env = local_environment(plan, plan.workers[0])
    assert {k: env[k] for k in engine_switches() if k in env} == {"MXNET_KVSTORE_SLICE_THRESHOLD": "50000"}
    remote = role_command("/tmp/run", {}, ["true"])
    assert [name for name in engine_switches() if f"-u {name}" not in remote] == []  # unset before the plan's env


def test_no_engine_side_or_name_test_and_no_launcher_name_test_outside_their_packages():
    """What an engine or a launcher is, only its own package asks: the rest asks the class (capabilities)."""
    src = Path(reprokit.__file__).parent
    engine_question = re.compile(r"\bside\s*[!=]=|engine_name\.startswith|\.startswith\((ARTIFACT|\"mxnet|'mxnet)")
    launcher_question = re.compile(r"\blauncher(_name)?\s*[!=]=\s*[\"']")
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        text = path.read_text()
        if not rel.startswith("engines/") and engine_question.search(text):
            found.append(f"{rel}: {engine_question.search(text).group(0)}")
        if rel != "run/launchers.py" and launcher_question.search(text):
            found.append(f"{rel}: {launcher_question.search(text).group(0)}")
    assert found == []


def test_the_stock_engines_name_gives_its_mxnet_version_and_no_other_does():
    assert stock_mxnet_version("mxnet-1.9.1-cpu") == "1.9.1"
    assert stock_mxnet_version("mxnet-1.9.1-cpu+sockeye-1.18.106") == "1.9.1"
    assert stock_mxnet_version("sysml19-p3@c647954") is None and stock_mxnet_version("") is None
