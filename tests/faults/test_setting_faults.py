"""Settings: limits and output paths are checked before anything starts, on this machine, in a study and on a
cluster (each host's cores and folders, over SSH, before any role starts)."""
from __future__ import annotations

import os

import pytest

from reprokit.cluster import rundir
from reprokit.cluster.hosts import load
from reprokit.cluster.ssh import Connection, resolve
from reprokit.core.errors import UserError
from reprokit.run.settings import ROLES_PER_CORE
from support.faults import expect, one_clear_line
from support.testbed import make_testbed

pytestmark = pytest.mark.fault("settings")


def nothing_started(run_dir) -> None:
    """No role was launched: the launcher writes logs/ and launch.json as soon as it starts one."""
    started = [name for name in ("logs", "launch.json") if (run_dir / name).exists()]
    expect(not started, "other", f"the run started before refusing its settings: {started} in {run_dir}")


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
@pytest.mark.parametrize("args, names", [
    (["--env.NUM_WORKERS=1000"], ["NUM_WORKERS=1000 with NUM_SERVERS=1 puts 1001 workers and servers on this machine",
                                   f"at most {ROLES_PER_CORE * os.cpu_count()} fit"]),
    (["--env.NUM_SERVERS=1000000"], ["NUM_SERVERS must be at most 100000"]),
    (["--env.SEED=4294967296"], ["SEED must be at most 4294967295"]),
    (["--env.SAVE_PARAMS=/nonexistent/dir/p.npz"], ["SAVE_PARAMS='/nonexistent/dir/p.npz'",
                                                    "the folder /nonexistent/dir does not exist"]),
    (["--env.SAVE_PARAMS=/sys/p.npz"], ["SAVE_PARAMS='/sys/p.npz'", "cannot write into /sys"]),
    (["--cmd_key=sockeye", "--env.OUTPUT_FILE=/nonexistent/model"], ["OUTPUT_FILE='/nonexistent/model'",
                                                                     "does not exist"]),
])
def test_ck_run_refuses_settings_before_any_role_starts(ck, tmp_path, args, names):
    cmd_key = [] if any(a.startswith("--cmd_key") for a in args) else ["--cmd_key=resnet"]
    proc, out = ck.run_p3(tmp_path, *cmd_key, *args, timeout=120)
    expect(proc.returncode != 0, "other", "exit code 0 for refused settings")
    one_clear_line(proc.stdout + proc.stderr, "p3: error:", *names)
    nothing_started(tmp_path)
    expect(out["misc"]["run_success"] == "no", "other", "CK did not record the run as failed")


def test_a_relative_save_params_lands_in_the_run_folder(ck, tmp_path):
    proc, out = ck.run_p3(tmp_path, "--cmd_key=resnet", "--env.SAVE_PARAMS=params.npz", "--env.NUM_BATCHES=5",
                          "--env.DISP_BATCHES=2", "--env.BATCH_SIZE=8", "--env.VARIANT=baseline", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert (tmp_path / "params.npz").stat().st_size > 0


@pytest.mark.parallel  # ck commands only, refused before any role starts: no testbed, no training, nothing timed
@pytest.mark.parametrize("override, names", [
    ("NUM_WORKERS=1000", ["NUM_WORKERS=1000 with NUM_SERVERS=1 puts 1001 workers and servers"]),
    ("BATCH_SIZE=abc", ["BATCH_SIZE must be a whole number, got 'abc'"]),
    ("SAVE_PARAMS=/nonexistent/dir/p.npz", ["SAVE_PARAMS='/nonexistent/dir/p.npz'", "does not exist"]),
])
def test_a_study_refuses_settings_before_its_first_run_and_stores_nothing(bare_ck, tmp_path, override, names):
    store = tmp_path / "store"
    proc = bare_ck("reproduce", "study:sysml19-p3", "--quick", f"--env.{override}", f"--store={store}", timeout=120)
    expect(proc.returncode != 0, "other", "exit code 0 for a refused sweep")
    one_clear_line(proc.stdout + proc.stderr, *names)
    stored = sorted(p.name for p in store.rglob("*.json")) if store.exists() else []
    expect(not stored, "data-lost", f"a refused sweep stored {stored}")


@pytest.fixture(scope="module")
def testbed2(ck):
    state = make_testbed(ck, "injset2", 2)
    yield "injset2", state
    ck("testbed", "cluster:injset2", "--down", timeout=60)
    ck("rm", "machine:injset2", "--force")


@pytest.mark.root
@pytest.mark.parametrize("args, names", [
    # 2 hosts: 10 workers and 1 server each, on hosts of this machine's cores
    ([f"--env.NUM_WORKERS={2 * ROLES_PER_CORE * os.cpu_count()}"],
     ["the layout puts", f"on 10.77.0.1, which has {os.cpu_count()} core(s)"]),
    (["--env.SAVE_PARAMS=/nonexistent/dir/p.npz"],
     ["10.77.0.1: SAVE_PARAMS='/nonexistent/dir/p.npz': cannot write into /nonexistent/dir there"]),
    (["--env.SAVE_PARAMS=p.npz"], ["SAVE_PARAMS='p.npz' is relative, but on a cluster"]),
])
def test_a_cluster_run_checks_each_hosts_cores_and_folders_before_any_role_starts(ck, testbed2, tmp_path, args,
                                                                                   names):
    name, _ = testbed2
    proc, _ = ck.run_p3(tmp_path, "--cmd_key=resnet", f"--target={name}", *args, timeout=180)
    expect(proc.returncode != 0, "other", "exit code 0 for refused settings")
    one_clear_line(proc.stdout + proc.stderr, *names)
    expect(not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir()), "other",
           "a role started before the settings were refused")


@pytest.mark.root
def test_the_output_folder_check_on_a_host_passes_where_a_file_can_be_written_and_leaves_nothing(testbed2, tmp_path):
    _, state = testbed2
    cluster = load(str(state / "hosts.json"))
    conn = Connection(resolve(cluster.hosts[0], cluster)).open()
    try:
        rundir.check_output(conn, "SAVE_PARAMS", str(tmp_path / "p.npz"))  # the hosts share this file system
        assert list(tmp_path.iterdir()) == []
        with pytest.raises(UserError, match=r"SAVE_PARAMS='/sys/p.npz': cannot write into /sys there"):
            rundir.check_output(conn, "SAVE_PARAMS", "/sys/p.npz")
        with pytest.raises(UserError, match=r"the name is 304 bytes long, more than the 255 its filesystem there "
                                            r"allows; shorten the name"):
            rundir.check_output(conn, "SAVE_PARAMS", str(tmp_path / ("x" * 300 + ".npz")))
        with pytest.raises(UserError, match=r"MB free in .* there, 1048576.0 MB needed; free space there"):
            rundir.check_output(conn, "SAVE_PARAMS", str(tmp_path / "p.npz"), need_bytes=1024 ** 4)  # 1 TiB
        assert list(tmp_path.iterdir()) == []
    finally:
        conn.close()
