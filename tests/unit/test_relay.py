"""The testbed's ProxyCommand relay keeps both directions moving on their own."""
import socket
import subprocess
import sys
import threading

MB = 1 << 20


def test_a_peer_blocked_writing_still_gets_its_writes_through_while_the_host_streams_to_it():
    """paramiko's pattern: its one transport thread stops reading while it waits to write. The host (sshd) always
    reads and here streams 16 MB back. A relay that stopped reading stdin while blocked writing stdout froze both
    ways for good (the old single loop); with a thread per direction the peer's 16 MB go through, then it reads."""
    server = socket.create_server(("127.0.0.1", 0))
    received = []

    def host() -> None:  # reads everything it is sent, in its own thread, while it sends 16 MB
        conn, _ = server.accept()
        reader = threading.Thread(target=lambda: received.append(sum(iter(lambda: len(conn.recv(MB)), 0))))
        reader.start()
        conn.sendall(b"x" * 16 * MB)
        reader.join(30)
        conn.close()

    threading.Thread(target=host, daemon=True).start()
    peer, theirs = socket.socketpair()
    relay = subprocess.Popen([sys.executable, "-m", "reprokit.cluster.relay", "127.0.0.1", str(server.getsockname()[1])],
                             stdin=theirs.fileno(), stdout=theirs.fileno())
    theirs.close()
    try:
        peer.settimeout(20)
        peer.sendall(b"y" * 16 * MB)  # blocks for good if the relay stopped reading
        peer.shutdown(socket.SHUT_WR)
        got = 0
        while chunk := peer.recv(MB):
            got += len(chunk)
        assert got == 16 * MB
        assert relay.wait(timeout=10) == 0  # the host closed: the relay ends
        assert received == [16 * MB]
    finally:
        relay.kill()
        relay.wait()
        peer.close()
        server.close()


def test_the_relay_says_why_it_cannot_connect():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again below: nobody listens there
    proc = subprocess.run([sys.executable, "-m", "reprokit.cluster.relay", "127.0.0.1", str(port)],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and proc.stderr.startswith(f"relay: cannot connect to 127.0.0.1:{port}")
