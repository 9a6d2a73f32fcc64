"""Loopback stand-ins for download servers that tests cannot reach (Dropbox for the ImageNet subset)."""
import http.server
import io
import struct
import tarfile
import threading
from pathlib import Path

from reprokit.data.imagenet import MARKER, make_synthetic


class FileServer:
    """http.server on 127.0.0.1 (a free port) in a thread, serving bytes registered by name.

    ``add_truncated`` announces more bytes than it sends and closes the connection,
    as a server that dies mid-download does.
    """

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str, int | None]] = {}
        files = self.files

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                entry = files.get(self.path.lstrip("/"))
                if entry is None:
                    self.send_error(404)
                    return
                body, content_type, claimed = entry
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(claimed or len(body)))
                self.end_headers()
                self.wfile.write(body)
                if claimed:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def add(self, name: str, body: bytes, content_type: str = "application/x-tar") -> None:
        self.files[name] = (body, content_type, None)

    def add_truncated(self, name: str, body: bytes, claimed: int) -> None:
        self.files[name] = (body, "application/x-tar", claimed)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def imagenet_like_tarball(work: Path) -> bytes:
    """A tar shaped like ILSVRC2012_img_train_min.tar: a top folder of class folders with JPEGs.

    Its first class is n01440764 with the sample file n01440764_10026.JPEG, as in the original.
    """
    root = make_synthetic(work, classes=3, images_per_class=2, seed=3).root
    (root / MARKER).unlink()
    first = root / "n00000000"
    first.rename(root / "n01440764")
    (root / "n01440764" / "n00000000_1.JPEG").rename(root / "n01440764" / "n01440764_10026.JPEG")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(root, arcname="ILSVRC2012_img_train_min")
    return buffer.getvalue()


def imagenet_train_tarball(work: Path, classes: int = 3) -> bytes:
    """A tar shaped like ImageNet's ILSVRC2012_img_train.tar: one tar per class (n01440764.tar, ...) of JPEGs."""
    root = make_synthetic(work, classes=classes, images_per_class=2, seed=5).root
    (root / "n00000000" / "n00000000_1.JPEG").rename(root / "n00000000" / "n01440764_10026.JPEG")
    (root / "n00000000").rename(root / "n01440764")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as outer:
        for class_dir in sorted(d for d in root.iterdir() if d.is_dir()):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as tar:
                for image in sorted(class_dir.iterdir()):
                    tar.add(image, arcname=image.name)
            info = tarfile.TarInfo(f"{class_dir.name}.tar")
            info.size = inner.tell()
            outer.addfile(info, io.BytesIO(inner.getvalue()))
    return buffer.getvalue()


def recordio_file(labels: list[int], payload: bytes = b"\xff\xd8 not decoded \xff\xd9") -> bytes:
    """An MXNet RecordIO file as im2rec writes one (magic, length, IRHeader flag/label/id/id2, payload, padding),
    one record per label, ids 0, 1, ...; for packages that only read record headers."""
    out = io.BytesIO()
    for record_id, label in enumerate(labels):
        body = struct.pack("<IfQQ", 0, float(label), record_id, 0) + payload
        out.write(struct.pack("<II", 0xCED7230A, len(body)) + body + b"\0" * (-len(body) % 4))
    return out.getvalue()
