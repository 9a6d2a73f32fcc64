"""README.md is a short README: at most 120 lines, the two set-up commands first, and links to every docs/ file
that exist; the links between docs/ files resolve too."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def test_readme_is_at_most_120_lines():
    assert len(README.read_text().splitlines()) <= 120


def test_readme_starts_with_make_demo_then_make_test():
    text = README.read_text()
    block = re.search(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    assert block, "README.md has no code block"
    assert text.index(block.group(0)) < text.index("\n## "), "the first code block comes after a section"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert [c for c in commands if c][:2] == ["make demo", "make test"]


def test_readme_links_to_every_docs_file_and_each_link_exists():
    links = {m for m in LINK.findall(README.read_text()) if m.startswith("docs/")}
    assert links, "README.md links to no docs/ file"
    assert not sorted(link for link in links if not (REPO / link).is_file()), "README.md links to missing docs"
    docs = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert not sorted(docs - links), f"README.md does not link to: {sorted(docs - links)}"


def test_links_between_docs_files_exist():
    broken = [(p.name, link) for p in DOCS.glob("*.md") for link in LINK.findall(p.read_text())
              if "://" not in link and not (p.parent / link).is_file()]
    assert not broken, f"broken links in docs/: {broken}"
