"""Which of a role's lines the console shows: progress, errors and our own lines; the libraries' set-up chatter
(Sockeye's INFO log, deprecation warnings, MXNet's notices) goes to the role's log only.

The role's log keeps every line, and the supervisor and the progress watch read every line too: only the copy to
the console is filtered. What is left out is recognised by its exact format, so an error line, a traceback or a
line of a format not named here is always shown.
"""
from __future__ import annotations

import re

from reprokit.run.speedometer import is_speed_report

# Sockeye's console log format ("[INFO:sockeye.training] ..."); only DEBUG and INFO records are chatter.
_LOGGED = re.compile(r"^\[(?:DEBUG|INFO):[\w.]+\] (?P<message>.*)")
# Sockeye's INFO lines that say how training goes: its start, checkpoints (with perplexities) and its end.
# Speed reports (speedometer.py) are shown too.
_SOCKEYE_PROGRESS = ("Training started", "Checkpoint [", "Training finished")
# A Python warning as the warnings module prints it ("path:line: Category: message"), for any *DeprecationWarning.
_DEPRECATION_WARNING = re.compile(r"^\S.*:\d+: \w*DeprecationWarning: ")
# MXNet's notices, printed whatever the run: about the engine's build and Sockeye's own optimizer set-up.
_MXNET_NOTICES = re.compile(r"Subgraph backend MKLDNN is activated\.$"
                            r"|^learning rate from ``lr_scheduler`` has been overwritten by ``learning_rate`` in optimizer\.$")


class ConsoleFilter:
    """One role's lines in order (a warning's source line follows it): ``shows(line)`` says whether the console
    shows it."""

    def __init__(self) -> None:
        self._after_warning = False

    def shows(self, line: str) -> bool:
        text = line.rstrip("\r\n")
        after_warning, self._after_warning = self._after_warning, False
        if after_warning and text.startswith("  "):
            return False  # the source line the warnings module prints under a hidden warning
        if _DEPRECATION_WARNING.match(text):
            self._after_warning = True
            return False
        if _MXNET_NOTICES.search(text):
            return False
        logged = _LOGGED.match(text)
        if logged:
            return is_speed_report(text) or logged.group("message").startswith(_SOCKEYE_PROGRESS)
        return True
