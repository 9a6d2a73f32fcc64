"""The one exception type that reaches users as a single line, and the one way a command-line tool of ours
turns it (and Ctrl-C) into that line and an exit code."""
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class UserError(Exception):
    """Bad input or a missing prerequisite: the message names the problem and the fix."""


@contextmanager
def one_line_errors(label: str, interrupted: str) -> Iterator[None]:
    """Inside: a UserError ends the tool with ``label: error: MESSAGE`` and exit code 1; Ctrl-C (or SIGTERM
    turned into it) with ``label: error: interrupted; INTERRUPTED`` and 130. No traceback either way."""
    try:
        yield
    except UserError as exc:
        print(f"{label}: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print(f"{label}: error: interrupted; {interrupted}", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
