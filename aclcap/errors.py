"""The exceptions that carry an exit code, and how any caught error is put in one line.

The CLI maps them (aclcap/cli/_errors.py): UsageError exits 2 (bad input or environment),
CaptureError exits 1 (a check failed: the step cannot be captured), anything else exits 3
(a bug of aclcap itself)."""


class UsageError(Exception):
    """Bad input or environment; the message names the problem and the fix."""


class CaptureError(Exception):
    """Capturing failed; the message names the op and source line where known."""


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
