"""Fixtures and tiers: tests/unit (no ck), tests/ck and tests/engine (the real ck CLI and its MXNet engine,
marked `ck` here), tests/faults (the fault and hostile-input suite, also `ck`), `root` tests. `parallel`: tests that
may share the machine with another (tests/unit, and the modules and the tests refused before any role starts that
say so); `make test` runs the others one at a time, then these on two workers.

Root tests need root (network namespaces, sshd, tc): they skip for a developer without it and fail under CI,
which runs as root, so they never skip silently there.
"""
import os
import signal
from pathlib import Path

import pytest

from support.ckcli import CkCli, bootstrap, own_ck

TESTS = Path(__file__).resolve().parent

# A suite started in the background by a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and an
# ignored signal stays ignored across exec: every process the tests send Ctrl-C to would then never see it.
# A handler (unlike SIG_IGN) is reset to the default in children, so they get the SIGINT a terminal would send.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    for item in items:
        parents = set(Path(str(item.fspath)).parents)
        if {TESTS / "ck", TESTS / "engine", TESTS / "faults"} & parents:
            item.add_marker(pytest.mark.ck)
        if TESTS / "unit" in parents:
            item.add_marker(pytest.mark.parallel)
        if item.get_closest_marker("parallel") and item.get_closest_marker("root"):
            # a root test starts namespaces, links and trainings that time what they detect: it must run alone
            raise pytest.UsageError(f"{item.nodeid} is marked both parallel and root: a root test runs alone "
                                    "(drop the parallel mark)")


def pytest_runtest_setup(item):
    if item.get_closest_marker("root") and os.geteuid() != 0:
        message = "needs root (network namespaces, sshd, tc)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI runs as root")
        pytest.skip(message)


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path


@pytest.fixture(scope="session")
def ck(tmp_path_factory) -> CkCli:
    """CK with this repository registered and the MXNet engine installed through `ck install`."""
    cli = CkCli(tmp_path_factory.mktemp("ck"))
    bootstrap(cli)
    return cli


@pytest.fixture
def bare_ck(tmp_path) -> CkCli:
    """CK with this repository registered and nothing installed."""
    return own_ck(tmp_path / "ck")


