"""The one exception type that reaches users as a single line, the one way a failure line of ours is printed, and
the one way a command-line tool of ours turns a UserError (and Ctrl-C) into that line and an exit code."""
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# Set by our `ck` command (reprokit.ck.cli) for everything it runs: a file that our failure lines go to instead of
# the console; the command prints them after CK's own output, so a failure of ours ends with our line.
LAST_LINE_ENV = "REPROKIT_LAST_LINE"


class UserError(Exception):
    """Bad input or a missing prerequisite: the message names the problem and the fix."""


def say_failure(line: str, stdout: bool = False) -> None:
    """Print one of our one-line failures (``LABEL: error: ...``, ``p3: FAILED: ...``) on stderr (or stdout).

    Under our ``ck`` command the line is handed to it instead (LAST_LINE_ENV): it prints the line once, on the
    same stream, as the last line of its output, in place of the line stock CK adds after a failed program or
    package. Where that file is gone or cannot be written, the line is printed here and now."""
    path = os.environ.get(LAST_LINE_ENV)
    if path:
        try:  # never created here: a process that outlived its ck (a stale path) prints its line itself
            handed = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            pass
        else:
            try:
                os.write(handed, (json.dumps({"line": line, "stdout": stdout}) + "\n").encode())
                return
            except OSError:
                pass
            finally:
                os.close(handed)
    print(line, file=sys.stdout if stdout else sys.stderr, flush=True)


@contextmanager
def one_line_errors(label: str, interrupted: str) -> Iterator[None]:
    """Inside: a UserError ends the tool with ``label: error: MESSAGE`` and exit code 1; Ctrl-C (or SIGTERM
    turned into it) with ``label: error: interrupted; INTERRUPTED`` and 130. No traceback either way."""
    try:
        yield
    except UserError as exc:
        say_failure(f"{label}: error: {exc}")
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        say_failure(f"{label}: error: interrupted; {interrupted}")
        raise SystemExit(130) from None


if __name__ == "__main__":  # bash install scripts hand over their line: python -m reprokit.core.errors LINE
    say_failure(sys.argv[1])
