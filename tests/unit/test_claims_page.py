"""docs/results/claims.md: every claim of every study entry with its verdicts, each labelled with how it was reached
(measured, emulated, predicted), and where it holds in words; a claim no summary holds reads "not yet run", a claim
id only an older summary holds is shown as from an earlier version of the entry."""
import pytest
from markdown_it import MarkdownIt

from reprokit.study.report.claims_page import EARLIER, MAX_WORDS, NOT_YET_RUN, page, study_entries
from reprokit.study.report.results_pages import RESULTS_DIR
from support.study_data import study

pytestmark = pytest.mark.parallel

NOT_RUN = {"measured": "not measured", "emulated": "not run", "predicted": "not given (see the figures below)",
           "verdict": "not measured", "emulated_verdict": "", "predicted_verdict": "", "emulated_engines": []}
GPU_SAID = "Emulated and predicted figures are at the paper's GPU (P4000 compute) and never count towards a badge."


def summary(name, rows, study_name="sysml19-p3"):
    """A results summary as results_pages.summarise writes it, reduced to what the claims page reads."""
    return {"name": name, "title": f"The {name} page", "study": study_name, "runs": [], "speedups": [],
            "answer": {"summary": GPU_SAID,
                       "rows": [{"claim": claim, "paper": "up to +25%", **NOT_RUN, **cells} for claim, cells in rows]}}


def row(text, claim):
    """The claim's table row as its cells: claim, paper, measured, emulated, predicted, where it holds."""
    line = next(line for line in text.splitlines() if line.startswith(f"| `{claim}`"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_a_claim_no_summary_holds_reads_not_yet_run():
    text = page([], [study()])
    for claim in study().claims:
        assert row(text, claim.id)[2:] == ["-", "-", "-", NOT_YET_RUN]
    assert "No summary of its runs is kept yet" in text


def test_an_emulated_verdict_is_labelled_emulated_and_never_shown_as_measured():
    emulated = "1.22x [1.17, 1.28], n=3 at 2gbit: replicated"
    text = page([summary("emu", [("resnet-up-to-25", {"emulated": emulated, "emulated_verdict": "replicated"}),
                                 ("vgg-up-to-66", {})])], [study()])
    _, _, measured, shown, predicted, where = row(text, "resnet-up-to-25")
    assert measured == "-" and predicted == "-"
    assert shown == f"emulated at the P4000 ([emu](emu.md)): {emulated}"
    assert where == "Holds: emulated at the P4000 at 2gbit. Not measured."
    assert row(text, "vgg-up-to-66")[-1] == "no verdict yet (not run)"  # held, but without a verdict


def test_a_verdict_over_every_configuration_says_so_and_names_no_single_bandwidth():
    emulated = "over 3 configuration(s), 0.90x to 1.00x; deciding: 1.00x [1.00x, 1.00x], n=3 at 10gbit: replicated"
    text = page([summary("emu", [("resnet-up-to-25", {"emulated": emulated, "emulated_verdict": "replicated"})])],
                [study()])
    assert row(text, "resnet-up-to-25")[-1] == "Holds: emulated at the P4000 over 3 configuration(s). Not measured."


def test_a_predicted_verdict_is_labelled_predicted_once_for_every_summary_that_holds_it():
    predicted = "0.87x to 1.43x: inconclusive"
    rows = [("resnet-4gbit", {"predicted": predicted, "predicted_verdict": "inconclusive"})]
    text = page([summary("a", rows), summary("b", rows)], [study()])
    _, _, measured, emulated, shown, where = row(text, "resnet-4gbit")
    assert (measured, emulated) == ("-", "-")
    assert shown == f"predicted at the P4000 ([a](a.md), [b](b.md)): {predicted}"
    assert where == "Undecided: predicted at the P4000 at 4gbit. Not measured."


def test_a_measured_verdict_is_labelled_measured_beside_an_emulated_one_by_engine():
    cells = {"measured": "1.27x [1.20, 1.33], n=3", "verdict": "replicated",
             "emulated": "stock MXNet 1.9.1: 1.05x [1.04, 1.05], n=3: not replicated; the authors' build: 1.03x "
                         "[1.00, 1.06], n=3: not replicated", "emulated_verdict": "not replicated",
             "emulated_engines": [["stock MXNet 1.9.1", "not replicated"], ["the authors' build", "not replicated"]]}
    text = page([summary("m", [("resnet-4gbit", cells)])], [study()])
    _, _, measured, emulated, _, where = row(text, "resnet-4gbit")
    assert measured == "measured ([m](m.md)): 1.27x [1.20, 1.33], n=3: replicated"
    assert emulated.startswith("emulated at the P4000 ([m](m.md)): stock MXNet 1.9.1")
    assert where == ("Holds: measured at 4gbit. Does not hold: emulated at the P4000 at 4gbit (stock MXNet and the "
                     "authors' build).")


def test_a_claim_id_only_an_older_summary_holds_is_shown_as_from_an_earlier_version():
    old = summary("old", [("vgg-up-to-66", {}), ("vgg19-renamed", {"emulated": "1.10x [1.0, 1.2], n=3 at 10gbit: "
                                                                                "not replicated",
                                                                    "emulated_verdict": "not replicated"})])
    text = page([old], [study()])
    claim, paper, _, emulated, _, where = row(text, "vgg19-renamed")
    assert EARLIER in claim and "[old](old.md)" in claim and paper == "up to +25%"
    assert emulated.startswith("emulated at the P4000 ([old](old.md))") and where.startswith("Does not hold")
    assert EARLIER not in row(text, "vgg-up-to-66")[0]  # a claim of the entry now is not marked
    assert "1 claim id(s) below are only in summaries written from an earlier version" in text


def test_a_summary_of_a_study_that_is_no_entry_now_keeps_its_claims():
    text = page([summary("gone", [("c1", {"predicted": "0.9x to 1.1x: not replicated",
                                          "predicted_verdict": "not replicated"})], study_name="gone")], [study()])
    assert "## gone" in text and EARLIER in row(text, "c1")[0]


def test_every_study_entry_is_on_the_committed_page_and_its_cells_are_short():
    text = (RESULTS_DIR / "claims.md").read_text()
    for entry in study_entries():
        assert f"## {entry.name}" in text
        for claim in entry.claims:
            row(text, claim.id)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    cells = [tokens[n + 1].content for n, t in enumerate(tokens) if t.type == "td_open"]
    assert cells and all(len(c.split()) <= MAX_WORDS for c in cells), [c for c in cells if len(c.split()) > MAX_WORDS]


def test_the_verdicts_are_the_answer_rows_fields_never_the_words_of_their_cells():
    """A cell's words are shown as they are; what it holds, where and for which engine, is its row's verdict fields."""
    emulated = "1.22x [1.17, 1.28], n=3 at 2gbit: replicated"
    predicted = "0.87x to 1.43x: replicated by nobody, inconclusive"
    rows = [("resnet-up-to-25", {"emulated": emulated, "emulated_verdict": "not replicated"}),
            ("resnet-4gbit", {"predicted": predicted, "predicted_verdict": ""}),
            ("vgg-up-to-66", {"emulated": "not given (n < 3)", "emulated_verdict": "inconclusive"})]
    text = page([summary("f", rows)], [study()])
    assert row(text, "resnet-up-to-25")[3] == f"emulated at the P4000 ([f](f.md)): {emulated}"
    assert row(text, "resnet-up-to-25")[-1] == "Does not hold: emulated at the P4000 at 2gbit. Not measured."
    assert row(text, "resnet-4gbit")[4] == "-"  # no verdict in its field: no verdict, whatever its words say
    assert row(text, "resnet-4gbit")[-1] == "no verdict yet (not run)"
    assert row(text, "vgg-up-to-66")[-1] == "Undecided: emulated at the P4000. Not measured."
    # by engine: each engine's verdict is its own field, whatever the words say
    engines = {"emulated": "stock MXNet 1.9.1: 1.05x [1.04, 1.05], n=3: not replicated; the authors' build: 1.03x "
                           "[1.00, 1.06], n=3: not replicated", "emulated_verdict": "not replicated",
               "emulated_engines": [["stock MXNet 1.9.1", "not replicated"], ["the authors' build", "replicated"]]}
    assert row(page([summary("e", [("resnet-4gbit", engines)])], [study()]), "resnet-4gbit")[-1] == (
        "Holds: emulated at the P4000 at 4gbit (the authors' build). Does not hold: emulated at the P4000 at 4gbit "
        "(stock MXNet). Not measured.")
