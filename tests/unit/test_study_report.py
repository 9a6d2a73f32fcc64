"""The study report: Markdown and self-contained HTML with plots, opened in headless Chromium.

Chromium (Debian's `chromium`, installed by `make testbed-deps` as root) is
driven over the DevTools protocol on a pipe (--remote-debugging-pipe): the
test loads report.html, waits for the load event, checks every image decoded
and collects console errors, exceptions and failed loads. Without chromium
the test skips, except under CI, where it fails.
"""
import fcntl
import json
import os
import shutil
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from reprokit.study.analysis import analyse
from reprokit.study.report import render

from support.study_data import ALL_MODELS, EMBEDDED, records, study

REPO = Path(__file__).resolve().parents[2]


def constructed_records():
    runs = (records("resnet", "1gbit", [50.0, 51.0, 49.0], [60.0, 61.0, 59.5])
            + records("resnet", "4gbit", [100.0, 101.0, 99.0], [126.0, 125.0, 127.0])
            + records("vgg", "4gbit", [30.0, None, 31.0], [40.0, 41.0, 39.0])
            + records("resnet", "native", [80.0, 82.0], [60.0, 61.0], target=EMBEDDED, profile="smoke"))
    provenance = {"repo_revision": "abc123", "ck_version": "2.6.4", "python_version": "3.11.7",
                  "engine": "mxnet-1.9.1-cpu", "mxnet_version": "1.9.1", "engine_python_version": "3.11.7",
                  "controller_host": "h"}
    return [replace(r, provenance=provenance) for r in runs]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    runs = constructed_records()
    paths = render(study(), analyse(study(), runs, ALL_MODELS), runs, out, out / "store", ALL_MODELS)
    return out, paths


def test_report_files_tables_and_plots(report):
    out, paths = report
    for model in ("resnet", "vgg"):
        assert (out / "plots" / f"{model}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / "plots" / f"{model}.svg").read_text().lstrip().startswith("<?xml")
    md = paths["markdown"].read_text()
    assert "| resnet-4gbit | second-hand, not checked against the PDF |" in md
    assert "**replicated**" in md and "**not testable here**" in md
    assert "| Artifacts Available | **recommended** |" in md
    assert "worker#1 on 10.77.0.2 was killed by SIGKILL" in md  # the failed vgg run, with its reason
    assert "![resnet](plots/resnet.png)" in md
    html = paths["html"].read_text()
    assert html.count("data:image/png;base64,") == 2
    assert 'src="plots/' not in html and "<link" not in html and "<script" not in html  # self-contained


def test_report_with_no_runs_still_renders(tmp_path):
    paths = render(study(), analyse(study(), [], ALL_MODELS), [], tmp_path, tmp_path, ALL_MODELS)
    assert "no runs stored yet" in paths["markdown"].read_text()


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON)."""

    def __init__(self, exe: str, profile: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_pipes():
            # Copy both ends above 10 first: the pipes themselves may be fds 3 and 4.
            high_r, high_w = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes, close_fds=False, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.events: list[dict] = []
        self.replies: dict[int, dict] = {}
        self._next = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buffer = b""
        while True:
            chunk = os.read(self._from_chrome, 65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._cond:
                    if "id" in message:
                        self.replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._cond.notify_all()

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        with self._cond:
            assert self._cond.wait_for(lambda: self._next in self.replies, timeout), f"no reply to {method}"
            reply = self.replies.pop(self._next)
        assert "error" not in reply, reply
        return reply["result"]

    def wait_event(self, method: str, timeout: float = 30):
        with self._cond:
            assert self._cond.wait_for(lambda: any(e["method"] == method for e in self.events), timeout), \
                f"no {method} event"

    def close(self):
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        os.close(self._to_chrome)


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        message = "the report test needs Debian's chromium"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI runs as root and `make testbed-deps` installs it")
        pytest.skip(message + " (apt-get install chromium)")
    return exe


def test_html_report_renders_in_headless_chromium_with_images_and_no_console_errors(report, tmp_path):
    _, paths = report
    browser = DevTools(chromium(), tmp_path / "profile")
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Page.navigate", {"url": paths["html"].resolve().as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        state = browser.call("Runtime.evaluate", {"returnByValue": True, "expression": """JSON.stringify({
            images: Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight]),
            tables: Array.from(document.querySelectorAll('table')).map(t => t.id),
            badges: Array.from(document.querySelectorAll('#badges tr td strong')).map(s => s.textContent),
            verdicts: document.querySelectorAll('#verdicts tr').length - 1})"""}, session=session)
        page = json.loads(state["result"]["value"])
        # The DevTools pipe is ordered: once this round trip answers, every event before it has arrived.
        browser.call("Runtime.evaluate", {"expression": "0"}, session=session)
        with browser._cond:
            events = list(browser.events)
    finally:
        browser.close()
    assert len(page["images"]) == 2
    assert all(complete and width > 500 and height > 200 for complete, width, height in page["images"]), page["images"]
    assert {"badges", "verdicts", "results", "speedups", "environment", "checklist", "claims"} <= set(page["tables"])
    assert page["badges"] == ["recommended", "recommended", "undecided"]
    assert page["verdicts"] == len(study().claims) * 2  # two setups: the testbed and the embedded default
    errors = [e for e in events if e["method"] == "Runtime.exceptionThrown"
              or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
              or e["method"] == "Network.loadingFailed"]
    assert errors == []
