"""stdin/stdout <-> TCP relay, for ssh's ProxyCommand.

    ip netns exec NS python -m reprokit.cluster.relay HOST PORT

The testbed's ssh_config uses it to reach sshd inside a network namespace
from the controller, which stays in its own namespace.

Each direction has its own thread, so a write that blocks one way never stops the other way from being read.
paramiko needs that: its transport thread answers a channel's close itself, and while another thread of the
launcher is blocked writing (a file shipped to the host), that answer waits for the write lock and the transport
thread stops reading. A single loop that forwarded both ways then blocked writing what sshd sent (nobody read it),
stopped reading what paramiko sent, and the connection froze for good: "no answer within 60 s" and runs whose
workers never started, now and then, on the testbed.
"""
from __future__ import annotations

import os
import socket
import sys
import threading

CONNECT_TIMEOUT_S = 10
CHUNK = 65536


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def relay(host: str, port: int, stdin: int = 0, stdout: int = 1) -> int:
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        print(f"relay: cannot connect to {host}:{port}: {exc}", file=sys.stderr)
        return 1
    sock.settimeout(None)
    # SSH sends many small packets; without this, Nagle and delayed ACKs add ~40 ms per round trip.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ended = threading.Event()  # the host closed the connection, or a side failed: the relay ends

    def upstream() -> None:  # stdin -> host; at stdin's end, half-close so the host sees EOF
        try:
            while data := os.read(stdin, CHUNK):
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            ended.set()

    def downstream() -> None:  # host -> stdout, until the host closes
        try:
            while data := sock.recv(CHUNK):
                _write_all(stdout, data)
        except OSError:
            pass
        ended.set()

    for direction in (upstream, downstream):
        threading.Thread(target=direction, daemon=True).start()
    ended.wait()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m reprokit.cluster.relay HOST PORT")
    sys.exit(relay(sys.argv[1], int(sys.argv[2])))
