"""The Python kernels op libraries register, recorded as they register them: the dispatcher
names only the file that made the `Library` for a Python kernel (a shared helper's, in a
library that registers through one), never the function, and check-meta's result cache
must know which files define each kernel (op_sources.py)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

from aclcap._compat import library_op_name

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_HERE = os.path.abspath(__file__)

# dispatcher name (`ns::op`, `ns::op.overload`) -> dispatch key -> what registered there:
# the kernel itself and the first frame outside torch that registered it.
_RECORDED: dict[str, dict[str, list[tuple[Callable[..., Any], str]]]] = {}


def recorded(dispatcher_name: str, key: str) -> list[tuple[Callable[..., Any], str]]:
    """(kernel, registering file) of each Python registration of the op for `key`, made
    while `recording()` was on; [] when none was seen."""
    return _RECORDED.get(dispatcher_name, {}).get(key, [])


def kernels(op: str) -> list[Callable[..., Any]]:
    """Every Python kernel recorded for `op` (`ns::name`, any overload), for any key."""
    return [fn for name, by_key in _RECORDED.items() if name.split(".")[0] == op
            for made in by_key.values() for fn, _ in made]


def _caller_file() -> str:
    """The first file up the stack outside torch and this module: the user's line that
    registered (torch.library.register_autograd's own wrapper is torch's)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_TORCH_DIR) and os.path.abspath(name) != _HERE:
            return name
        frame = frame.f_back
    return ""


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Record every `torch.library.Library.impl` made in the body (torch.library.impl,
    register_kernel and register_autograd go through it), then put torch back as it was."""
    original = torch.library.Library.impl

    def impl(self: torch.library.Library, op_name: Any, fn: Callable[..., Any],
             dispatch_key: str = "", *args: Any, **kwargs: Any) -> None:
        original(self, op_name, fn, dispatch_key, *args, **kwargs)
        name = library_op_name(self, op_name)
        name = name if "::" in name else f"{self.ns}::{name}"
        key = dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"
        _RECORDED.setdefault(name, {}).setdefault(key, []).append((fn, _caller_file()))

    torch.library.Library.impl = impl  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.library.Library.impl = original  # type: ignore[method-assign]
