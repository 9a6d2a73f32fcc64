"""Constructed study entries and result records for the study tests (no ck, no MXNet)."""
import json
from pathlib import Path

from reprokit.study import claims as studies
from reprokit.study.store import Origin, Record, RecordConfig

REPO = Path(__file__).resolve().parents[2]
STUDY_META = json.loads((REPO / "study" / "sysml19-p3" / ".cm" / "meta.json").read_text())
ALL_MODELS = {"resnet", "vgg", "inception-v3", "sockeye"}

TESTBED4 = studies.Target(name="tb", kind="testbed", hosts=tuple(f"10.77.0.{i}" for i in range(1, 5)), shaping=True,
                          link_capacity=None, testbed="tb")
EMBEDDED = studies.Target(name="", kind="embedded", hosts=("127.0.0.1",), shaping=False, link_capacity=None)


def study(**tolerance):
    meta = json.loads(json.dumps(STUDY_META))
    meta["tolerance"].update(tolerance)
    return studies.from_meta("sysml19-p3", meta)


def records(model, bandwidth, baseline, p3, target=TESTBED4, profile="paper", variant="p3", origin="o-local"):
    """One record per throughput value; a value of None is a failed run."""
    out = []
    for name, values in (("baseline", baseline), (variant, p3)):
        for rep, value in enumerate(values, 1):
            out.append(Record(
                record_id=f"s--{model}--{name}--{bandwidth}--r{rep}--{origin}", study="sysml19-p3", sweep_id="s",
                origin=Origin(id=origin, host="h", study="sysml19-p3"),
                config=RecordConfig(model=model, variant=name, bandwidth=bandwidth, repetition=rep, profile=profile,
                                    target=target),
                status="ok" if value is not None else "failed",
                failure_reason=None if value is not None else "worker#1 on 10.77.0.2 was killed by SIGKILL",
                result={"throughput_samples_per_sec": value, "params_in_sync": True} if value is not None else None,
            ))
    return out


def verdict_of(analysis, claim_id):
    [v] = [v for v in analysis.verdicts if v.claim == claim_id]
    return v
