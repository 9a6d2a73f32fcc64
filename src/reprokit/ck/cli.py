"""The `ck` command of this project's environment (`.venv/bin/ck`): stock CK's, after the checks CK makes too late.

Stock CK refuses an unknown `--cmd_key`, and a `--target` that names no machine entry, inside its program module,
before any hook of ours runs: with a message that lists no valid key, or that repeats the whole name (a
100,000-character one included). For this repository's programs both are checked here first, with CK's own parser
and entry loader; everything else, and every other program, goes to CK unchanged. After CK, a run of ours that
failed ends non-zero even when a CK option made CK's own exit code 0 (ck/script.py, failed_run_exit_code).
"""
from __future__ import annotations

import sys


def early_refusal(argv: list[str]) -> str | None:
    """Our one-line refusal of ``ck run program:OURS`` with a ``--cmd_key`` the program lacks or a ``--target`` that
    is no machine entry, else None."""
    import ck.kernel as kernel

    from reprokit.bootstrap import REPO_ALIAS
    from reprokit.core.values import shown

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


def main() -> int:
    refusal = early_refusal(sys.argv[1:])
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    from ck.kernel import cli

    from reprokit.ck.script import failed_run_exit_code

    try:
        cli()  # exits with CK's own code
        code = 0
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else (0 if ended.code is None else 1)
    # CK exits with its run script's code, which a CK option can make 0 after a run of ours failed (script.py)
    return code or failed_run_exit_code()
