"""The one error type the CLI turns into a single stderr line and exit code 2."""


class ReportError(Exception):
    """A problem with the user's input; the message names the file (and line) and the fix."""
