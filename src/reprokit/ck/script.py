"""What stock CK 2.6.4 writes into shell scripts besides the env lines: read where CK keeps it, and checked.

Some user input reaches CK's scripts without passing any hook: `ck install ... -DNAME=VALUE` and
`--param=VALUE` (written as `export NAME=VALUE` / `export CK_PARAM=VALUE` into the install script), the
arguments after `--` of `ck run` (appended to the run command) and its `--run_batch_name` (the script's own
name). CK hands none of them to our hooks, but they are local variables of the CK function that calls the
hook and renders the script afterwards (package's ``install``, program's ``process_in_dir``), so the hook
reads them from that frame. CK is pinned at 2.6.4; tests/faults/test_injection.py fails if these names move.
Tags and versions come in the hooks' input and go into the env script's comment lines.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

from reprokit.ck.errors import CkDict
from reprokit.core.values import plain_setting


def ck_locals(function: str, module_dir: str) -> CkDict:
    """The local variables of the nearest calling frame of ``function`` in CK's ``module/<module_dir>/module.py``;
    empty when the hook was not called from there."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        path = Path(code.co_filename)
        if code.co_name == function and path.name == "module.py" and path.parent.name == module_dir:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def install_parameters() -> dict[str, str]:
    """`-DNAME=VALUE` (CK's ``params``) and `--param=VALUE` (``CK_PARAM``) of the running `ck install`."""
    found = ck_locals("install", "package")
    written = {str(k): "" if v is None else str(v) for k, v in (found.get("params") or {}).items()}
    if found.get("param") is not None:
        written["CK_PARAM"] = str(found["param"])
    return written


def run_arguments() -> str:
    """The arguments after `--` of the running `ck run`, as CK appends them to the run command."""
    return str(ck_locals("process_in_dir", "program").get("sunparsed", "") or "")


def user_settings() -> CkDict:
    """The `--env.NAME=VALUE` of the running `ck run`, as the user gave them (CK's ``run`` input), not merged with
    the program's run_vars and its dependencies' variables as the hooks see them."""
    found = ck_locals("run", "program").get("i")
    if not isinstance(found, dict):
        return {}
    # The CLI gives each as a key "env.NAME"; callers of ck.access may pass an "env" dict instead.
    given = {key[len("env."):]: value for key, value in found.items() if key.startswith("env.")}
    return {**dict(found.get("env") or {}), **given}


def run_option(name: str) -> str:
    """An option of the running `ck run` that CK's program module does not know (``--submit``): CK keeps it in
    its ``run`` function's input and hands it to no hook."""
    found = ck_locals("run", "program").get("i")
    return str(found.get(name, "") or "") if isinstance(found, dict) else ""


def run_batch_name() -> str:
    """`ck run --run_batch_name=FILE`: the run script's name, which CK puts unquoted into `bash -c "... . FILE"`."""
    return str(ck_locals("process_in_dir", "program").get("rbn", "") or "")


def refuse_shell_syntax_in_labels(i: CkDict, why: str) -> None:
    """Tags (--extra_tags) and the version (--extra_version) in a soft or package hook's input: CK writes them
    into the comment lines of the env script, which a line break in one of them would end."""
    for tag in i.get("tags") or []:
        plain_setting("tag", tag, why)
    plain_setting("version", i.get("version") or "", why, spaces_quoted=True)


# The exit code of this ck process's last failed run (0: none failed), for the ck command (ck/cli.py): CK takes
# the exit code of its run script, which an option of CK's can make 0 after a failed run (the commands of
# --extra_post_process_cmd run after ours; --extra_run_cmd='|| true' is appended to it).
_failed_run_exit_code = 0


def exit_with_the_programs_code(code: int) -> bool:
    """Make the running `ck run` exit with the program's own exit code, as `--treat_return_code_as_exit_code=yes`
    does: stock CK's program module exits 0 whatever the program did, and reads that flag from its ``run``
    function's input (``i``) only after the postprocess returned, so the postprocess sets it there. ``code``: the
    failed run's, kept for the ck command (failed_run_exit_code). Returns whether that frame was found (not under
    other callers, e.g. CK's pipeline)."""
    global _failed_run_exit_code
    _failed_run_exit_code = code
    found = ck_locals("run", "program").get("i")
    if not isinstance(found, dict):
        return False
    found["treat_return_code_as_exit_code"] = "yes"
    return True


def failed_run_exit_code() -> int:
    """The exit code of the last run of this process that failed (exit_with_the_programs_code), or 0."""
    return _failed_run_exit_code
