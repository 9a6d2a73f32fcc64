"""Imports only go down: ck -> study -> run -> engines -> cluster/data -> model -> core, and code loaded by path
goes through one loader. Code shipped to the engine's interpreter imports the standard library, MXNet (with
numpy), Sockeye and ByteScheduler (its variant) only; what the framework loads of it, the standard library only."""
import ast
import sys
import tomllib
from pathlib import Path

from reprokit.core.paths import PROGRAM_DIR, SRC_DIR

PACKAGE = SRC_DIR / "reprokit"
# Higher may import lower or equal; anything else under reprokit (errors, values, files, paths, ...) is core (0).
LAYERS = {"ck": 6, "study": 5, "run": 4, "engines": 3, "cluster": 2, "data": 2, "vocabulary": 1, "model": 1}
# Loading code by path: the one loader, and im2rec from MXNet's own tools (in the engine's interpreter).
LOADERS = {"reprokit.engine_side", "reprokit.data.recordio"}
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


def test_code_is_loaded_by_path_only_through_the_one_loader():
    loading = {module_name(p) for p in PACKAGE.rglob("*.py") if "spec_from_file_location" in p.read_text()}
    assert loading == LOADERS


def test_engine_side_code_imports_the_standard_library_mxnet_sockeye_and_bytescheduler_only():
    ours = {p.stem for p in PROGRAM_DIR.glob("*.py")}
    allowed = set(sys.stdlib_module_names) | ENGINE_SIDE_THIRD_PARTY | ours
    foreign = {f"{p.name}: {name}" for p in PROGRAM_DIR.glob("*.py") if p.name != "ck_hooks.py"
               for name in imported(p, p.stem) if name.split(".")[0] not in allowed}
    assert foreign == set()


def test_what_the_framework_loads_of_the_engine_side_imports_the_standard_library_only():
    """engine_side.program_module loads these into the framework's interpreter, which has no MXNet."""
    loaded = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        loaded |= {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and getattr(node.func, "id", getattr(node.func, "attr", "")) == "program_module"
                   and node.args and isinstance(node.args[0], ast.Constant)}
    assert loaded >= {"p3_timeline", "synthetic_corpus"}
    for name in loaded:
        path = PROGRAM_DIR / f"{name}.py"
        outside = [n for n in imported(path, name) if n.split(".")[0] not in sys.stdlib_module_names]
        assert outside == [], f"{path.name} imports {outside}"


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
