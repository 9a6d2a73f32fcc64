"""Injection: shell syntax in a value the user gives never runs, on any path stock CK writes it into a script.

Stock CK writes every setting into its run script (`export NAME=VALUE`, unquoted) before our preprocess is
called, and package variables into install scripts after our setup hooks. Each case here gives one value
that would run `touch MARKER` in such a script, for every setting of program:p3 (its run_vars, the table CK
reads) and every package of this repository, and checks that the marker never appears, that one line names
the setting and what the shell would have made of the character, and that nothing was stored.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reprokit.data.iwslt import make_synthetic
from support.ckcli import REPO_ROOT, CkCli, own_ck
from support.faults import expect, not_injected, one_clear_line

pytestmark = [pytest.mark.fault("injection"), pytest.mark.parallel]  # ck commands only: no testbed, no training, no timing

SETTINGS = sorted(json.loads((REPO_ROOT / "program" / "p3" / ".cm" / "meta.json").read_text())["run_vars"])
PACKAGES = {p.parent.parent.name: sorted(json.loads(p.read_text())["customize"]["install_env"])
            for p in sorted((REPO_ROOT / "package").glob("*/.cm/meta.json"))}
# The packages whose dependency (the engine) must be registered first, else CK installs it before any hook runs.
NEEDS_ENGINE = {p.parent.parent.name for p in sorted((REPO_ROOT / "package").glob("*/.cm/meta.json"))
                if any(dep.get("tags") == "lib,mxnet" for dep in json.loads(p.read_text()).get("deps", {}).values())}


def injections(marker: Path) -> dict[str, tuple[str, str]]:
    """Each way into a shell script: kind -> (value, what the refusal must call it)."""
    m = str(marker)
    return {
        "command substitution": (f"$(touch {m})", "a $ (variable or command substitution)"),
        "backticks": (f"`touch {m}`", "a backtick (command substitution)"),
        "semicolon and IFS": (f"1;touch${{IFS}}{m}", "a ; (a new command)"),
        "newline": (f"1\ntouch {m}", "a line break (a new command)"),
        "double quote": (f'1";touch {m};"', "a double quote (quoting)"),
        "single quote": (f"1';touch {m};'", "a single quote (quoting)"),
        "backslash": (f"1\\;touch {m}", "a backslash (an escape)"),
    }


def each_injection(tmp_path: Path, attempt) -> None:
    """``attempt(kind, value, case_dir) -> (exit code, output)`` for every injection at once (each ck is
    mostly waiting), then the checks: no marker, non-zero exit, one line naming the setting and the kind."""
    cases = {kind: (value, meaning, tmp_path / kind.replace(" ", "-"))
             for kind, (value, meaning) in injections(tmp_path / "MARKER").items()}
    for _, _, case_dir in cases.values():
        case_dir.mkdir()
    # each value's marker is its own: a shared name would hide which one ran
    for kind, (value, meaning, case_dir) in list(cases.items()):
        cases[kind] = (value.replace(str(tmp_path / "MARKER"), str(case_dir / "MARKER")), meaning, case_dir)
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        done = {kind: pool.submit(attempt, kind, value, case_dir) for kind, (value, _, case_dir) in cases.items()}
        outcomes = {kind: future.result() for kind, future in done.items()}
    for kind, (code, output, name) in outcomes.items():
        value, meaning, case_dir = cases[kind]
        not_injected(case_dir / "MARKER")
        expect(code != 0, "other", f"{kind}: exit code 0 for a refused value:\n{output[-2000:]}")
        one_clear_line(output, f"{name}=", meaning, "refused before anything runs")


@pytest.fixture(scope="module")
def repo_ck(tmp_path_factory) -> CkCli:
    """CK with this repository registered and nothing installed: every refusal comes before an engine is needed."""
    return own_ck(tmp_path_factory.mktemp("injection-ck"))


@pytest.fixture(scope="module")
def engine_ck(ck, tmp_path_factory) -> CkCli:
    """CK with the session's engine registered (detected, not reinstalled), for packages that depend on it."""
    return own_ck(tmp_path_factory.mktemp("injection-engine-ck"), engine_from=ck)


@pytest.mark.parametrize("name", SETTINGS)
def test_a_setting_of_ck_run_holding_shell_syntax_is_refused_before_the_run_script_runs(repo_ck, tmp_path, name):
    def attempt(kind, value, case_dir):
        proc, _ = repo_ck.run_p3(case_dir, "--cmd_key=resnet", f"--env.{name}={value}", timeout=120)
        result = json.loads((case_dir / "p3-result.json").read_text())
        expect(not result["run_success"] and name in result["failure_reason"], "data-lost",
               f"{kind}: the run folder does not say why the run was refused: {result}")
        return proc.returncode, proc.stdout + proc.stderr, name

    each_injection(tmp_path, attempt)


def test_a_setting_name_holding_shell_syntax_is_refused_too(repo_ck, tmp_path):
    marker = tmp_path / "MARKER"
    name = f"A;touch${{IFS}}{marker};B"
    proc, _ = repo_ck.run_p3(tmp_path, "--cmd_key=resnet", f"--env.{name}=1", timeout=120)
    not_injected(marker)
    expect(proc.returncode != 0, "other", "exit code 0 for a refused setting name")
    # The name is quoted as far as 80 characters (values.shown), then its length.
    one_clear_line(proc.stdout + proc.stderr, f"setting name {name[:80]!r}", "is not a name", "rename it")


@pytest.mark.parametrize("name", SETTINGS)
def test_a_study_override_holding_shell_syntax_is_refused_before_its_first_run(repo_ck, tmp_path, name):
    def attempt(kind, value, case_dir):
        store = case_dir / "store"
        proc = repo_ck("reproduce", "study:sysml19-p3", "--quick", f"--env.{name}={value}", f"--store={store}",
                       timeout=120)
        stored = sorted(p.name for p in store.rglob("*.json")) if store.exists() else []
        expect(not stored, "data-lost", f"{kind}: a refused sweep stored {stored}")
        return proc.returncode, proc.stdout + proc.stderr, name

    each_injection(tmp_path, attempt)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_variable_holding_shell_syntax_is_refused_before_the_install_script_runs(
        request, tmp_path, package):
    cli = request.getfixturevalue("engine_ck" if package in NEEDS_ENGINE else "repo_ck")
    keys = PACKAGES[package]
    kinds = list(injections(tmp_path))

    def attempt(kind, value, case_dir):
        name = keys[kinds.index(kind) % len(keys)]  # the injections go round the package's variables
        proc = cli("install", f"package:{package}", "--quiet", f"--env.{name}={value}", timeout=300)
        return proc.returncode, proc.stdout + proc.stderr, name

    envs_before = cli("show", "env", check=True).stdout
    each_injection(tmp_path, attempt)
    expect(cli("show", "env", check=True).stdout == envs_before, "data-lost", "a refused install registered an env")


@pytest.mark.parametrize("option, name", [("-DX={value}", "X="), ("--param={value}", "CK_PARAM=")])
def test_install_parameters_holding_shell_syntax_are_refused_too(repo_ck, tmp_path, option, name):
    """-DNAME=VALUE and --param=VALUE reach CK's install script without passing any hook's input."""
    def attempt(kind, value, case_dir):
        proc = repo_ck("install", "package:dataset-iwslt15-en-vi-synthetic", "--quiet", option.format(value=value),
                       timeout=300)
        return proc.returncode, proc.stdout + proc.stderr, name.rstrip("=")

    each_injection(tmp_path, attempt)


def test_arguments_after_the_double_dash_are_refused_before_the_run_script_runs(repo_ck, tmp_path):
    marker = tmp_path / "MARKER"
    proc, _ = repo_ck.run_p3(tmp_path, "--cmd_key=resnet", "--", f"$(touch {marker})", timeout=120)
    not_injected(marker)
    expect(proc.returncode != 0, "other", "exit code 0 for refused arguments")
    one_clear_line(proc.stdout + proc.stderr, "program:p3 takes no arguments after --", "refused before anything runs")


@pytest.mark.parametrize("option", ["--extra_tags=a\ntouch {marker}", "--extra_version=$(touch {marker})",
                                    "--env.X=$(touch {marker})"])
def test_soft_detection_refuses_shell_syntax_in_what_it_writes_into_the_env_script(repo_ck, tmp_path, option):
    """Tags and the version go into the env script's comment lines, variables into its export lines; the
    script is sourced by every later run and install that uses the entry."""
    make_synthetic(tmp_path / "data" / "plain", train_pairs=30)
    marker = tmp_path / "MARKER"
    proc = repo_ck("detect", "soft:dataset.iwslt15.en-vi", f"--search_dirs={tmp_path / 'data'}", "--quiet",
                   option.format(marker=marker), timeout=120)
    for script in Path(repo_ck.env["CK_REPOS"]).glob("local/env/*/env.sh"):
        expect(str(marker) not in script.read_text(), "injection", f"{script} holds the injected command")
    not_injected(marker)
    expect(proc.returncode != 0, "other", "exit code 0 for a refused detection")
    one_clear_line(proc.stdout + proc.stderr, "CK error: [soft]", "holds a", "refused before anything runs")


def test_a_run_batch_name_holding_shell_syntax_is_refused(repo_ck, tmp_path):
    """CK runs its run script by this name, unquoted, inside bash -c "..."."""
    marker = tmp_path / "MARKER"
    proc, _ = repo_ck.run_p3(tmp_path, "--cmd_key=resnet", f'--run_batch_name=x.sh";touch {marker};"', timeout=120)
    not_injected(marker)
    expect(proc.returncode != 0, "other", "exit code 0 for a refused script name")
    one_clear_line(proc.stdout + proc.stderr, "run_batch_name=", "a double quote", "refused before anything runs")
