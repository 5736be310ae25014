"""The one exception type for bad input or environment: the CLI prints its message as one
line and exits 2 (../shared/README.md section 4)."""


class UsageError(Exception):
    """Bad input or environment; the message names the problem and the fix."""


def first_text_line(text: str) -> str:
    """The first non-blank line of a message, stripped."""
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")


def first_line(exc: BaseException, limit: int = 160) -> str:
    """`Type: first line of the message`, cut to `limit`: how any caught error is reported."""
    text = first_text_line(str(exc))
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def last_line(exc: BaseException) -> str:
    """`Type: last line of the message`: for import errors, whose last line says what broke."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
