"""The README and every page of docs/ are valid Markdown as GitHub renders it: every table row has its header's
number of cells (an unescaped `|` inside a cell starts a new one, even in code), and the README's cells stay short."""
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from reprokit.core.paths import REPO_ROOT

pytestmark = pytest.mark.parallel

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
README_CELL_MAX_WORDS = 40
PARSER = MarkdownIt("commonmark").enable("table")


def raw_cells(line: str) -> list[str]:
    """A table row's cells as GitHub splits them: at every `|` not escaped with a backslash."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return re.split(r"(?<!\\)\|", row)


def tables(text: str) -> list[list[str]]:
    """Each table's source lines (header, delimiter, rows), as the parser found them."""
    lines = text.splitlines()
    return [lines[token.map[0]:token.map[1]] for token in PARSER.parse(text)
            if token.type == "table_open" and token.map]


def cell_texts(text: str) -> list[str]:
    tokens = PARSER.parse(text)
    return [tokens[n + 1].content for n, token in enumerate(tokens) if token.type in ("td_open", "th_open")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_table_row_has_its_headers_number_of_cells(page: Path):
    text = page.read_text()
    for table in tables(text):
        width = len(raw_cells(table[0]))
        wrong = [row for row in table[2:] if len(raw_cells(row)) != width]
        assert wrong == [], f"{page.name}: rows whose cells are not the header's {width}: {wrong}"


def test_raw_cells_split_where_github_does():
    assert len(raw_cells("| a | `ssh|srun` | c |")) == 4  # the pipe in code splits the cell too
    assert len(raw_cells(r"| a | `ssh\|srun` | c |")) == 3
    text = "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n"
    [table] = tables(text)
    assert [len(raw_cells(row)) for row in table] == [2, 2, 3]


def test_the_readmes_table_cells_are_short():
    cells = cell_texts((REPO_ROOT / "README.md").read_text())
    assert cells, "the README has no table"
    long_cells = [c[:60] for c in cells if len(c.split()) > README_CELL_MAX_WORDS]
    assert long_cells == [], f"README table cells over {README_CELL_MAX_WORDS} words: {long_cells}"
