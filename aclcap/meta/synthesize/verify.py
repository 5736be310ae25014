"""The battery a synthesized meta runs in a fresh worker before any row calls it verified:
check-meta's own checks (meta/checks.py CHECKS) on calls held out of fitting, less the two
that test the schema (writes, unused `!`: reported as schema defects instead), and adapted
where torch itself cannot do more whatever the meta:

- a data-dependent output (`ctx.new_dynamic_size()`) has no size on the meta device, and
  a fake mode without a ShapeEnv refuses it: its fake is compared with the kernel under a
  ShapeEnv, every dim but the unbacked one, and the meta device is not asked;
- an op whose schema returns an alias (`-> Tensor(a!)`, a view) cannot be functionalized by
  torch.compile or opcheck's test_aot_dispatch_dynamic ("We only support functionalizing
  operators whose outputs do not have alias annotations"): those two are left out and the
  verdict says so."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols
from torch.utils._pytree import tree_flatten, tree_map_only

from aclcap._tensors import clone_tensors
from aclcap.errors import first_line
from aclcap.meta.checks import CHECKS, OPCHECK_TESTS, OpCheck
from aclcap.meta.observe import RecordedCall

BATTERY = ("fake_vs_real", "meta_device", "dynamic_shapes", "opcheck", "fullgraph_compile")
ALIAS_SKIPPED = ("fullgraph_compile",)
ALIAS_SKIP_REASON = ("torch.compile and opcheck's test_aot_dispatch_dynamic skipped: torch "
                     "does not functionalize a custom op whose output aliases an input")
UNBACKED_SKIP_REASON = ("the meta device skipped and the data-dependent size not compared: "
                        "it has no value without data")


def check_fake_unbacked(check: OpCheck, runs: list[RecordedCall]) -> None:
    """Fake against real for an op with a data-dependent size: under a ShapeEnv, so that
    `ctx.new_dynamic_size()` works; each unbacked dim stands for any size."""
    for run in runs:
        try:
            with FakeTensorMode(shape_env=ShapeEnv()) as mode:
                args, kwargs = tree_map_only(torch.Tensor, mode.from_tensor,
                                             (run.sample.args, run.sample.kwargs))
                fake = check.op(*args, **kwargs)
        except Exception as exc:
            check.out.fail(f"fake impl raised {first_line(exc)}", key="fake:raised")
            continue
        fakes, reals = tree_flatten(fake)[0], tree_flatten(run.outputs)[0]
        for i, (f, r) in enumerate(zip(fakes, reals, strict=False)):
            if not isinstance(r, torch.Tensor):
                continue
            same = isinstance(f, torch.Tensor) and f.dtype == r.dtype and f.dim() == r.dim() \
                and all(free_unbacked_symbols(a) or a == b for a, b in zip(f.shape, r.shape,
                                                                          strict=True))
            if not same:
                check.out.fail(f"fake impl output {i}: {_meta(f)}, but the kernel gives "
                               f"{_meta(r)}", key=f"fake:{i}")


def check_opcheck_no_aot(check: OpCheck, runs: list[RecordedCall]) -> None:
    """opcheck without test_aot_dispatch_dynamic (see the module docstring)."""
    tests = tuple(t for t in OPCHECK_TESTS if t != "test_aot_dispatch_dynamic")
    for run in runs:
        args, kwargs = clone_tensors((run.sample.args, run.sample.kwargs))
        results = torch.library.opcheck(check.op, args, kwargs, test_utils=tests,
                                        raise_exception=False)
        for test, result in results.items():
            if isinstance(result, BaseException):
                check.out.fail(f"opcheck {test}: {first_line(result)}", key=test)


def _meta(t: object) -> str:
    if not isinstance(t, torch.Tensor):
        return type(t).__name__
    return f"shape {list(t.shape)} dtype {t.dtype}"


# How the emitted comments name the checks a meta passed.
IN_WORDS = {"fake_vs_real": "fake vs real", "meta_device": "meta device",
            "dynamic_shapes": "symbolic sizes", "opcheck": "opcheck",
            "fullgraph_compile": "torch.compile(fullgraph, dynamic)",
            "fake_vs_real_unbacked": "fake vs real", "opcheck_no_aot": "opcheck"}

CHECKS.setdefault("fake_vs_real_unbacked", check_fake_unbacked)
CHECKS.setdefault("opcheck_no_aot", check_opcheck_no_aot)


def battery(op: torch._ops.OpOverload, data_dependent: bool) -> tuple[tuple[str, ...], list[str]]:
    """The checks to run on `op`'s synthesized meta, and what was left out, in words."""
    checks, skipped = list(BATTERY), []
    if data_dependent:
        checks.remove("meta_device")
        checks[checks.index("fake_vs_real")] = "fake_vs_real_unbacked"
        skipped.append(UNBACKED_SKIP_REASON)
    if any(r.alias_info is not None for r in op._schema.returns):
        checks = [c for c in checks if c not in ALIAS_SKIPPED]
        checks[checks.index("opcheck")] = "opcheck_no_aot"
        skipped.append(ALIAS_SKIP_REASON)
    return tuple(checks), skipped
