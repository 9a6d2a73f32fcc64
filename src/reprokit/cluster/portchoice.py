"""The scheduler's free port, chosen below the kernel's ephemeral range. Standard library only: its source is also
shipped to remote hosts' interpreters (ports.HOLD_PORT_SNIPPET, run/jobprep.FREE_PORT_CODE).

Why below that range: every other role's own port comes from bind(0) (ps-lite's GetAvailablePort) and every
outgoing connection's from the same range. A port from inside it, even held, was taken by a role of a run started
beside ours: ZeroMQ's listener sets SO_REUSEADDR and may bind beside a held socket that does not listen, so that
run's worker listened on our scheduler's port and our workers' registrations reached it (a worker crashed with
SIGSEGV, twice in CI; "bind failed" once in a Slurm test).
"""
import random
import socket


def bind_free_port(address: str) -> socket.socket:
    """A TCP socket bound (without SO_REUSEADDR) to a free port of ``address`` below the ephemeral range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for port in random.sample(range(10000, low), min(200, max(0, low - 10000))):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((address, port))
        except OSError:
            sock.close()
            continue
        return sock
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((address, 0))  # no free port below the range: the kernel's choice
    return sock
