"""The repository's CK alias is the original workflow's (reproduce-sysml19-paper-p3): bootstrap moves an older
registration to it, and stock `ck pull repo:reproduce-sysml19-paper-p3` / `ck pull all` update a git clone of
ours from its upstream (a local bare repository standing in for the remote)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.ckcli import REPO_ROOT, CkCli

ALIAS, OLD_ALIAS = "reproduce-sysml19-paper-p3", "ck-sysml19-p3"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60).stdout.strip()


def bootstrap_repo_only(cli: CkCli, clone: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reprokit.bootstrap", "--repo-only"], cwd=cli.root,
                          env={**cli.env, "PYTHONPATH": str(clone / "src")}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def upstream(tmp_path):
    """A bare repository holding this working tree as one commit, a clone of it (ours) and a second clone that
    pushes changes upstream."""
    seed = tmp_path / "seed"
    files = git(REPO_ROOT, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for name in filter(None, files):
        source = REPO_ROOT / name
        if source.is_file() or source.is_symlink():
            (seed / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, seed / name, follow_symlinks=False)
    git(seed, "init", "-q", "-b", "main")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "seed")
    git(tmp_path, "clone", "-q", "--bare", str(seed), "remote.git")
    git(tmp_path, "clone", "-q", str(tmp_path / "remote.git"), "clone")
    git(tmp_path, "clone", "-q", str(tmp_path / "remote.git"), "other")
    return tmp_path


def push_change(work: Path, name: str) -> str:
    other = work / "other"
    git(other, "pull", "-q")
    (other / name).write_text("changed upstream\n")
    git(other, "add", name)
    git(other, "commit", "-qm", f"add {name}")
    git(other, "push", "-q")
    return git(other, "rev-parse", "HEAD")


def test_the_repository_alias_is_the_original_workflows():
    assert json.loads((REPO_ROOT / ".ckr.json").read_text())["data_alias"] == ALIAS


def test_bootstrap_moves_the_old_alias_and_ck_pull_updates_the_clone(upstream, tmp_path):
    clone = upstream / "clone"
    cli = CkCli(tmp_path / "ck")
    cli.root.mkdir()
    # What earlier versions registered: the same repository under the old alias.
    ckr = clone / ".ckr.json"
    ours = ckr.read_text()
    ckr.write_text(ours.replace(ALIAS, OLD_ALIAS))
    cli("import", "repo", f"--path={clone}", "--quiet", check=True)
    ckr.write_text(ours)
    assert cli("where", f"repo:{OLD_ALIAS}").returncode == 0

    proc = bootstrap_repo_only(cli, clone)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"unregistering the old alias {OLD_ALIAS}" in proc.stdout
    assert cli("where", f"repo:{OLD_ALIAS}").returncode != 0
    assert cli("where", f"repo:{ALIAS}", check=True).stdout.strip().splitlines()[-1] == str(clone)
    assert git(clone, "status", "--porcelain") == ""  # registering wrote nothing into the clone
    loaded = json.loads(cli("load", f"repo:{ALIAS}", "--out=json", check=True).stdout)["dict"]
    assert (loaded["shared"], loaded["url"]) == ("git", str(upstream / "remote.git"))
    again = bootstrap_repo_only(cli, clone)  # idempotent
    assert again.returncode == 0 and "already registered" in again.stdout, again.stdout + again.stderr

    head = push_change(upstream, "UPSTREAM-1")
    proc = cli("pull", f"repo:{ALIAS}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert git(clone, "rev-parse", "HEAD") == head and (clone / "UPSTREAM-1").is_file()

    head = push_change(upstream, "UPSTREAM-2")
    proc = cli("pull", "all", "--out=json")  # the non-interactive form docs/reference/setup.md names
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert git(clone, "rev-parse", "HEAD") == head


def test_a_copy_without_an_upstream_is_registered_but_not_marked_for_git_pull(upstream, tmp_path):
    clone = upstream / "clone"
    git(clone, "branch", "--unset-upstream")
    cli = CkCli(tmp_path / "ck")
    cli.root.mkdir()
    proc = bootstrap_repo_only(cli, clone)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot update this copy" in proc.stdout
    assert "shared" not in json.loads(cli("load", f"repo:{ALIAS}", "--out=json", check=True).stdout)["dict"]
