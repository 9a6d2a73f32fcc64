"""The one exception type that reaches users as a single line."""


class UserError(Exception):
    """Bad input or a missing prerequisite: the message names the problem and the fix."""
