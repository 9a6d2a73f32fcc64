"""How a worker of our scripts ends when its training raises: at once, non-zero, after logging the error.

Standard library only. Left to Python, a worker whose training loop raised
may never exit: MXNet's engine still holds pending work and the kvstore's
destructor waits for the other roles, so the run would hang until its
timeout. Here the traceback is logged, the streams flushed, and the process
ends with ``os._exit(1)``; the launcher quotes the error line and tears the
other roles down.
"""
import errno
import faulthandler
import os
import sys
import traceback


def name_crashes():
    """On a fatal signal inside the engine (SIGSEGV, SIGABRT...), print every thread's Python stack to stderr, the
    role's log, before the engine's own handler runs. Called after MXNet's import, which installs that handler:
    faulthandler then hands the signal on to it. A rare crash seen three times in CI is then placed by its next occurrence."""
    faulthandler.enable(all_threads=True)


def run(main):
    """``sys.exit(main())``, except that an exception ends the process at once with exit code 1."""
    try:
        code = main()
    except SystemExit:  # argparse's refusals and explicit exits keep their codes
        raise
    except BaseException:  # KeyboardInterrupt included: a stopped worker must not linger either
        traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(1)
    sys.exit(code)


def save_output(setting, path, save):
    """Call ``save()``, which writes ``path`` (the run setting ``setting`` names it); a full disk or an overlong
    name ends the role at once with one error line naming the path and the fix, and no partial file."""
    try:
        save()
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG):
            raise
        if exc.errno == errno.ENAMETOOLONG:
            fix = "shorten the name"
        else:
            fix = f"free space on {os.path.dirname(os.path.abspath(path)) or '/'}, or give another path"
            for partial in (path, path + ".npz"):  # numpy adds .npz to a name without it
                try:
                    os.unlink(partial)
                except OSError:
                    pass
        print(f"OutputError: {setting}={path}: {exc.strerror}; {fix} with --env.{setting}=PATH", file=sys.stderr,
              flush=True)
        os._exit(1)
