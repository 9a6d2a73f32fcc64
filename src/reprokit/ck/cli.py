"""The `ck` command of this project's environment (`.venv/bin/ck`): stock CK's, after one check CK makes too late.

Stock CK refuses an unknown `--cmd_key` inside its program module, before any hook of ours runs, with a message
that lists no valid key. For this repository's programs the check is made here first, with CK's own parser and
entry loader; everything else, and every other program, goes to CK unchanged.
"""
from __future__ import annotations

import sys


def unknown_cmd_key(argv: list[str]) -> str | None:
    """Our one-line refusal of ``ck run program:OURS --cmd_key=KEY`` for a KEY the program lacks, else None."""
    import ck.kernel as kernel

    from reprokit.bootstrap import REPO_ALIAS

    parsed = kernel.convert_ck_list_to_dict(argv)
    if parsed["return"] > 0:
        return None
    request = parsed["ck_dict"]
    key = request.get("cmd_key")
    if request.get("action") != "run" or not isinstance(key, str):
        return None
    cid = kernel.parse_cid({"cid": request.get("cid", "")})
    if cid["return"] > 0 or cid.get("module_uoa") != "program":
        return None
    data_uoa = cid.get("data_uoa") or next(iter(request.get("cids", [])), "")
    loaded = kernel.access({"action": "load", "module_uoa": "program", "data_uoa": data_uoa})
    if loaded["return"] > 0 or loaded.get("repo_alias") != REPO_ALIAS:
        return None
    keys = sorted(loaded["dict"].get("run_cmds", {}))
    if key in keys:
        return None
    return (f"p3: error: unknown --cmd_key {key[:80]!r} for program:{loaded['data_alias']}; valid ones: "
            f"{', '.join(keys)} (e.g. --cmd_key={'resnet' if 'resnet' in keys else keys[0]})")


def main() -> int:
    refusal = unknown_cmd_key(sys.argv[1:])
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    from ck.kernel import cli

    cli()  # exits with CK's own code
    return 0
