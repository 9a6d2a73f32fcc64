"""After set-up, a new shell runs the README's commands as printed, once it follows the README's first lines."""
import os
import re
import subprocess

import pytest

from support.ckcli import REPO_ROOT

pytestmark = [pytest.mark.ck, pytest.mark.parallel]

README = (REPO_ROOT / "README.md").read_text()


def readme_commands() -> list[str]:
    """Every `ck ...` line of the README's code blocks, as printed (its comment dropped)."""
    blocks = re.findall(r"^ *```[^\n]*\n(.*?)^ *```", README, flags=re.M | re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("ck ")]


def test_a_new_shell_runs_the_readmes_first_ck_command_after_the_line_the_readme_gives(bare_ck):
    activate = re.search(r"run `(\. \.venv/bin/activate)` first", README)
    assert activate, "the README's first lines say how to put ck on the PATH"
    assert README.index(activate.group(0)) < README.index("\n## ")
    first = readme_commands()[0]
    assert first == "ck pull repo:reproduce-sysml19-paper-p3"
    # A login's PATH, without the venv's; this test's own CK_REPOS, with the repository registered.
    env = {"HOME": os.environ["HOME"], "PATH": "/usr/local/bin:/usr/bin:/bin",
           "CK_REPOS": bare_ck.env["CK_REPOS"], "CK_TOOLS": bare_ck.env["CK_TOOLS"]}
    bare = subprocess.run(["bash", "--noprofile", "--norc", "-c", first], cwd=REPO_ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 127  # what an evaluator hit before: ck is not on a new shell's PATH
    shell = subprocess.run(["bash", "--noprofile", "--norc", "-c", f"{activate.group(1)} && {first}"],
                           cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
    assert shell.returncode == 0, shell.stdout[-2000:] + shell.stderr[-2000:]
    assert "Traceback" not in shell.stdout + shell.stderr


def test_make_demo_ends_by_saying_how_to_put_ck_on_the_path():
    makefile = (REPO_ROOT / "Makefile").read_text()
    demo = makefile[makefile.index("\ndemo:"):].split("\n\n")[0]
    assert demo.strip().splitlines()[-1].endswith("'. $(VENV)/bin/activate' before the README's ck commands\"")
