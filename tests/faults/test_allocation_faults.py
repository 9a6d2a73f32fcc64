"""Hostile and broken allocations: node files, hostlists and YAML descriptions given to ck, stdin closed.

Hosts here are names under .invalid (RFC 2606): they never resolve, so a run that gets as far as connecting
fails at once, after the preprocess has expanded the allocation into the run's plan.
"""
import json

import pytest

from support.faults import expect, kept, no_traceback, not_injected, one_clear_line


@pytest.fixture
def machine(ck, tmp_path):
    """Register machine:NAME from a hosts.json holding ``data``; removed afterwards."""
    names = []

    def add(name, data):
        described = tmp_path / f"{name}.json"
        described.write_text(json.dumps(data))
        ck("add", f"machine:{name}", "--type=cluster", f"--config_file={described}", "--quiet", check=True)
        names.append(name)
        return name

    yield add
    for name in names:
        ck("rm", f"machine:{name}", "--force")


@pytest.mark.fault("settings")
def test_machine_made_once_follows_its_node_file_into_the_run_plan(ck, machine, tmp_path):
    nodefile = tmp_path / "OAR_NODEFILE"
    name = machine("alloc-follow", {"nodefile": str(nodefile), "user": "me"})
    missing = ck("check", f"cluster:{name}", timeout=60)
    expect(missing.returncode == 1, "other", f"exit {missing.returncode}")
    one_clear_line(missing.stdout + missing.stderr, f"machine:{name}: nodefile {nodefile} does not exist",
                   "allocation still running")

    nodefile.write_text("a.rk-alloc.invalid\n" * 2 + "b.rk-alloc.invalid\n" * 2)
    run, _ = ck.run_p3(tmp_path / "run1", "--cmd_key=resnet", f"--target={name}", "--env.PROFILE=smoke", timeout=120)
    output = run.stdout + run.stderr
    no_traceback(output)
    assert "p3: hosts from nodefile" in output and "a.rk-alloc.invalid, b.rk-alloc.invalid" in output
    spec = json.loads((tmp_path / "run1" / "p3-run.json").read_text())
    assert spec["plan"]["hosts"] == ["a.rk-alloc.invalid", "b.rk-alloc.invalid"]
    assert spec["cluster"]["hosts"] == [{"host": "a.rk-alloc.invalid", "user": "me", "slots": 2},
                                        {"host": "b.rk-alloc.invalid", "user": "me", "slots": 2}]
    expect(run.returncode != 0, "other", "a run on hosts that do not resolve succeeded")

    nodefile.write_text("c.rk-alloc.invalid\n")  # the next allocation
    run, _ = ck.run_p3(tmp_path / "run2", "--cmd_key=resnet", f"--target={name}", "--env.PROFILE=smoke", timeout=120)
    assert json.loads((tmp_path / "run2" / "p3-run.json").read_text())["plan"]["hosts"] == ["c.rk-alloc.invalid"]


@pytest.mark.fault("settings")
def test_unset_allocation_variable_is_one_line_and_a_failed_run(ck, machine, tmp_path):
    name = machine("alloc-unset", {"hostlist": "$REPROKIT_TEST_UNSET_NODELIST"})
    check = ck("check", f"cluster:{name}", timeout=60)
    expect(check.returncode == 1, "other", f"exit {check.returncode}")
    one_clear_line(check.stdout + check.stderr, "hostlist refers to $REPROKIT_TEST_UNSET_NODELIST",
                   "run inside the allocation")
    run, _ = ck.run_p3(tmp_path / "run", "--cmd_key=resnet", f"--target={name}", timeout=120)
    expect(run.returncode != 0, "other", "the run succeeded without hosts")
    line = one_clear_line(run.stdout + run.stderr, "p3: error:", "$REPROKIT_TEST_UNSET_NODELIST")
    expect((run.stdout + run.stderr).count(line) == 1, "unclear", "the error was repeated")


@pytest.mark.fault("settings")
def test_malformed_hostlist_is_one_clear_line(ck, machine):
    name = machine("alloc-bad", {"hostlist": "node[01-04,07"})
    check = ck("check", f"cluster:{name}", timeout=60)
    expect(check.returncode == 1, "other", f"exit {check.returncode}")
    one_clear_line(check.stdout + check.stderr, "hostlist 'node[01-04,07' is not a Slurm hostlist expression",
                   "node[01-04,07]")


@pytest.mark.fault("injection")
def test_shell_in_a_node_file_never_runs(ck, machine, tmp_path):
    marker = tmp_path / "injected"
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(f"a.rk-alloc.invalid\n$(touch {marker})\n`touch {marker}`\n")
    name = machine("alloc-inject", {"nodefile": str(nodefile)})
    check = ck("check", f"cluster:{name}", timeout=60)
    one_clear_line(check.stdout + check.stderr, f"nodefile {nodefile}: line 2", "is not a host name")
    run, _ = ck.run_p3(tmp_path / "run", "--cmd_key=resnet", f"--target={name}", timeout=120)
    expect(run.returncode != 0, "other", "the run succeeded")
    not_injected(marker)


@pytest.mark.fault("settings")
def test_yaml_description_is_converted_checked_and_registered(ck, tmp_path):
    described = tmp_path / "cluster.yaml"
    described.write_text("# my Slurm allocation\nhostlist: $SLURM_JOB_NODELIST\nuser: me\ninterface: ib0\n")
    proc = ck("convert", "cluster", f"--config_file={described}", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "cluster.json"
    assert json.loads(out.read_text()) == {"hostlist": "$SLURM_JOB_NODELIST", "user": "me", "interface": "ib0"}
    assert f"--config_file={out}" in proc.stdout
    ck("add", "machine:alloc-yaml", "--type=cluster", f"--config_file={out}", "--quiet", check=True)
    try:
        ck.env["SLURM_JOB_NODELIST"] = "n[1-2].rk-alloc.invalid"
        check = ck("check", "cluster:alloc-yaml", timeout=60)
        assert "cluster: hosts from hostlist n[1-2].rk-alloc.invalid: n1.rk-alloc.invalid, n2.rk-alloc.invalid" \
            in check.stdout
    finally:
        ck.env.pop("SLURM_JOB_NODELIST", None)
        ck("rm", "machine:alloc-yaml", "--force")


@pytest.mark.fault("settings")
@pytest.mark.parametrize("text,names", [
    ("hosts: [node1\n", ("cluster.yaml is not valid YAML at line 2",)),
    ("hostlist: n[1-\nuser: $(id)\n", ("user must be a user name", "got '$(id)'")),
    ("", ("cluster.yaml is empty",)),
])
def test_bad_yaml_description_is_one_line_and_writes_nothing(ck, tmp_path, text, names):
    described = tmp_path / "cluster.yaml"
    described.write_text(text)
    out = tmp_path / "hosts.json"
    out.write_text('["kept"]\n')
    before = out.read_bytes()
    proc = ck("convert", "cluster", f"--config_file={described}", f"--to={out}", timeout=60)
    expect(proc.returncode == 1, "other", f"exit {proc.returncode}")
    one_clear_line(proc.stdout + proc.stderr, *names)
    kept(out, before)
