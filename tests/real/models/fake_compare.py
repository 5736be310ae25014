"""Run a library's own fakes, the synthesized fakes of its ops re-defined without them, and
its real kernels on calls no synthesis sample had; print one JSON line, {op: {"held_back",
"calls": [{"call", "synthesized", "maintainers", "kernel"}]}}, each output as [shape,
dtype] ("u" for a data-dependent dim) or null, a fake that raises as "error: ...". A fake
the synthesized file left unregistered is registered here and judged too (`held_back`).
Its own process: the synthesized fakes are registered for good where they are loaded.
bnb_fake_compare.py and fbgemm_fake_compare.py give the calls."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable

import torch
from torch._library import simple_registry
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._pytree import tree_flatten, tree_map_only

Calls = dict[str, list[tuple[str, Callable[[], tuple]]]]  # op -> (what is new, its args)


def _meta(out: object) -> list:
    leaves, _ = tree_flatten(out)
    return [None if t is None else
            [["u" if isinstance(s, torch.SymInt) else int(s) for s in t.shape], str(t.dtype)]
            for t in leaves]


def _fake(op: torch._ops.OpOverload, args: tuple) -> list | str:
    """The op's fake on fake copies of `args` (data-dependent sizes allowed)."""
    mode = FakeTensorMode(shape_env=ShapeEnv(allow_dynamic_output_shape_ops=True),
                          static_shapes=True)
    try:
        with mode:
            return _meta(op(*tree_map_only(torch.Tensor, mode.from_tensor, args)))
    except Exception as exc:
        return f"error: {type(exc).__name__}: {str(exc).splitlines()[0]}"


def _register_held_back(synthesized: object, namespace: str, name: str) -> bool:
    """Register the file's fake for `name` where the file left it unregistered (its
    verification failed): the fake is judged here, its registration in the test. True if
    it was held back."""
    qualname = f"{namespace}::{name}"
    if simple_registry.singleton.find(qualname).fake_impl.kernel is not None:
        return False  # registered by the file: verified
    torch.library.register_fake(qualname, getattr(synthesized, f"_fake_{name}"))
    return True


def main(namespace: str, answers: object, calls: Calls) -> None:
    """Compare the fakes of `namespace` (the synthesized file, sys.argv[1]) with those of
    the library's own op packets (`answers`, e.g. torch.ops.fbgemm) on `calls`."""
    spec = importlib.util.spec_from_file_location("synthesized", sys.argv[1])
    assert spec is not None and spec.loader is not None
    synthesized = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synthesized)
    torch.manual_seed(0)
    report: dict[str, dict] = {}
    for name, made in calls.items():
        report[name] = {"held_back": _register_held_back(synthesized, namespace, name),
                        "calls": []}
        for what, make in made:
            args = make()
            theirs = getattr(answers, name).default
            report[name]["calls"].append({
                "call": what,
                "synthesized": _fake(getattr(getattr(torch.ops, namespace), name).default,
                                     args),
                "maintainers": _fake(theirs, args),
                "kernel": _meta(theirs(*args)),
            })
    print(json.dumps(report))
