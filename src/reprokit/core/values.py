"""The one validation of values that users type (numbers, and what may be written into a shell script)."""
from __future__ import annotations

import os
import re

from reprokit.core.errors import UserError

SHOWN_CHARACTERS = 80  # of a user's value quoted in a message: a 6 MB value must not make a 6 MB message
SHOWN_PATH_CHARACTERS = 240  # a path is quoted whole up to this: the user must find it to fix it
LONGEST_SETTING = 4096  # characters of a value written into a script: a path's longest (PATH_MAX); stock CK echoes
# every setting of the script it prepares, so a longer one would flood the console before any check of ours


def shown(value: object, limit: int = SHOWN_CHARACTERS, quoted: bool = True) -> str:
    """A user's value as a message quotes it: its repr (control characters escaped; ``quoted=False``: a string
    as is), clipped to ``limit`` characters with the full length stated (``'abc'… (100000 characters)``).
    A path (``pathlib.Path``) is shown as text, unquoted, up to SHOWN_PATH_CHARACTERS."""
    if isinstance(value, os.PathLike):
        return shown(str(os.fspath(value)), SHOWN_PATH_CHARACTERS, quoted=False)
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value) if quoted else value
        clipped = value[:limit]
        return f"{clipped!r}… ({len(value)} characters)" if quoted else f"{clipped}… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


TC_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$")  # tc's rates, as users give bandwidths
_TC_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}


MIN_RATE_BPS = 1e3  # below this a bandwidth means nothing here: tc keeps rates in bytes/s, the model divides by it


def tc_rate_bps(rate: str) -> float | None:
    """Bits per second of a tc rate like ``4gbit``; None when ``rate`` is not one, or is below MIN_RATE_BPS
    (``0gbit`` would pass tc an empty rate and make the model divide by zero)."""
    match = TC_RATE.match(rate)
    if not match:
        return None
    bps = float(match.group(1)) * _TC_UNITS[match.group(2)]
    return bps if bps >= MIN_RATE_BPS else None


def whole_number(raw: object, name: str, fix: str, low: int = 0, high: int | None = None) -> int:
    """``raw`` as an int in [low, high]; otherwise one line naming ``name``, the value and ``fix``."""
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{name} must be a whole number, got {shown(text)}; fix it with {fix}") from None
    if value < low:
        raise UserError(f"{name} must be at least {low}, got {shown(text, quoted=False)}; fix it with {fix}")
    if high is not None and value > high:
        raise UserError(f"{name} must be at most {high}, got {shown(text, quoted=False)}; fix it with {fix}")
    return value


def decimal(raw: object, name: str, fix: str, low: float, high: float) -> float:
    """``raw`` as a float in [low, high]; otherwise one line naming ``name``, the value and ``fix``."""
    text = str(raw).strip()
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{name} must be a number from {low} to {high}, got {shown(text)}; fix it with {fix}") from None
    if not low <= value <= high:
        raise UserError(f"{name} must be a number from {low} to {high}, got {shown(text)}; fix it with {fix}")
    return value


# What a value may hold when stock CK writes it into a shell script (`export NAME=VALUE`): the program's run
# script writes it unquoted, install and env scripts add double quotes only around values with a space.
# Anything else a shell would read as syntax is refused instead of escaped: CK renders the lines itself.
PLAIN_CHARACTERS = "letters, digits and _ . , / : = + @ % -"
_PLAIN = re.compile(r"[A-Za-z0-9_.,/:=+@%-]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HAZARDS = (  # (characters, what a shell makes of them)
    ("$", "a $ (variable or command substitution)"),
    ("`", "a backtick (command substitution)"),
    ("\n\r", "a line break (a new command)"),
    (";", "a ; (a new command)"),
    ("&", "an & (a background or new command)"),
    ("|", "a | (a pipe)"),
    ("<>", "a < or > (a redirection)"),
    ("()", "a parenthesis (a subshell)"),
    ('"', 'a double quote (quoting)'),
    ("'", "a single quote (quoting)"),
    ("\\", "a backslash (an escape)"),
    ("*?[]", "a wildcard (* ? [ ], file-name expansion)"),
    ("{}", "a brace (brace expansion)"),
    ("~", "a ~ (home-folder expansion)"),
    ("#", "a # (a comment)"),
    ("!", "a ! (history expansion)"),
    (" \t", "a space (word splitting)"),
)


def shell_hazard(value: str, spaces_quoted: bool = False) -> str | None:
    """What a shell would read as syntax in ``value`` written unquoted into a script, or None when it is plain.

    ``spaces_quoted``: the writer puts double quotes around values holding a space (CK's install and env
    scripts), so an inner space is plain there; a leading one is not (CK quotes only from the second character).
    """
    text = value.replace(" ", "") if spaces_quoted and value[:1] != " " else value
    if _PLAIN.fullmatch(text):
        return None
    bad = next(c for c in text if not _PLAIN.fullmatch(c))  # the first one, as the user reads the value
    return next((meaning for characters, meaning in _HAZARDS if bad in characters),
                f"the character {bad!r} (only {PLAIN_CHARACTERS} are plain)")


def plain_setting(name: str, value: object, why: str, spaces_quoted: bool = False) -> None:
    """Refuse, in one line, a setting whose name or value a shell would read as syntax (see shell_hazard)."""
    if not _NAME.fullmatch(name):
        raise UserError(f"setting name {shown(name)} is not a name; {why}, so names may only hold letters, digits "
                        f"and _ (not starting with a digit): rename it")
    text = str(value)
    if len(text) > LONGEST_SETTING:
        raise UserError(f"{shown(name, quoted=False)}={shown(text)} is too long for a setting (at most "
                        f"{LONGEST_SETTING} characters, a path's longest; {why}): give a shorter value")
    hazard = shell_hazard(text, spaces_quoted)
    if hazard is not None:
        raise UserError(f"{shown(name, quoted=False)}={shown(text)} holds {hazard}; {why}, so it is refused before "
                        f"anything runs: give a plain value ({PLAIN_CHARACTERS}"
                        f"{', inner spaces' if spaces_quoted else ''}; for a path with other characters, a symlink "
                        f"to it)")

