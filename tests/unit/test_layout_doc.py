"""docs/reference/layout.md names every file under src/ and program/, and names no file that does not exist.

Files checked: every file git tracks under src/ and program/ (CK's `.cm/` metadata and the program/sysml19-p3
symlink included), and every *.py, *.json and *.j2 file on disk there, so that a new module fails this test
before it is committed. Not checked: __pycache__/ and the run folders under program/*/tmp/ (generated).
"""
import glob
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYOUT = REPO / "docs" / "reference" / "layout.md"
ROOTS = ("src", "program")
ON_DISK = (".py", ".json", ".j2")
# Backticked paths under these folders must exist (a `*` is a glob).
TOP = ("src/", "program/", "module/", "package/", "soft/", "os/", "wfe/", "study/", "tests/", "benchmarks/",
       "docs/")


def ignored(rel: str) -> bool:
    parts = rel.split("/")
    return "__pycache__" in parts or (len(parts) > 2 and parts[0] == "program" and parts[2] == "tmp")


def tracked() -> set[str]:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", *ROOTS], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return set()  # not a git checkout (a zip): the files on disk are still checked
    return {name for name in out.stdout.decode().split("\0") if name and not ignored(name)}


def on_disk() -> set[str]:
    found = set()
    for root in ROOTS:
        for folder, dirs, files in os.walk(REPO / root):  # does not follow program/sysml19-p3 (a symlink)
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                rel = (Path(folder) / name).relative_to(REPO).as_posix()
                if name.endswith(ON_DISK) and not ignored(rel):
                    found.add(rel)
    return found


def named() -> set[str]:
    return {token.rstrip("/") for token in re.findall(r"`([^`\s]+)`", LAYOUT.read_text()) if token.startswith(TOP)}


def test_every_file_under_src_and_program_is_named_in_the_layout():
    files = tracked() | on_disk()
    assert "src/reprokit/run/launch.py" in files and "program/p3/train.py" in files  # the walk itself works
    missing = sorted(files - named())
    assert not missing, f"docs/reference/layout.md does not name: {missing}"


def test_every_path_the_layout_names_exists():
    gone = sorted(path for path in named() if not glob.glob(str(REPO / path)) and not os.path.lexists(REPO / path))
    assert not gone, f"docs/reference/layout.md names paths that do not exist: {gone}"


def test_the_layout_says_sysml19_p3_is_a_symlink_to_p3():
    assert os.path.islink(REPO / "program" / "sysml19-p3")
    assert os.readlink(REPO / "program" / "sysml19-p3") == "p3"
    assert re.search(r"`program/sysml19-p3`: a symlink to `program/p3`", LAYOUT.read_text())
