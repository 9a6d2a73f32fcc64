"""Bad --engines requests to `ck reproduce study:sysml19-p3`, stdin closed: one clear line each, nothing stored.

The session's CK has stock MXNet only (no build of the authors' artifact is registered), so every refusal
happens before a sweep is stored or a run starts.
"""
import pytest

from support.faults import expect, one_clear_line

STUDY = "study:sysml19-p3"


@pytest.mark.fault("settings")
@pytest.mark.parametrize("given, names", [
    (["--engines=gpu"], ["unknown engine(s) 'gpu'", "embedded, artifact"]),
    (["--engines=artifact"], ["needs the authors' baseline build", "ck install package:sysml19-p3-baseline-github",
                              "--engines=embedded"]),
    (["--engines=embedded,artifact", "--variants=p3"], ["needs the authors' p3 build",
                                                        "ck install package:sysml19-p3-github"]),
    (["--env.ENGINE=artifact"], ["--env.ENGINE is set by the study per run", "--engines"]),
    (["--engines=artifact", "--variants=p3-slicing-only"], ["the authors' builds run only p3 and baseline",
                                                            "--variants=baseline,p3"]),
])
def test_bad_engine_requests_are_one_line_and_store_nothing(ck, tmp_path, given, names):
    store = tmp_path / "store"
    proc = ck("reproduce", STUDY, f"--store={store}", "--models=resnet", *given, timeout=120)
    expect(proc.returncode != 0, "other", f"exit {proc.returncode} for {given}")
    one_clear_line(proc.stdout + proc.stderr, *names)
    stored = sorted(p.name for p in store.rglob("*.json")) if store.exists() else []
    expect(not [n for n in stored if n != "origin.json"], "other", f"a refused request stored {stored}")
