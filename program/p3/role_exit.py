"""How a worker of our scripts ends when its training raises: at once, non-zero, after logging the error.

Standard library only. Left to Python, a worker whose training loop raised
may never exit: MXNet's engine still holds pending work and the kvstore's
destructor waits for the other roles, so the run would hang until its
timeout. Here the traceback is logged, the streams flushed, and the process
ends with ``os._exit(1)``; the launcher quotes the error line and tears the
other roles down.
"""
import os
import sys
import traceback


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
