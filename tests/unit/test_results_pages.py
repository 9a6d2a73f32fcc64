"""docs/results is generated from the summaries beside it: regenerating changes nothing, and every run a page cites
is named by its record."""
import filecmp
import json

import pytest

from reprokit.core.errors import UserError
from reprokit.study.report.results_pages import RESULTS_DIR, check_name, read_summaries, render_pages, summarise
from support.study_data import ALL_MODELS, records, study

pytestmark = pytest.mark.parallel


def test_the_committed_pages_are_what_their_summaries_generate(tmp_path):
    written = render_pages(read_summaries(RESULTS_DIR / "data"), tmp_path)
    committed = sorted(p.name for p in RESULTS_DIR.glob("*.md"))
    assert sorted(p.name for p in written) == committed and "README.md" in committed
    for page in written:
        assert filecmp.cmp(page, RESULTS_DIR / page.name, shallow=False), (
            f"docs/results/{page.name} differs from what its summary generates: "
            f"python -m reprokit.study.report.results_pages")


def test_a_page_names_every_record_with_its_figure_and_states_the_speedup(tmp_path):
    runs = (records("resnet", "4gbit", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], emulated=True)
            + records("vgg", "15gbit", [5.0, None], [6.0, 6.1], emulated=True))
    summary = summarise(study(), runs, ALL_MODELS, "t", "A test page")
    [page, _] = render_pages([summary], tmp_path)
    text = page.read_text()
    for run in runs:  # each run's row names its record and holds its own figure, or why it failed
        row = next(line for line in text.splitlines() if f"`{run.record_id}`" in line)
        figure = run.run_result.throughput_samples_per_sec if run.ok else None
        assert f"| {figure:.2f} |" in row if run.ok else "| failed: worker#1 on 10.77.0.2 was killed" in row
    assert "| p3 over baseline | 3 | 1.20x [" in text
    assert json.loads(json.dumps(summary)) == summary  # what is kept is plain data


def test_a_page_name_that_could_leave_the_folder_is_refused():
    with pytest.raises(UserError, match="not a results page name"):
        check_name("../README")
    assert check_name("p4000-emulated") == "p4000-emulated"
