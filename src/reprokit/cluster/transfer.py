"""Files to and from a remote host over whatever its sshd offers: SFTP when it has the subsystem, else the exec channel.

Some sites run sshd without an SFTP subsystem; every sshd runs commands. ``choose(conn)`` asks for SFTP
once per connection and falls back to the exec channel (one command per copy: a tar stream unpacked on the
host, every file's SHA-256 checked there; one ``cat`` per fetch, size and SHA-256 checked here). Both ways
behave the same: a file is written under a partial name and renamed into place only when complete (hosts
may share a file system, so no host ever reads a half-written file), every wait is bounded, and every
failure is a ``TransferError`` naming the host, the file and the reason.
"""
from __future__ import annotations

import hashlib
import shlex
import socket
import tarfile
import tempfile
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

import paramiko

from reprokit.cluster import rundir
from reprokit.cluster.ssh import Connection
from reprokit.core.errors import UserError
from reprokit.core.shipping import shipped_name

PROBE_TIMEOUT_S = 10.0
TRANSFER_TIMEOUT_S = 60.0  # without progress, per file


def _sha256_of(var: str) -> str:
    """Shell code setting ``s`` to the SHA-256 of the file named by ``$var``: GNU sha256sum, else BSD shasum."""
    return (f'if command -v sha256sum >/dev/null 2>&1; then s=$(sha256sum < "${var}"); '
            f'elif command -v shasum >/dev/null 2>&1; then s=$(shasum -a 256 < "${var}"); '
            'else echo "neither sha256sum nor shasum is installed" >&2; false; fi && s=${s%% *}')


class TransferError(UserError):
    """A file could not be copied to or from a host."""


def _partial(path: str) -> str:
    return f"{path}.{uuid.uuid4().hex[:12]}.partial"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _owned_by_the_remote_user(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """No owner of ours in the archive: tar run by root on the host would give the files to our local uid."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _names(files: list[Path]) -> str:
    return ", ".join(shipped_name(f) for f in files)


def _folders(files: list[Path]) -> list[str]:
    """The folders the shipped names need under the run folder (``reprokit``, ``reprokit/wire``), parents first."""
    return sorted({str(parent) for f in files for parent in Path(shipped_name(f)).parents if str(parent) != "."})


def _last_line(text: str, default: str = "no output") -> str:
    return (text.strip().splitlines() or [default])[-1]


class Transfer(ABC):
    kind: str  # "sftp" or "exec", as `ck check cluster` shows it

    def __init__(self, conn: Connection):
        self.conn = conn

    @property
    def label(self) -> str:
        return self.conn.endpoint.label

    def put(self, files: list[Path], remote_dir: str) -> None:
        """Copy ``files`` into the host's folder ``remote_dir`` under their shipped names (``core.shipping``: the
        package reprokit.wire in its folders), each replaced atomically."""
        files = [Path(f) for f in files]
        if not files:
            return
        try:
            self._put(files, remote_dir)
        except (OSError, EOFError, paramiko.SSHException, UserError) as exc:
            reason = str(exc) if isinstance(exc, TransferError) else \
                f"{self.label}: cannot copy {_names(files)} to {remote_dir}: {_reason(exc)}"
            # A short write rarely says why (tar: "Wrote only N of M bytes"; SFTP: nothing): free space does.
            raise TransferError(reason + self._space_left(remote_dir)) from None

    def _space_left(self, remote_dir: str) -> str:
        try:
            free = rundir.free_kb(self.conn, remote_dir)
        except (OSError, EOFError, paramiko.SSHException, UserError):
            free = None
        return "" if free is None else f" ({free} KB of space left there)"

    def get(self, remote: str, local: Path) -> None:
        """Copy the host's file ``remote`` to ``local``, which appears only when complete."""
        partial = Path(_partial(str(local)))
        try:
            self._get(remote, partial)
            partial.rename(local)
        except TransferError:
            raise
        except (OSError, EOFError, paramiko.SSHException, UserError) as exc:
            raise TransferError(f"{self.label}: cannot fetch {remote}: {_reason(exc)}") from None
        finally:
            partial.unlink(missing_ok=True)

    def listdir(self, remote_dir: str) -> list[str]:
        try:
            return self._listdir(remote_dir)
        except TransferError:
            raise
        except (OSError, EOFError, paramiko.SSHException, UserError) as exc:
            raise TransferError(f"{self.label}: cannot list {remote_dir}: {_reason(exc)}") from None

    def close(self) -> None:  # noqa: B027 - a default no-op on purpose: only transfers holding a session override it
        pass

    @abstractmethod
    def _put(self, files: list[Path], remote_dir: str) -> None: ...

    @abstractmethod
    def _get(self, remote: str, local: Path) -> None: ...

    @abstractmethod
    def _listdir(self, remote_dir: str) -> list[str]: ...


class SftpTransfer(Transfer):
    kind = "sftp"

    def __init__(self, conn: Connection, sftp: paramiko.SFTPClient):
        super().__init__(conn)
        self.sftp = sftp

    def _put(self, files: list[Path], remote_dir: str) -> None:
        for folder in _folders(files):
            try:
                self.sftp.mkdir(f"{remote_dir}/{folder}")
            except OSError:  # there already (paramiko says no more than "Failure"): the put below says if not
                pass
        for local in files:
            remote = f"{remote_dir}/{shipped_name(local)}"
            partial = _partial(remote)
            try:
                # SFTP writes are pipelined and a server may drop a failed one silently (internal-sftp on a
                # full disk does), so the size that arrived is checked here, where the reason can be said.
                size = local.stat().st_size
                self.sftp.put(str(local), partial, confirm=False)
                written = self.sftp.stat(partial).st_size
                if written != size:
                    raise TransferError(f"{self.label}: cannot copy {shipped_name(local)} to {remote_dir}: only "
                                        f"{written} of {size} bytes arrived")
                self.sftp.posix_rename(partial, remote)
            except BaseException:
                try:
                    self.sftp.remove(partial)
                except (OSError, EOFError, paramiko.SSHException):
                    pass
                raise

    def _get(self, remote: str, local: Path) -> None:
        self.sftp.get(remote, str(local))  # checks the size it read against the remote file's

    def _listdir(self, remote_dir: str) -> list[str]:
        return self.sftp.listdir(remote_dir)

    def close(self) -> None:
        self.sftp.close()


class ExecTransfer(Transfer):
    """The exec channel, one command per call: the files as a tar stream on its stdin, unpacked into a partial
    folder beside their place, their SHA-256 checked there, then each renamed into place; fetched with ``cat``."""
    kind = "exec"

    def _put(self, files: list[Path], remote_dir: str) -> None:
        sums = " ".join(shlex.quote(f"{_sha256(f)}  {shipped_name(f)}") for f in files)
        names = " ".join(shlex.quote(shipped_name(f)) for f in files)
        folders = "".join(f' "$d"/{shlex.quote(folder)}' for folder in _folders(files))
        script = (f"d={shlex.quote(remote_dir)}; t=$d/{shlex.quote(_partial('.files'))}; "
                  'rc=1; mkdir -p "$t" && tar -xf - -C "$t" && cd "$t" && '
                  'if command -v sha256sum >/dev/null 2>&1; then c="sha256sum -c"; '
                  'elif command -v shasum >/dev/null 2>&1; then c="shasum -a 256 -c"; '
                  'else echo "neither sha256sum nor shasum is installed" >&2; false; fi && '
                  f'printf "%s\\n" {sums} | $c >/dev/null && '
                  f'{{ rc=0; {f"mkdir -p{folders} || rc=1; " if folders else ""}'
                  f'[ $rc = 0 ] && for n in {names}; do mv -f "$t/$n" "$d/$n" || {{ rc=1; break; }}; done; }}; '
                  'cd / && rm -rf "$t"; exit $rc')
        with tempfile.TemporaryFile() as stream:
            with tarfile.open(fileobj=stream, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for local in files:
                    tar.add(str(local), arcname=shipped_name(local), recursive=False, filter=_owned_by_the_remote_user)
            stream.seek(0)
            result = self.conn.run(script, timeout=TRANSFER_TIMEOUT_S, stdin=stream)
        if result.exit_code != 0:
            # The first line is the cause (tar ends with "Exiting with failure status due to previous errors").
            first = (result.stderr.strip().splitlines() or ["no output"])[0]
            raise TransferError(f"{self.label}: cannot copy {_names(files)} to {remote_dir}: {first}")

    def _get(self, remote: str, local: Path) -> None:
        quoted = shlex.quote(remote)
        checked = self.conn.run(f'f={quoted}; n=$(wc -c < "$f" | tr -d " ") && {_sha256_of("f")} && echo "$n $s"',
                                timeout=TRANSFER_TIMEOUT_S)
        if checked.exit_code != 0:
            raise TransferError(f"{self.label}: cannot fetch {remote}: {_last_line(checked.stderr)}")
        size, digest = checked.stdout.split()
        with open(local, "wb") as fh:
            result = self.conn.run(f"cat -- {quoted}", timeout=TRANSFER_TIMEOUT_S, stdout=fh)
        if result.exit_code != 0:
            raise TransferError(f"{self.label}: cannot fetch {remote}: {_last_line(result.stderr)}")
        if local.stat().st_size != int(size) or _sha256(local) != digest:
            raise TransferError(f"{self.label}: fetching {remote} received {local.stat().st_size} bytes "
                                f"(sha256 {_sha256(local)}), the host has {size} (sha256 {digest})")

    def _listdir(self, remote_dir: str) -> list[str]:
        result = self.conn.run(f"cd -- {shlex.quote(remote_dir)} && ls -A", timeout=TRANSFER_TIMEOUT_S)
        if result.exit_code != 0:
            raise TransferError(f"{self.label}: cannot list {remote_dir}: {_last_line(result.stderr)}")
        return result.stdout.splitlines()


def choose(conn: Connection) -> Transfer:
    """SFTP when the host's sshd offers the subsystem, else the exec channel. Asked once per connection."""
    try:
        channel = conn.transport.open_session(timeout=PROBE_TIMEOUT_S)
    except (OSError, EOFError, paramiko.SSHException) as exc:
        raise TransferError(f"{conn.endpoint.label}: cannot open an SSH session: {_reason(exc)}") from None
    try:
        channel.settimeout(PROBE_TIMEOUT_S)
        channel.invoke_subsystem("sftp")  # refused ("Channel closed.") where sshd has no SFTP subsystem
        sftp = paramiko.SFTPClient(channel)
    except (OSError, EOFError, paramiko.SSHException):
        channel.close()
        return ExecTransfer(conn)
    channel.settimeout(TRANSFER_TIMEOUT_S)  # no later SFTP request waits forever
    return SftpTransfer(conn, sftp)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
