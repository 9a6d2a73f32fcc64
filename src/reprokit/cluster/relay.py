"""stdin/stdout <-> TCP relay, for ssh's ProxyCommand.

    ip netns exec NS python -m reprokit.cluster.relay HOST PORT

The testbed's ssh_config uses it to reach sshd inside a network namespace
from the controller, which stays in its own namespace.
"""
from __future__ import annotations

import os
import selectors
import socket
import sys

CONNECT_TIMEOUT_S = 10


def relay(host: str, port: int) -> int:
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        print(f"relay: cannot connect to {host}:{port}: {exc}", file=sys.stderr)
        return 1
    sock.settimeout(None)
    # SSH sends many small packets; without this, Nagle and delayed ACKs add ~40 ms per round trip.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "stdin")
    selector.register(sock, selectors.EVENT_READ, "socket")
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                data = os.read(0, 65536)
                if not data:
                    sock.shutdown(socket.SHUT_WR)
                    selector.unregister(0)
                    continue
                sock.sendall(data)
            else:
                data = sock.recv(65536)
                if not data:
                    return 0
                os.write(1, data)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m reprokit.cluster.relay HOST PORT")
    sys.exit(relay(sys.argv[1], int(sys.argv[2])))
