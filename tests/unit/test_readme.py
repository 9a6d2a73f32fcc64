"""README.md is a short README: at most 120 lines, the two set-up commands first, and links to every top-level
docs/ file that exist. The manual's links resolve too: between pages in every folder of docs/, anchors included
(as GitHub names a heading), and every page is reachable from the README or another page. Its prose holds no lab
notes (load averages, commit hashes, paths of a store on one machine): those live in docs/notebook/."""
import re
from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")
ANCHORED = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")
PAGES = sorted(DOCS.rglob("*.md"))
# The manual: every page but the measurement log, the generated results and the evaluator's appendix (owned elsewhere).
MANUAL = [p for p in PAGES if p.relative_to(DOCS).parts[0] not in ("notebook", "results") and p.name != "evaluate.md"]
LAB_NOTES = {"a load average": re.compile(r"load average", re.I),
             "a path under /root": re.compile(r"/root/"),
             "a path under /tmp": re.compile(r"/tmp/(?!reprokit-runs)"),
             "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b")}
CODE = re.compile(r"`[^`\n]*`")
PARSER = MarkdownIt("commonmark").enable("table")


def name(path: Path) -> str:
    return str(path.relative_to(REPO))


def slugs(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as '-', repeats -1, -2."""
    tokens = PARSER.parse(page.read_text())
    found: set[str] = set()
    for n, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", tokens[n + 1].content)
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        unique, count = slug, 0
        while unique in found:
            count += 1
            unique = f"{slug}-{count}"
        found.add(unique)
    return found


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
    broken = [(name(p), link) for p in PAGES for link in LINK.findall(p.read_text())
              if "://" not in link and not (p.parent / link).is_file()]
    assert not broken, f"broken links in docs/: {broken}"


def test_every_anchor_a_link_names_is_a_heading_of_its_page():
    broken = []
    for page in [README, *PAGES]:
        for target, anchor in ANCHORED.findall(page.read_text()):
            if "://" in target or (target and not target.endswith(".md")):
                continue
            dest = (page.parent / target) if target else page
            if dest.is_file() and anchor not in slugs(dest):
                broken.append((name(page), f"{target}#{anchor}"))
    assert not broken, f"links to headings that do not exist: {broken}"


def test_every_docs_page_is_linked_from_the_readme_or_another_page():
    linked = {(README.parent / link).resolve() for link in LINK.findall(README.read_text())}
    for page in PAGES:
        linked |= {(page.parent / link).resolve() for link in LINK.findall(page.read_text())
                   if (page.parent / link).resolve() != page.resolve()}
    orphans = [name(p) for p in PAGES if p.resolve() not in linked]
    assert not orphans, f"pages nothing links to: {orphans}"


def test_the_manual_holds_no_lab_notes():
    found = [(name(page), what, match.group()) for page in MANUAL
             for what, pattern in LAB_NOTES.items()
             for match in pattern.finditer(CODE.sub("", page.read_text()))]
    assert not found, f"lab notes in the manual (move them to docs/notebook/): {found}"
