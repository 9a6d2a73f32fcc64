import json
import socket
import subprocess
import sys

import pytest

from reprokit.cluster.ports import HOLD_PORT_SNIPPET, check_port_free, hold_port, pick_free_port
from reprokit.core.errors import UserError
from reprokit.run.plan import Role, RolePlan, layout_roles, worker_threads_per_host
from reprokit.vocabulary import RoleKind


def plan(hosts=("127.0.0.1",), workers=2, servers=1):
    return RolePlan(run_id="r1", hosts=list(hosts), roles=layout_roles(list(hosts), workers, servers),
                    scheduler_host=hosts[0], scheduler_port=9000, command=["true"], worker_threads=1, timeout_s=60)


def test_local_layout_is_one_scheduler_one_server_two_workers():
    roles = layout_roles(["127.0.0.1"], 2, 1)
    assert [r.name for r in roles] == ["scheduler", "server#0", "worker#0", "worker#1"]
    assert {r.host for r in roles} == {"127.0.0.1"}


def test_roles_spread_round_robin_with_scheduler_on_first_host():
    roles = layout_roles(["a", "b", "c"], 3, 3)
    assert [(r.name, r.host) for r in roles] == [
        ("scheduler", "a"), ("server#0", "a"), ("server#1", "b"), ("server#2", "c"),
        ("worker#0", "a"), ("worker#1", "b"), ("worker#2", "c")]


def test_no_hosts_is_refused():
    with pytest.raises(UserError, match="no hosts"):
        layout_roles([], 1, 1)


def test_role_environment_is_mxnets_dmlc_contract():
    p = plan(workers=2, servers=2)
    worker = p.roles[-1]
    env = p.role_env(worker)
    assert env["DMLC_ROLE"] == "worker" and env["DMLC_WORKER_ID"] == "1"
    assert (env["DMLC_PS_ROOT_URI"], env["DMLC_PS_ROOT_PORT"]) == ("127.0.0.1", "9000")
    assert (env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"], env["DMLC_NODE_HOST"]) == ("2", "2", "127.0.0.1")
    assert env["REPROKIT_RUN_ID"] == "r1"
    assert "DMLC_WORKER_ID" not in p.role_env(p.roles[0])
    assert p.role_env(p.roles[0])["OMP_NUM_THREADS"] == "1"


def test_plan_round_trips_through_json(tmp_path):
    p = plan(hosts=("a", "b"))
    p.save(tmp_path / "plan.json")
    assert RolePlan.load(tmp_path / "plan.json") == p


def test_a_roles_kind_is_the_enum_stored_as_the_string_dmlc_role_names():
    p = plan()
    stored = json.loads(json.dumps(p.to_dict()))
    assert [r["kind"] for r in stored["roles"]] == ["scheduler", "server", "worker", "worker"]
    assert type(p.to_dict()["roles"][0]["kind"]) is str  # the plain string, not the enum, reaches the document
    again = RolePlan.from_dict(stored)
    assert [r.kind for r in again.roles] == [RoleKind.SCHEDULER, RoleKind.SERVER, RoleKind.WORKER, RoleKind.WORKER]
    assert all(type(r.kind) is RoleKind for r in again.roles)
    assert [p.role_env(r)["DMLC_ROLE"] for r in again.roles] == ["scheduler", "server", "worker", "worker"]
    with pytest.raises(ValueError):
        Role("client", 0, "a")


def test_threads_split_cores_between_workers():
    assert worker_threads_per_host(2, cores=2) == 1
    assert worker_threads_per_host(1, cores=8) == 8
    assert worker_threads_per_host(16, cores=8) == 1


def test_port_in_use_is_refused_with_the_fix():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is already in use.*--env.PS_ROOT_PORT"):
            check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", pick_free_port())


def test_a_held_port_is_nobody_elses_but_its_role_can_still_listen_there():
    with hold_port(0, "0.0.0.0") as held:
        port = held.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is already in use"):
            check_port_free("127.0.0.1", port)  # another run's check, or its explicit PS_ROOT_PORT
        assert port not in {pick_free_port() for _ in range(200)}  # another run's automatic choice
        with socket.socket() as scheduler:  # ZeroMQ's listener sets SO_REUSEADDR, as here
            scheduler.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            scheduler.bind(("0.0.0.0", port))
            scheduler.listen()


def test_a_chosen_scheduler_port_lies_below_the_range_other_roles_ports_come_from():
    """Other runs' roles bind(0) for their own ports and ZeroMQ may bind beside a held port that does not listen:
    a chosen port from the ephemeral range was once taken by another run's worker (a SIGSEGV in CI)."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(20):
        with hold_port(0, "0.0.0.0") as held:
            assert held.getsockname()[1] < low
        assert pick_free_port() < low
    remote = subprocess.Popen([sys.executable, "-c", HOLD_PORT_SNIPPET, "0.0.0.0", "0"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert int(remote.stdout.readline()) < low  # the snippet shipped to a remote host chooses the same way
    finally:
        remote.stdin.close()
        remote.wait(timeout=10)
