"""Which stack frame is the user's: the innermost one outside torch and aclcap (and outside
frozen or generated code, `<string>`). A custom op is called by a line there: the model's, or
a library's the model calls (an out-of-tree plugin's layer); that is the line to name."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

LIBRARIES = (str(Path(torch.__file__).parent) + "/", str(Path(__file__).parent) + "/")


def is_library(filename: str) -> bool:
    """Code of torch or aclcap, or code with no file."""
    return filename.startswith(("<", *LIBRARIES))


def user_line(depth: int = 1) -> tuple[str, int] | None:
    """(file, line) of the innermost user frame above the caller's `depth`-th frame."""
    frame: Any = sys._getframe(depth + 1)
    while frame is not None and is_library(frame.f_code.co_filename):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
