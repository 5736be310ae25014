"""The exceptions that carry an exit code, and how any caught error is put in one line.

The CLI maps them (aclcap/cli/_errors.py): UsageError exits 2 (bad input or environment),
CaptureError exits 1 (a check failed: the step cannot be captured), anything else exits 3
(a bug of aclcap itself)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

# torch wraps the error that says what went wrong (BackendCompilerFailed holds it in
# `inner_exception`, TorchRuntimeError in `__cause__`): only these modules' wrappers are
# unwrapped, never aclcap's own errors, whose message already names the cause.
_WRAPPER_MODULES = ("torch._dynamo.exc",)
# A sentence of torch's message that tells the user what to do; "file an issue" never does.
_FIX = re.compile(r"\b(please|to fix|try|use|consider|instead|add|delete|remove|clone|"
                  r"rewrite|move|mark)\b", re.IGNORECASE)
_NOT_A_FIX = re.compile(r"file an issue|report (a|this) bug|TORCHDYNAMO_VERBOSE|tlparse",
                        re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
LIMIT = 320
_PACKAGE = Path(__file__).resolve().parent
DEBUG_ENV = "ACLCAP_DEBUG"  # set by --debug, so that worker processes see it too


class UsageError(Exception):
    """Bad input or environment; the message names the problem and the fix."""


class CaptureError(Exception):
    """Capturing failed; the message names the op and source line where known."""


def innermost(exc: BaseException) -> BaseException:
    """The exception torch's compile wrappers hold: the one whose message is the cause."""
    seen = {id(exc)}
    while type(exc).__module__ in _WRAPPER_MODULES:
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if not isinstance(inner, BaseException) or id(inner) in seen:
            break
        seen.add(id(inner))
        exc = inner
    return exc


def raised_in_aclcap(exc: BaseException) -> bool:
    """Whether the innermost frame that raised `exc` is aclcap's own code: an aclcap bug
    (exit 3), where one raised in torch, a model library or generated code is the step's."""
    exc = innermost(exc)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    return Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE)


@contextlib.contextmanager
def step_failures(what: str) -> Iterator[None]:
    """Run the step's own code: an exception it raises becomes CaptureError(`what: why`), a
    failed size; one raised in aclcap's own code (`raised_in_aclcap`) stays an internal
    error, and aclcap's own errors pass as they are."""
    try:
        yield
    except (CaptureError, UsageError):
        raise
    except Exception as exc:
        if raised_in_aclcap(exc):
            raise
        raise CaptureError(f"{what}: {first_line(exc)}") from exc


def first_text_line(text: str) -> str:
    """The first non-blank line of a message, stripped."""
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")


def error_line(text: str) -> str:
    """A message as one line: no blank lines before or after, its lines joined."""
    return " ".join(ln.strip() for ln in str(text).splitlines() if ln.strip())


def cut_middle(text: str, limit: int = LIMIT) -> str:
    """`text` shortened to `limit` by cutting its middle: the start says what failed, the
    end usually says why and what to do."""
    if len(text) <= limit:
        return text
    keep = limit - 5
    head = text[: keep // 2].rsplit(" ", 1)[0]  # whole words only
    tail = text[len(text) - (keep - keep // 2):].split(" ", 1)[-1]
    return f"{head} ... {tail}"


# What torch appends to many errors and no user of aclcap can act on: cut from reasons
# (issue 50: "please report a bug to PyTorch" repeated in every row).
_BOILERPLATE = re.compile(
    r"[ \t]*(?:Please file an issue on github\.?|(?:This (?:is likely|may be) a bug[^.]*?\. *)?"
    r"[^.\n]*please report a bug to PyTorch\.?|For more information, run with "
    r"TORCH_LOGS=\S+?\.|"
    # Inductor's check of a graph input's size: no custom op's fake is involved
    r"\s*Error in op: input\s+This error most often comes from a incorrect fake \(aka meta\) "
    r"kernel for a custom op\.\s+Use torch\.library\.opcheck to test your custom op\.\s+"
    r"See \S+)", re.IGNORECASE)


def summary(text: str, limit: int = LIMIT) -> str:
    """The first paragraph of a message in one line; where it is too long, its first
    sentence (what failed) and the sentence that carries the fix, then the middle cut."""
    paragraph = []
    # a c10::Error carries the C++ backtrace (frames, absolute paths) after its message:
    # noise in a one-line reason, kept only under --debug
    if not os.environ.get(DEBUG_ENV):
        text = str(text).split("Exception raised from ", 1)[0]
    text = _BOILERPLATE.sub("", str(text))
    for line in text.strip().splitlines():
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line.strip())
    whole = " ".join(paragraph)
    if len(whole) <= limit:
        return whole
    sentences = [s for line in paragraph for s in _SENTENCE_END.split(line)]  # a line ends one
    start = next((i for i, s in enumerate(sentences) if i and _FIX.search(s)
                  and not _NOT_A_FIX.search(s)), None)
    if start is None:
        return cut_middle(whole, limit)
    fix = []
    for sentence in sentences[start:]:  # the fix runs on while its sentences say what to do
        if not _FIX.search(sentence) or _NOT_A_FIX.search(sentence):
            break
        fix.append(sentence)
    return cut_middle(f"{sentences[0]} ... {' '.join(fix)}", limit)


def first_line(exc: BaseException, limit: int = LIMIT) -> str:
    """`Type: message` of the innermost cause, its fix kept (see `summary`): how any caught
    error is reported. aclcap's own errors are their message alone: it is written for the
    user, and `UsageError:` in the middle of a line is noise to them."""
    exc = innermost(exc)
    text = summary(str(exc), limit)
    if isinstance(exc, UsageError | CaptureError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def last_line(exc: BaseException) -> str:
    """`Type: last line of the message`: for import errors, whose last line says what broke."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


# What torch raises or says when the step branches on a tensor's values, not its sizes.
_VALUE_DEPENDENT = re.compile(r"GuardOnDataDependentSymNode|data-dependent|DataDependent|"
                              r"Tensor\.item\(\)|\.tolist\(\)|generic_jump TensorVariable|"
                              r"capture_scalar_outputs")


def value_dependent(exc: BaseException) -> bool:
    """Whether a tracing error comes from control flow on a tensor's values (`if x.sum() >
    0`, `.item()`, `.tolist()`): guard ranges of sizes cannot fix those, torch.cond can."""
    chain: BaseException | None = exc
    while chain is not None:
        if _VALUE_DEPENDENT.search(f"{type(chain).__name__}: {chain}"):
            return True
        chain = chain.__cause__
    return False
