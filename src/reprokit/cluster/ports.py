"""Ports: a free one here, a given one checked here, and either on a remote host through its own interpreter."""
from __future__ import annotations

import shlex
import socket
from typing import TYPE_CHECKING

from reprokit.errors import UserError

if TYPE_CHECKING:  # paramiko only where a remote host is asked
    from reprokit.cluster.ssh import Connection

LOCALHOST = "127.0.0.1"
PORT_CHECK_TIMEOUT_S = 60
FREE_PORT_SNIPPET = ("import socket,sys; s=socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); "
                     "print(s.getsockname()[1])")


def pick_free_port(host: str = LOCALHOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _port_in_use(port: int, host: str) -> UserError:
    return UserError(f"port {port} on {host} is already in use; choose another with "
                     f"--env.PS_ROOT_PORT=N or leave PS_ROOT_PORT empty to pick a free one")


def check_port_free(host: str, port: int) -> None:
    hold_port(port, host).close()


def hold_port(port: int = 0, address: str = LOCALHOST) -> socket.socket:
    """Bind ``port`` (0: a free one) and keep it bound until the socket is closed, so no other run takes it.

    Bound without SO_REUSEADDR, so the kernel gives us a port nobody uses and no later bind without it (another
    run's choice, a check) gets it; SO_REUSEADDR is set after, so the role meant to listen there can still bind
    it (Linux lets a socket with SO_REUSEADDR, as ZeroMQ's listener has, bind beside one that does not listen).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise _port_in_use(port, address) from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def free_port(conn: "Connection", python: str, address: str, port: int = 0) -> int:
    """Bind ``port`` (0: any) on ``address`` with the host's interpreter; returns the port, or raises."""
    command = " ".join(shlex.quote(a) for a in [python, "-c", FREE_PORT_SNIPPET, address, str(port)])
    result = conn.run(command, timeout=PORT_CHECK_TIMEOUT_S)
    if result.exit_code != 0:
        from reprokit.cluster.interpreter import NOT_RUNNABLE, not_there

        if result.exit_code in NOT_RUNNABLE:  # the interpreter, not the port, is the problem
            raise not_there(conn, python, result.stderr)
        if "Address already in use" in result.stderr:
            raise UserError(f"port {port} on {conn.endpoint.label} is already in use; choose another with "
                            f"--env.PS_ROOT_PORT=N or leave PS_ROOT_PORT empty to pick a free one")
        raise UserError(f"{conn.endpoint.label}: cannot bind a port on {address}: "
                        f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
    return int(result.stdout.strip())
