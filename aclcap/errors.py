"""The one exception type for bad input or environment: the CLI prints its message as one
line and exits 2 (../shared/README.md section 4)."""


class UsageError(Exception):
    """Bad input or environment; the message names the problem and the fix."""
