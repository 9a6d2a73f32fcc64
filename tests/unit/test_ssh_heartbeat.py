"""The lost-host heartbeat must tell a connection we closed from a host that went silent."""
import threading

import paramiko

from reprokit.cluster.ssh import Connection, Endpoint


class _Transport:
    def __init__(self, client: "_Client", fail: type[Exception]) -> None:
        self.client, self.fail = client, fail

    def is_active(self) -> bool:
        return not self.client.closed

    def open_session(self, timeout: float) -> None:
        # the race seen in CI: the run closes the connection while a heartbeat is in flight
        self.client.closed = True
        raise self.fail("closed under us")


class _Client:
    def __init__(self, fail: type[Exception]) -> None:
        self.closed = False
        self._transport = _Transport(self, fail)

    def get_transport(self) -> _Transport | None:
        return None if self.closed else self._transport


def _beat_once(fail: type[Exception]) -> tuple[Connection, list[BaseException]]:
    errors: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:
        conn = Connection(Endpoint(name="h", hostname="127.0.0.1", port=22, user="u"))
        conn.client = _Client(fail)  # type: ignore[assignment]
        conn.start_heartbeat(interval_s=0.01, timeout_s=1)
        assert conn._heartbeat is not None
        conn._heartbeat.join(timeout=5)
        assert not conn._heartbeat.is_alive()
    finally:
        threading.excepthook = previous
    return conn, errors


def test_a_connection_closed_during_a_heartbeat_ends_the_thread_quietly_and_is_not_counted_lost():
    for fail in (paramiko.SSHException, EOFError, OSError):
        conn, errors = _beat_once(fail)
        assert errors == []  # no traceback reaches the run's output
        assert conn.lost is None
        assert not conn.is_alive()
