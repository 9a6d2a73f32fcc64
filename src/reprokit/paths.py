"""Where things are in this repository (the core is used from its checkout, as CK uses the entries)."""
from pathlib import Path

SRC_DIR = Path(__file__).resolve().parents[1]  # put on PYTHONPATH of child interpreters that import reprokit
REPO_ROOT = SRC_DIR.parent
PROGRAM_DIR = REPO_ROOT / "program" / "p3"  # what runs inside the engine's interpreter
