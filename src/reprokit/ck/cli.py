"""The `ck` command of this project's environment (`.venv/bin/ck`): stock CK's, after the checks CK makes too
late, ending a failure of ours with our own line and a non-zero code.

Stock CK refuses an unknown `--cmd_key`, and a `--target` that names no machine entry, inside its program module,
before any hook of ours runs: with a message that lists no valid key, or that repeats the whole name (a
100,000-character one included). For this repository's programs both are checked here first, with CK's own parser
and entry loader.

Everything else goes to CK's kernel as its own CLI hands it (``ck.kernel.access`` with the command line), with two
differences at the end. Our tools hand their failure lines (``p3: error: ...``, ``p3: FAILED: ...``,
``dataset: error: ...``) to this command (core.errors.say_failure) instead of printing them; once CK is done, they
are printed last, each on its own stream. Where one was handed, CK's own trailing line that merely relays the
failure (``CK error: [program] return code N !=0 !``, ``CK error: [package] package installation failed!``) is
left out; any other error of CK's is printed before ours. And a run of ours that failed ends non-zero even when a
CK option made CK's own exit code 0 (ck/script.py, failed_run_exit_code).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import ck.kernel as kernel

from reprokit.bootstrap import REPO_ALIAS
from reprokit.ck.errors import CkDict
from reprokit.ck.script import failed_run_exit_code
from reprokit.core.errors import LAST_LINE_ENV
from reprokit.core.values import shown

# CK 2.6.4's errors that only relay a program's exit code or a package's failed install script (program and package
# modules): after a line of ours they say nothing more.
CK_RELAYS = re.compile(r"(return code -?\d+ !=0 ?|package installation failed)")


def early_refusal(argv: list[str]) -> str | None:
    """Our one-line refusal of ``ck run program:OURS`` with a ``--cmd_key`` the program lacks or a ``--target`` that
    is no machine entry, else None."""
    parsed = kernel.convert_ck_list_to_dict(argv)
    if parsed["return"] > 0:
        return None
    request = parsed["ck_dict"]
    key, target = request.get("cmd_key"), request.get("target")
    if request.get("action") != "run" or not (isinstance(key, str) or isinstance(target, str)):
        return None
    cid = kernel.parse_cid({"cid": request.get("cid", "")})
    if cid["return"] > 0 or cid.get("module_uoa") != "program":
        return None
    data_uoa = cid.get("data_uoa") or next(iter(request.get("cids", [])), "")
    loaded = kernel.access({"action": "load", "module_uoa": "program", "data_uoa": data_uoa})
    if loaded["return"] > 0 or loaded.get("repo_alias") != REPO_ALIAS:
        return None
    keys = sorted(loaded["dict"].get("run_cmds", {}))
    if isinstance(key, str) and key not in keys:
        return (f"p3: error: unknown --cmd_key {shown(key)} for program:{loaded['data_alias']}; valid ones: "
                f"{', '.join(keys)} (e.g. --cmd_key={'resnet' if 'resnet' in keys else keys[0]})")
    if isinstance(target, str) and target and \
            kernel.access({"action": "load", "module_uoa": "machine", "data_uoa": target})["return"] > 0:
        return (f"p3: error: there is no machine entry {shown(target)} for --target; register it with: ck add "
                f"machine:NAME --type=cluster --config_file=hosts.json --quiet (ck show machine lists them)")
    return None


def handed_lines(path: Path) -> list[tuple[str, bool]]:
    """The failure lines our tools handed over (say_failure), in order: (line, on stdout); removes the file."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handed:
            path.unlink()  # from now on a tool of ours still running prints its line itself (say_failure)
            text = handed.read()
    except OSError:
        return []
    lines = []
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
            lines.append((str(entry["line"]), bool(entry.get("stdout"))))
        except (ValueError, KeyError, TypeError):
            lines.append((raw, False))  # never lose a line, even a torn one
    return lines


def run_ck(argv: list[str]) -> int:
    """CK's CLI (``ck.kernel.cli``: ``access`` with the command line), our handed lines last; returns CK's code."""
    fd, name = tempfile.mkstemp(prefix="reprokit-last-line-", suffix=".jsonl")
    os.close(fd)
    handed = Path(name)
    os.environ[LAST_LINE_ENV] = name  # our hooks, in this process, and every tool CK starts read it
    request: CkDict | None = None
    result: CkDict = {"return": 0}
    try:
        parsed = kernel.convert_ck_list_to_dict(argv)
        if parsed["return"] > 0 or argv == ["test_install"]:
            result = kernel.access(argv)  # CK's own handling, its own error line included
            return int(result["return"])
        request = parsed["ck_dict"]
        if request.get("out", "") == "":
            request["out"] = "con"  # as for CK's command line
        result = kernel.access(request)  # a dict: CK leaves its trailing error line to us
        return int(result["return"])
    finally:
        ours = handed_lines(handed)
        if request is not None and result.get("return", 0) > 0 \
                and not (ours and CK_RELAYS.fullmatch(str(result.get("error", "")))):
            module = request.get("module_uoa", "")
            kernel.out(f"{kernel.cfg['error']}{'[' + module + '] ' if module else ''}{result.get('error', '')}!")
        sys.stdout.flush()
        for line, on_stdout in ours:
            print(line, file=sys.stdout if on_stdout else sys.stderr, flush=True)


def main() -> int:
    refusal = early_refusal(sys.argv[1:])
    if refusal:
        print(refusal, file=sys.stderr)
        return 1

    code = run_ck(sys.argv[1:])
    # CK exits with its run script's code, which a CK option can make 0 after a run of ours failed (script.py)
    return code or failed_run_exit_code()
