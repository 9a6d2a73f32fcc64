"""Imports only go down: ck -> study -> run -> engines -> cluster/data -> model -> core, and nothing of ours is loaded
by path. Code shipped to the engine's interpreter imports the standard library, MXNet (with numpy), Sockeye,
ByteScheduler (its variant), its siblings in program/p3 and reprokit.wire only; reprokit.wire, which the framework
imports too, the standard library only.

Inside the study, its subpackages stand on floors too, and imports between them only go down (TYPE_CHECKING
imports included; the package's own __init__ may import any of them, a package importing downward):

    report > sweep > analysis > whatif > profiles > store > paper

report/ renders what the analysis judges (and the sweep's forecast, for the results pages); sweep/ runs the
matrix and stores its runs (the report is written after it, by ck/study.py); analysis/ judges the stored runs,
its labelled verdicts reading the what-if model's predictions; whatif/ is the iteration model, checked against
stored runs; profiles/ are the models' layer and emulation profiles, data the what-if model and the analysis read
(they import no other part of the study; they stand above the store, which keeps runs, not profiles, and never
reads them); store/ keeps the runs of a paper's plan; paper/ is the paper as data, at the ground (its claims,
their kinds as the paper states them: the judging side is analysis/judged.py's)."""
import ast
import sys
import tomllib
from pathlib import Path

from reprokit.core.paths import PROGRAM_DIR, SRC_DIR
from reprokit.core.shipping import WIRE_DIR, shipped_name, wire_files
from reprokit.engines.stock import engine_files

PACKAGE = SRC_DIR / "reprokit"
# Higher may import lower or equal; anything else under reprokit (errors, values, files, paths, ...) is core (0).
LAYERS = {"ck": 6, "study": 5, "run": 4, "engines": 3, "cluster": 2, "data": 2, "vocabulary": 1, "model": 1}
# Loading code by path: none of ours (the framework imports reprokit.wire as the engine's interpreter does). The one
# exception is not our code: data/recordio.py runs MXNet's own im2rec tool, a script of the engine's prefix (not a
# package), loaded by path inside the engine's interpreter.
LOADERS = {"reprokit.data.recordio"}
ENGINE_SIDE_THIRD_PARTY = {"mxnet", "numpy", "sockeye", "bytescheduler"}  # bytescheduler: its variant only


def module_name(path: Path) -> str:
    return ".".join(("reprokit", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "reprokit":
        return None
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def imported(path: Path, module: str) -> list[str]:
    names = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names.append(f"{base}.{node.module}" if node.module else base)
            else:
                names.append(node.module or "")
    return names


def test_every_import_under_src_goes_down_or_stays_level():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for name in imported(path, module):
            target = layer(name)
            if target is not None and target > layer(module):
                upward.append(f"{module} imports {name}")
    assert upward == []


# The study's subpackages, top floor first (the module docstring says why this order).
STUDY_FLOORS = ("report", "sweep", "analysis", "whatif", "profiles", "store", "paper")
STUDY = PACKAGE / "study"


def study_floor(module: str) -> int | None:
    """The floor of a module of a study subpackage (the ground is 0), None for anything else."""
    parts = module.split(".")
    if parts[:2] != ["reprokit", "study"] or len(parts) < 3:
        return None
    return len(STUDY_FLOORS) - 1 - STUDY_FLOORS.index(parts[2])


def test_the_study_floors_name_every_subpackage_of_the_study():
    assert set(STUDY_FLOORS) == {p.name for p in STUDY.iterdir() if (p / "__init__.py").exists()}


def test_imports_between_the_study_subpackages_only_go_down():
    """ast.walk reaches imports under ``if TYPE_CHECKING:`` too: a type is an arrow like any other."""
    upward = []
    for path in sorted(STUDY.rglob("*.py")):
        module = module_name(path)
        floor = study_floor(module)
        if floor is None:  # reprokit.study's own __init__: a package importing downward
            continue
        for name in imported(path, module):
            target = study_floor(name)
            if target is not None and target > floor:
                upward.append(f"{module} imports {name}")
    assert upward == []


def test_ruffs_banned_imports_in_each_study_subpackage_are_the_floors_above_it():
    """`make lint` refuses an upward import inside the study as it is typed: the ruff.toml nearest each subpackage
    (its own, else study/'s) bans exactly the layers above the study and the subpackages on the floors above it."""
    wrong = {}
    for name in STUDY_FLOORS:
        config = next(c for c in (STUDY / name / "ruff.toml", STUDY / "ruff.toml") if c.exists())
        banned = tomllib.loads(config.read_text())["lint"]["flake8-tidy-imports"]["banned-api"]
        above = {f"reprokit.{p}" for p in LAYERS if LAYERS[p] > LAYERS["study"]}
        above |= {f"reprokit.study.{p}" for p in STUDY_FLOORS[:STUDY_FLOORS.index(name)]}
        if set(banned) != above:
            wrong[name] = sorted(set(banned) ^ above)
    assert wrong == {}


def test_nothing_of_ours_is_loaded_by_path():
    loading = {module_name(p) for p in PACKAGE.rglob("*.py") if "spec_from_file_location" in p.read_text()}
    assert loading == LOADERS


def shared(name: str) -> bool:
    return name == "reprokit.wire" or name.startswith("reprokit.wire.")


def test_engine_side_code_imports_the_standard_library_mxnet_sockeye_bytescheduler_and_reprokit_wire_only():
    ours = {p.stem for p in PROGRAM_DIR.glob("*.py")}
    allowed = set(sys.stdlib_module_names) | ENGINE_SIDE_THIRD_PARTY | ours
    foreign = {f"{p.name}: {name}" for p in PROGRAM_DIR.glob("*.py") if p.name != "ck_hooks.py"
               for name in imported(p, p.stem) if name.split(".")[0] not in allowed and not shared(name)}
    assert foreign == set()


def test_reprokit_wire_imports_the_standard_library_only():
    """The framework imports it, in an interpreter without MXNet; the engine's, beside the scripts, without the rest
    of reprokit (so reprokit/__init__.py, shipped with it, imports nothing either)."""
    outside = {f"{path.name}: {name}" for path in wire_files()
               for name in imported(path, module_name(path))
               if name.split(".")[0] not in sys.stdlib_module_names and not shared(name)}
    assert outside == set()
    assert imported(PACKAGE / "__init__.py", "reprokit") == []


def test_every_run_ships_reprokit_wire_under_its_import_path():
    shipped = {shipped_name(f) for f in engine_files()}
    assert {f"reprokit/wire/{p.name}" for p in WIRE_DIR.glob("*.py")} | {"reprokit/__init__.py"} <= shipped
    assert "train.py" in shipped and "sockeye_run.py" in shipped  # the scripts land flat, beside it


def test_the_framework_imports_no_engine_side_script():
    """What both sides read is in reprokit.wire; program/p3's scripts (MXNet's side) stay out of the framework."""
    scripts = {p.stem for p in PROGRAM_DIR.glob("*.py")}
    found = {f"{module_name(p)}: {name}" for p in PACKAGE.rglob("*.py")
             for name in imported(p, module_name(p)) if name.split(".")[0] in scripts}
    assert found == set()


def test_ruffs_banned_imports_in_each_layers_folder_are_the_layers_above_it():
    """`make lint` refuses an upward import as it is typed: the ruff.toml nearest each package bans exactly the
    packages of a higher layer (the package's own modules, core/ and emulation/ share src/reprokit/ruff.toml)."""
    packages = {p.stem for p in PACKAGE.iterdir() if p.name != "__init__.py" and (p.suffix == ".py" or p.is_dir())
                and p.name != "__pycache__"}
    wrong = {}
    for name in sorted(packages):
        config = next(c for c in (PACKAGE / name / "ruff.toml", PACKAGE / "ruff.toml") if c.exists())
        banned = tomllib.loads(config.read_text())["lint"]["flake8-tidy-imports"]["banned-api"]
        above = {f"reprokit.{p}" for p in packages if layer(f"reprokit.{p}") > layer(f"reprokit.{name}")}
        if name == "vocabulary":  # shares the package's config: what layer 0 may not import, less itself
            above |= {"reprokit.vocabulary"}
        if set(banned) != above:
            wrong[name] = sorted(set(banned) ^ above)
    assert wrong == {}
