"""docs/results is generated from the summaries beside it: regenerating changes nothing, and every run a page cites
is named by its record."""
import filecmp
import json
from dataclasses import replace

import pytest

from reprokit.core.errors import UserError
from reprokit.study.report.results_pages import RESULTS_DIR, check_name, read_summaries, render_pages, summarise
from support.study_data import ALL_MODELS, records, study

pytestmark = pytest.mark.parallel


def test_the_committed_pages_are_what_their_summaries_generate(tmp_path):
    files = render_pages(read_summaries(RESULTS_DIR / "data"), tmp_path)
    written = [p for p in files if p.suffix == ".md"]  # and the head-to-head page's figure, committed beside it
    assert all((RESULTS_DIR / p.name).is_file() for p in files if p not in written)
    committed = sorted(p.name for p in RESULTS_DIR.glob("*.md"))
    assert sorted(p.name for p in written) == committed and "README.md" in committed
    for page in written:
        assert filecmp.cmp(page, RESULTS_DIR / page.name, shallow=False), (
            f"docs/results/{page.name} differs from what its summary generates: "
            f"python -m reprokit.study.report.results_pages")


def test_a_page_names_every_record_with_its_figure_and_states_the_speedup(tmp_path):
    runs = (records("resnet", "4gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True)
            + records("vgg", "15gbit", [5.0, None], [6.0, 6.1], emulated=True))
    runs[0] = replace(runs[0], provenance=replace(runs[0].provenance, repo_revision="a" * 40, repo_dirty=True))
    runs[1] = replace(runs[1], provenance=replace(runs[1].provenance, repo_revision="b" * 40, repo_dirty=False))
    summary = summarise(study(), runs, ALL_MODELS, "t", "A test page")
    page, *_ = render_pages([summary], tmp_path)
    text = page.read_text()
    for run in runs:  # each run's row names its record and holds its own figure, or why it failed
        row = next(line for line in text.splitlines() if f"`{run.record_id}`" in line)
        figure = run.run_result.throughput_samples_per_sec if run.ok else None
        assert f"| {figure:.2f} |" in row if run.ok else "| failed: worker#1 on 10.77.0.2 was killed" in row
    assert "| p3 over baseline | 3 | 1.20x [" in text
    assert f"| {'a' * 12} (dirty) |" in text and f"| {'b' * 12} |" in text  # a run from uncommitted changes says so
    assert json.loads(json.dumps(summary)) == summary  # what is kept is plain data


def test_a_page_puts_the_forecast_beside_the_recorded_time_per_configuration(tmp_path):
    runs = records("resnet", "4gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True)
    env = {"COMPUTE": "emulated", "COMPUTE_PROFILE": "p4000", "DILATION": "20", "NUM_BATCHES": "20"}
    t, timed = 0.0, []
    for r, took in zip(runs, [200.0, 300.0, 250.0, 400.0, 100.0, 300.0]):
        timed.append(replace(r, provenance=replace(r.provenance, env_overrides=env, duration_s=took,
                                                   started_at=f"ISO ({t:.3f})", ended_at=f"ISO ({t + took:.3f})")))
        t += took + 1
    summary = summarise(study(), timed, ALL_MODELS, "t", "A test page")
    # each run but the first: the median of the runs before it (the first has nothing to go by)
    forecast_of = {r["record"]: r["forecast_s"] for r in summary["runs"]}
    assert [forecast_of[r.record_id] for r in timed] == [None, 200.0, 250.0, 250.0, 275.0, 250.0]
    page, *_ = render_pages([summary], tmp_path)
    # 5 runs forecast at 1225 s = 20.4 min, recorded 300 + 250 + 400 + 100 + 300 s = 22.5 min: 1.10
    assert "| resnet | 4gbit | p4000, 20 | 6 | 25.8 | 4.3 | 5 | 20.4 | 22.5 | 1.10 |" in page.read_text()


def test_a_page_name_that_could_leave_the_folder_is_refused():
    with pytest.raises(UserError, match="not a results page name"):
        check_name("../README")
    assert check_name("p4000-emulated") == "p4000-emulated"
