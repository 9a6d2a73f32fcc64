"""What a run ships into each role's working folder (reprokit.core.shipping): program/p3's scripts flat, the package
reprokit.wire under its import path, the same locally (stage) and over the exec channel (ExecTransfer)."""
import subprocess
import sys
import types
from pathlib import Path

from reprokit.cluster.transfer import ExecTransfer
from reprokit.core.shipping import shipped_name, stage
from reprokit.engines.stock import engine_files


def tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def expected() -> set[str]:
    return {shipped_name(f) for f in engine_files()}


def test_the_scripts_land_flat_and_reprokit_wire_under_its_import_path(tmp_path):
    stage(engine_files(), tmp_path)
    stage(engine_files(), tmp_path)  # again: replaced in place
    assert tree(tmp_path) == expected()
    assert {"train.py", "reprokit/__init__.py", "reprokit/wire/p3_timeline.py"} <= expected()
    # As a role starts: a script of the folder, whose folder is first on the path (PYTHONPATH ignored).
    (tmp_path / "probe.py").write_text("import reprokit.wire.p3_timeline as m, reprokit.wire.role_van\nprint(m.__file__)\n")
    out = subprocess.run([sys.executable, "-E", "probe.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    (tmp_path / "probe.py").unlink()
    assert out.stdout.strip() == str(tmp_path / "reprokit" / "wire" / "p3_timeline.py"), out.stderr


class LocalShell:
    """A Connection whose commands run in a local shell: the exec channel without sshd."""
    endpoint = types.SimpleNamespace(label="local")

    def run(self, script, timeout=None, stdin=None, stdout=None):
        done = subprocess.run(["bash", "-c", script], stdin=stdin, capture_output=True, timeout=timeout)
        return types.SimpleNamespace(exit_code=done.returncode, stdout=done.stdout.decode(),
                                     stderr=done.stderr.decode())


def test_the_exec_channel_ships_the_same_tree(tmp_path):
    transfer = ExecTransfer(LocalShell())
    files = engine_files()
    transfer.put(files, str(tmp_path))
    transfer.put(files, str(tmp_path))  # again, over the first copy
    assert tree(tmp_path) == expected()
    assert all((tmp_path / shipped_name(f)).read_bytes() == Path(f).read_bytes() for f in files)
