"""SSH connections over paramiko: a small, Fabric-like API with strict host keys and key-only auth.

* ``~/.ssh/config`` (or the cluster's ``ssh_config``) is honoured: HostName,
  User, Port, IdentityFile, ProxyCommand, UserKnownHostsFile.
* Host keys are verified against known_hosts. With ``accept_new`` a host
  never seen before is accepted and recorded (OpenSSH's accept-new); a host
  whose key changed is always refused.
* Only keys authenticate. A host that wants a password is a failure; nothing
  ever prompts, and no secret is written anywhere.
* Every failure is an ``SshError`` with one line naming the host and the reason.
"""
from __future__ import annotations

import fcntl
import getpass
import logging
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import paramiko

from reprokit.cluster.hosts import ClusterConfig, HostSpec
from reprokit.core.errors import UserError
from reprokit.core.files import read_regular

# paramiko's transport threads log failures with tracebacks; our SshError lines already say what
# happened, so its records are dropped instead of reaching logging's last-resort handler.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False

CONNECT_TIMEOUT_S = 10.0
CHUNK_BYTES = 1 << 16
# While roles run, sshd must answer within HEARTBEAT_TIMEOUT_S every HEARTBEAT_S: a lost host is named within
# about 11 s. (paramiko's keepalive expects no answer, so a cut link would go unnoticed for TCP's many minutes.)
HEARTBEAT_S = 3.0
HEARTBEAT_TIMEOUT_S = 8.0
DEFAULT_SSH_CONFIG = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class SshError(UserError):
    """A host could not be reached, authenticated or trusted."""


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to connect to one host of a cluster, after ssh_config."""
    name: str  # as written in hosts.json
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    proxy_command: str | None = None
    known_hosts: str = DEFAULT_KNOWN_HOSTS
    accept_new: bool = False

    @property
    def label(self) -> str:
        return self.name if self.port == 22 else f"{self.name}:{self.port}"


def resolve(spec: HostSpec, cluster: ClusterConfig) -> Endpoint:
    """Combine a hosts.json entry with ssh_config; hosts.json wins where both say something."""
    config_path = Path(os.path.expanduser(cluster.ssh_config or DEFAULT_SSH_CONFIG))
    if cluster.ssh_config and not config_path.exists():
        raise SshError(f"ssh_config {config_path} named in the cluster description does not exist")
    lookup = _lookup(config_path, spec) if config_path.exists() else {}
    identity = (spec.identity_file,) if spec.identity_file else tuple(lookup.get("identityfile", []))
    known_hosts = cluster.known_hosts or (lookup.get("userknownhostsfile", "").split() or [DEFAULT_KNOWN_HOSTS])[0]
    return Endpoint(
        name=spec.host,
        hostname=lookup.get("hostname", spec.host),
        port=spec.port or int(lookup.get("port", 22)),
        user=spec.user or lookup.get("user") or getpass.getuser(),
        identity_files=tuple(os.path.expanduser(p) for p in identity),
        proxy_command=spec.proxy_command or lookup.get("proxycommand"),
        known_hosts=os.path.expanduser(known_hosts),
        accept_new=cluster.accept_new_host_keys,
    )


SSH_CONFIG_LIMIT = 1024 * 1024


def _lookup(config_path: Path, spec: HostSpec) -> dict[str, Any]:
    """ssh_config's options for ``spec.host``, with hosts.json's port and user in force: ssh_config keeps the
    first value it obtains, so they go first, and its tokens (%p, %r in a ProxyCommand) expand to them, not to
    ssh_config's own (which would reach another sshd)."""
    text = read_regular(config_path, "ssh_config", SSH_CONFIG_LIMIT).decode("utf-8", errors="replace")
    ours = "".join(f"    {key} {value}\n" for key, value in (("Port", spec.port), ("User", spec.user)) if value)
    if ours:
        text = f"Host {spec.host}\n{ours}\n" + text
    return paramiko.SSHConfig.from_text(text).lookup(spec.host)


_known_hosts_lock = threading.Lock()


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """OpenSSH's accept-new: record a key never seen before. A changed key never reaches here."""

    def __init__(self, known_hosts: str):
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _known_hosts_lock:
            Path(self.known_hosts).parent.mkdir(parents=True, exist_ok=True)
            with open(self.known_hosts, "a", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)  # other processes may record keys at the same time
                fh.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


def _proxy_socket(command: str) -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """Start a ProxyCommand (as OpenSSH does: ``sh -c 'exec COMMAND'``) on one end of a socketpair.

    paramiko's own ProxyCommand spins forever once the proxy process is gone, so a
    lost connection would never be noticed; a socket gets a plain EOF instead.
    """
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", f"exec {command}"], stdin=theirs.fileno(), stdout=theirs.fileno(),
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        ours.close()
        raise
    finally:
        theirs.close()
    return ours, proc


@dataclass
class Connection:
    endpoint: Endpoint
    timeout: float = CONNECT_TIMEOUT_S
    client: paramiko.SSHClient | None = field(default=None, init=False)
    proxy: subprocess.Popen[bytes] | None = field(default=None, init=False)
    lost: str | None = field(default=None, init=False)  # why the host counts as gone (a heartbeat went unanswered)
    _heartbeat: threading.Thread | None = field(default=None, init=False)

    def open(self) -> Connection:
        ep = self.endpoint
        client = paramiko.SSHClient()
        if os.path.exists(ep.known_hosts):
            client.load_host_keys(ep.known_hosts)
        client.set_missing_host_key_policy(_AcceptNewPolicy(ep.known_hosts) if ep.accept_new
                                           else paramiko.RejectPolicy())
        identity_files = [path for path in ep.identity_files if os.path.exists(path)]
        if ep.identity_files and not identity_files:
            # paramiko would report this as an OSError while connecting, i.e. as an unreachable sshd.
            raise SshError(f"{ep.label}: identity file {', '.join(ep.identity_files)} does not exist; fix "
                           f"\"identity_file\" in hosts.json or IdentityFile in the ssh_config")
        sock = None
        try:
            if ep.proxy_command:
                sock, self.proxy = _proxy_socket(ep.proxy_command)
                sock.settimeout(self.timeout)
            client.connect(
                ep.hostname, port=ep.port, username=ep.user, sock=sock,
                key_filename=identity_files or None,  # type: ignore[arg-type]  # paramiko takes a list; its stubs say str
                look_for_keys=not ep.identity_files,
                allow_agent=not ep.identity_files, password=None, passphrase=None,
                timeout=self.timeout, banner_timeout=self.timeout, auth_timeout=self.timeout,
            )
        except paramiko.BadHostKeyException:
            self._close(client)
            raise SshError(f"{ep.label}: host key has CHANGED since it was recorded in {ep.known_hosts}; "
                           f"refusing to connect. If the change is expected, remove the old key with: "
                           f"ssh-keygen -R {ep.hostname} -f {ep.known_hosts}") from None
        except paramiko.BadAuthenticationType as exc:
            self._close(client)
            raise SshError(f"{ep.label}: offers only {', '.join(exc.allowed_types)} authentication; set up key "
                           f"authentication for {ep.user} (passwords are never used)") from None
        except paramiko.AuthenticationException:
            self._close(client)
            raise SshError(f"{ep.label}: refused our keys for user {ep.user}; add the public key to that user's "
                           f"authorized_keys") from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise SshError(f"{ep.label}: host key is not known (not in {ep.known_hosts}); check and add it "
                               f"(ssh-keyscan), or set \"accept_new_host_keys\": true in hosts.json to "
                               f"accept it on first use") from None
            raise SshError(f"{ep.label}: cannot reach sshd: {_reason(exc)}") from None
        except (TimeoutError, OSError, EOFError) as exc:
            self._close(client)
            raise SshError(f"{ep.label}: cannot reach sshd: {_reason(exc)}") from None
        if sock is not None:
            sock.settimeout(None)  # long-lived role channels must not time out
        transport = client.get_transport()
        if transport is None:
            self._close(client)
            raise SshError(f"{ep.label}: the connection closed as it opened")
        transport.set_keepalive(5)  # notices a dead peer while roles run
        self.client = client
        return self

    @property
    def transport(self) -> paramiko.Transport:
        assert self.client is not None, "connection is not open"
        transport = self.client.get_transport()
        assert transport is not None, "connection is closed"
        return transport

    def _active_transport(self) -> paramiko.Transport | None:
        """The transport while it is open; None once closed (the heartbeat thread races ``close()``)."""
        client = self.client
        transport = client.get_transport() if client is not None else None
        return transport if transport is not None and transport.is_active() else None

    def is_alive(self) -> bool:
        return self.lost is None and self._active_transport() is not None

    def start_heartbeat(self, interval_s: float = HEARTBEAT_S, timeout_s: float = HEARTBEAT_TIMEOUT_S) -> None:
        """Until the connection closes, ask sshd for an answer every ``interval_s`` (a session channel opened
        and closed at once); none within ``timeout_s`` marks the host lost, and ``is_alive()`` turns False."""
        if self._heartbeat is not None:
            return

        def beat() -> None:
            while self.is_alive():
                time.sleep(interval_s)
                transport = self._active_transport()
                if transport is None:
                    return  # closed by us while asleep: nothing was lost
                try:
                    transport.open_session(timeout=timeout_s).close()
                except paramiko.ChannelException:  # refused (MaxSessions, ...): still an answer
                    continue
                except (paramiko.SSHException, OSError, EOFError, AttributeError):
                    if self._active_transport() is not None:
                        self.lost = f"no answer from {self.endpoint.label} within {timeout_s:.0f} s"
                    return

        self._heartbeat = threading.Thread(target=beat, name=f"heartbeat {self.endpoint.label}", daemon=True)
        self._heartbeat.start()

    def run(self, command: str, timeout: float = 30.0, stdin: BinaryIO | None = None,
            stdout: BinaryIO | None = None) -> Result:
        """Run a command to completion and collect its output; ``timeout`` bounds every wait for progress.

        ``stdin``: a file sent as the command's input. ``stdout``: a file the command's output is written to
        (bytes, as they come) instead of being returned.
        """
        channel = self.transport.open_session(timeout=self.timeout)
        channel.settimeout(timeout)
        try:
            channel.exec_command(command)
            if stdin is not None:
                try:
                    for chunk in iter(lambda: stdin.read(CHUNK_BYTES), b""):
                        channel.sendall(chunk)
                except TimeoutError:
                    raise
                except OSError:
                    pass  # the command stopped reading: its exit status and stderr say why
            channel.shutdown_write()
            output = ""
            if stdout is None:
                output = channel.makefile("rb").read().decode(errors="replace")
            else:
                for chunk in iter(lambda: channel.recv(CHUNK_BYTES), b""):
                    stdout.write(chunk)
            stderr = channel.makefile_stderr("rb").read().decode(errors="replace")
            return Result(channel.recv_exit_status(), output, stderr)
        except TimeoutError:
            raise SshError(f"{self.endpoint.label}: command did not finish within {timeout:.0f} s") from None
        finally:
            channel.close()

    def start(self, command: str) -> paramiko.Channel:
        """Start a long-running command; its stdin stays open (remote watchdogs read it)."""
        channel = self.transport.open_session(timeout=self.timeout)
        channel.set_combine_stderr(True)
        channel.exec_command(command)
        return channel

    def _close(self, client: paramiko.SSHClient | None) -> None:
        try:
            if client is not None:
                client.close()
        finally:
            if self.proxy is not None:
                self.proxy.kill()
                self.proxy.wait(timeout=5)
                self.proxy = None

    def close(self) -> None:
        self._close(self.client)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__
