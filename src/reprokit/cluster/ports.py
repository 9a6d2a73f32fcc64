"""Ports: a free one here, a given one checked here, and either on a remote host through its own interpreter."""
from __future__ import annotations

import inspect
import shlex
import socket
from typing import TYPE_CHECKING

from reprokit.cluster import portchoice
from reprokit.core.errors import UserError

if TYPE_CHECKING:  # paramiko only where a remote host is asked
    from paramiko import Channel

    from reprokit.cluster.ssh import Connection

LOCALHOST = "127.0.0.1"
PORT_CHECK_TIMEOUT_S = 60
FREE_PORT_SNIPPET = ("import socket,sys; s=socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); "
                     "print(s.getsockname()[1])")
PORT_CHOICE_CODE = inspect.getsource(portchoice)
# As hold_port, then wait for the end of stdin (the launcher's channel) before letting the port go.
HOLD_PORT_SNIPPET = PORT_CHOICE_CODE + """
import sys
port = int(sys.argv[2])
if port:
    s = socket.socket()
    s.bind((sys.argv[1], port))
else:
    s = bind_free_port(sys.argv[1])
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


def pick_free_port(host: str = LOCALHOST) -> int:
    with portchoice.bind_free_port(host) as sock:
        port: int = sock.getsockname()[1]
        return port


def _port_in_use(port: int, host: str) -> UserError:
    return UserError(f"port {port} on {host} is already in use; choose another with "
                     f"--env.PS_ROOT_PORT=N or leave PS_ROOT_PORT empty to pick a free one")


def check_port_free(host: str, port: int) -> None:
    hold_port(port, host).close()


def hold_port(port: int = 0, address: str = LOCALHOST) -> socket.socket:
    """Bind ``port`` (0: a free one below the ephemeral range, see portchoice) and keep it bound until the socket
    is closed, so no other run takes it.

    Bound without SO_REUSEADDR, so the kernel gives us a port nobody uses and no later bind without it (another
    run's choice, a check) gets it; SO_REUSEADDR is set after, so the role meant to listen there can still bind
    it (Linux lets a socket with SO_REUSEADDR, as ZeroMQ's listener has, bind beside one that does not listen).
    """
    if port == 0:
        sock = portchoice.bind_free_port(address)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((address, port))
        except OSError:
            sock.close()
            raise _port_in_use(port, address) from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def free_port(conn: Connection, python: str, address: str, port: int = 0) -> int:
    """Bind ``port`` (0: any) on ``address`` with the host's interpreter; returns the port, or raises."""
    command = " ".join(shlex.quote(a) for a in [python, "-c", FREE_PORT_SNIPPET, address, str(port)])
    result = conn.run(command, timeout=PORT_CHECK_TIMEOUT_S)
    if result.exit_code != 0:
        raise _remote_bind_failed(conn, python, address, port, result.exit_code, result.stderr)
    return int(result.stdout.strip())


def hold_remote_port(conn: Connection, python: str, address: str, port: int = 0) -> tuple[int, Channel]:
    """``hold_port`` on a remote host: the port stays held by a small process of the host's interpreter until
    the returned channel closes (the launcher closes it at the end of the run; a lost connection closes it too)."""
    command = " ".join(shlex.quote(a) for a in [python, "-c", HOLD_PORT_SNIPPET, address, str(port)])
    channel = conn.start(command)
    channel.settimeout(PORT_CHECK_TIMEOUT_S)
    try:
        output = channel.makefile("rb")
        first = output.readline().decode(errors="replace")
        if first.strip().isdigit():
            channel.settimeout(None)  # held for the whole run
            return int(first), channel
        rest = output.read().decode(errors="replace")
        code = channel.recv_exit_status()
    except (TimeoutError, OSError):
        channel.close()
        raise UserError(f"{conn.endpoint.label}: no answer within {PORT_CHECK_TIMEOUT_S} s while binding a port "
                        f"on {address}") from None
    channel.close()
    raise _remote_bind_failed(conn, python, address, port, code, first + rest)


def _remote_bind_failed(conn: Connection, python: str, address: str, port: int, exit_code: int,
                        stderr: str) -> UserError:
    from reprokit.cluster.interpreter import NOT_RUNNABLE, not_there  # noqa: PLC0415  paramiko: run.launch, the store import ports

    if exit_code in NOT_RUNNABLE:  # the interpreter, not the port, is the problem
        return not_there(conn, python, stderr)
    if "Address already in use" in stderr:
        return _port_in_use(port, conn.endpoint.label)
    return UserError(f"{conn.endpoint.label}: cannot bind a port on {address}: "
                     f"{(stderr.strip().splitlines() or ['no output'])[-1]}")
