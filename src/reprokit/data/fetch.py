"""The one way we download and unpack: streamed with a timeout, length and MD5 checked, staged, swapped in.

A destination file or folder appears only when complete and verified; an earlier one survives any failure.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from reprokit.core.errors import UserError

DOWNLOAD_TIMEOUT_S = 60  # per network operation; a stalled server fails instead of hanging
CHUNK = 1 << 20


def swap_in(staging: Path, final: Path) -> None:
    """Replace ``final`` by the complete ``staging`` tree; an earlier ``final`` survives any failure before this."""
    old = final.with_name(final.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)


def fresh_staging(dest: Path) -> Path:
    """An empty staging folder in ``dest``; leftovers of killed earlier attempts are removed."""
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.glob(".staging-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = dest / f".staging-{os.getpid()}"
    staging.mkdir()
    return staging


def report_progress(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


def local_file(url: str) -> Path | None:
    """The file a file:// URL or an absolute path names (read in place, not copied), or None for a network URL."""
    if url.startswith("file://"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    elif url.startswith("/"):
        path = Path(url)
    else:
        return None
    if not path.is_file():
        raise UserError(f"{path} is not a file; give the archive's path or URL with --env.PACKAGE_URL=...")
    return path


def check_md5(path: Path, md5: str, progress: Callable[[str], None] | None = None) -> str:
    """The MD5 of a local file, which must equal ``md5`` when one is given."""
    digest = hashlib.md5()
    done, last = 0, time.monotonic()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if time.monotonic() - last > 10:
                last = time.monotonic()
                report_progress(progress, f"checked {done / 1e9:.1f} GB of {path.name}")
    got = digest.hexdigest()
    if md5 and got != md5.lower():
        raise UserError(f"checksum mismatch for {path}: MD5 {got}, expected {md5}; the file is corrupt or not the "
                        f"expected one (another file needs its own --env.PACKAGE_MD5=MD5)")
    return got


def download(url: str, dest: Path, md5: str = "", timeout_s: float = DOWNLOAD_TIMEOUT_S,
             progress: Callable[[str], None] | None = None) -> str:
    """Stream ``url`` to ``dest`` and check it; returns the MD5. ``dest`` appears only when complete and verified."""
    partial = dest.with_name(dest.name + ".partial")
    request = urllib.request.Request(url, headers={"User-Agent": "reprokit"})
    digest = hashlib.md5()
    received = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response, open(partial, "wb") as out:
            if "text/html" in response.headers.get("Content-Type", ""):
                raise UserError(f"{url} answered with a web page, not the archive (for a Dropbox link add ?dl=1); "
                                f"give the archive's URL with --env.PACKAGE_URL=URL")
            length = response.headers.get("Content-Length")
            expected = int(length) if length and length.isdigit() else None
            last = 0.0
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
                if time.monotonic() - last > 2:
                    last = time.monotonic()
                    total = f" of {expected / 1e6:.1f}" if expected else ""
                    report_progress(progress, f"downloaded {received / 1e6:.1f}{total} MB")
        if expected is not None and received != expected:
            raise UserError(f"the download of {url} was cut short ({received} of {expected} bytes); retry, "
                            f"or give a mirror with --env.PACKAGE_URL=URL")
    except UserError:
        partial.unlink(missing_ok=True)
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        reason = (f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError)
                  else getattr(exc, "reason", None) or exc)
        raise UserError(f"cannot download {url}: {reason}; check the URL or give a mirror with "
                        f"--env.PACKAGE_URL=URL") from None
    except http.client.HTTPException as exc:  # e.g. IncompleteRead: the connection ended early
        partial.unlink(missing_ok=True)
        raise UserError(f"the download of {url} broke off after {received} bytes ({type(exc).__name__}); retry, "
                        f"or give a mirror with --env.PACKAGE_URL=URL") from None
    got = digest.hexdigest()
    if md5 and got != md5.lower():
        partial.unlink(missing_ok=True)
        raise UserError(f"checksum mismatch for {url}: MD5 {got}, expected {md5}; the file is corrupt or not the "
                        f"expected one (a mirror's file needs its own --env.PACKAGE_MD5=MD5)")
    os.replace(partial, dest)
    return got


def extract_zip(archive: Path, dest: Path) -> Path:
    """Unpack a zip archive into ``dest`` keeping unix modes; returns its single top folder."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                target = (dest / info.filename).resolve()
                if not target.is_relative_to(dest.resolve()):
                    raise UserError(f"{archive.name} holds a path outside its folder ({info.filename}); "
                                    f"refusing to unpack it")
                zf.extract(info, dest)
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    os.chmod(target, mode)
    except zipfile.BadZipFile as exc:
        raise UserError(f"{archive.name} is not a zip archive ({exc}); check the URL (--env.PACKAGE_URL=...)") from None
    tops = list(dest.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        raise UserError(f"{archive.name} should hold one top folder, it holds "
                        f"{', '.join(sorted(p.name for p in tops)) or 'nothing'}")
    return tops[0]
