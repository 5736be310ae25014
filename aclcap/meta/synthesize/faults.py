"""Kernel findings: a call whose two eager runs on the same inputs differ, or that writes past
the end of an input (guarded.py). Such a kernel reads memory it does not own or leaves part
of its output unwritten (bitsandbytes' dequantize_blockwise reads a bfloat16 `code` table
through a float32 pointer, past its end), or writes where it must not (torch-scatter run
along a dim its index overruns): its values say nothing about a fake, so the call is kept
out of fitting and verification and reported as the kernel's fault, with the input class
that triggers it. Both runs get
copies of the same inputs and the same random state (a kernel that draws random numbers
draws the same ones); an output whose size follows the data has the same size twice."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from aclcap._compat import OpOverload, tree_flatten
from aclcap._isolated import ChildDied, run_forked
from aclcap.errors import first_line
from aclcap.meta.fakecheck import fake_mismatches
from aclcap.meta.fence import library
from aclcap.meta.guarded import FILL, OTHER_FILL, filled_allocations, libc
from aclcap.meta.observe import (
    STEP,
    ObservedCall,
    RecordedCall,
    bind,
    named_tensors,
    observe,
    observed_inputs,
)
from aclcap.meta.sample_inputs import SampleInput

# A float difference within rounding (a GPU reduction's atomics reorder its sum) is no
# finding: what a kernel leaves unwritten or reads past a buffer is not rounding.
_ROUNDING = {torch.float32: 1e-5, torch.float64: 1e-5}
_HALF_ROUNDING = 2e-2
MAX_NAMED = 3  # calls a finding names where no dtype tells them from the clean ones
OVERRUN = "it writes past the end of"  # guarded.py caught it
ALLOCATED = "memory it allocated (an output or a buffer)"  # the fence (fence.py) did


@dataclass(frozen=True)
class FaultyCall:
    """A call whose two eager runs differed: its inputs, what changed it from its sample
    (a variation's description, or "" where unknown) and what differed."""

    call: ObservedCall
    what: str
    differs: str


def _same_rng(sample: SampleInput) -> AbstractContextManager:
    """The random state of the CPU and of the sample's device, restored on exit."""
    device = next((x.device for x in tree_flatten((sample.args, sample.kwargs))[0]
                   if isinstance(x, torch.Tensor) and x.device.type not in ("cpu", "meta")),
                  None)
    if device is None:
        return torch.random.fork_rng(devices=[])
    return torch.random.fork_rng(devices=[device.index or 0], device_type=device.type)


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal (NaN equal to NaN), or within a float dtype's rounding."""
    if torch.equal(a, b):
        return True
    if not a.is_floating_point():
        return False
    tol = _ROUNDING.get(a.dtype, _HALF_ROUNDING)
    return torch.allclose(a.double(), b.double(), rtol=tol, atol=tol, equal_nan=True)


def _differs(a: Any, b: Any) -> str:
    """What differs between one value of two runs: "values differ", "shape differs ([4],
    then [5])", or "" where nothing does."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return "" if isinstance(a, torch.Tensor) == isinstance(b, torch.Tensor) else \
            f"kind differs ({type(a).__name__}, then {type(b).__name__})"
    for what, one, two in (("shape", list(a.shape), list(b.shape)), ("dtype", a.dtype, b.dtype),
                           ("strides", a.stride(), b.stride())):
        if one != two:
            return f"{what} differs ({one}, then {two})"
    return "" if _same_values(a, b) else "values differ"


def _leaves(op: OpOverload, run: RecordedCall) -> Iterator[tuple[str, Any]]:
    """(name, value) of every output (`output 0`), then of every input as the call left it."""
    for i, out in enumerate(tree_flatten(run.outputs)[0]):
        yield f"output {i}", out
    after = run.after or run.sample
    yield from named_tensors(bind(op, after.args, after.kwargs), indexed=True)


def difference(op: OpOverload, first: RecordedCall, second: RecordedCall) -> str:
    """What differs between two runs of one call ("output 0's values differ"), or ""."""
    for (name, a), (_, b) in zip(_leaves(op, first), _leaves(op, second), strict=False):
        if what := _differs(a, b):
            return f"{name}'s {what}"
    return ""


def _seed_c_rand() -> None:
    """C's `rand()` seeded alike before each run, as torch's generator is (`_same_rng`):
    torch-cluster's `fps` (random_start) and `random_walk` draw from it, and its state
    followed whichever ops the worker had run before, so two runs of a call differed (a
    "kernel finding") in one command and not in the next."""
    srand = getattr(libc(), "srand", None)
    if srand is not None:
        srand(0x5EED)


def observe_twice(op: OpOverload, sample: SampleInput, *, site: str = "",
                  phase: str = STEP) -> tuple[RecordedCall, str]:
    """The call recorded (`observe`) from its first run, and what its second run on copies
    of the same inputs gave differently ("" if nothing). Raises what the first run raises;
    a second run that raises is a difference."""
    with _same_rng(sample), filled_allocations(FILL) as fence:
        _seed_c_rand()
        first = observe(op, sample.args, sample.kwargs, site=site, phase=phase)
    if first.overrun:  # what lay past the input told nothing: no second run is needed
        return first, f"{OVERRUN} `{first.overrun}`"
    if fence.overran:
        return first, f"{OVERRUN} {ALLOCATED}"
    try:
        with filled_allocations(OTHER_FILL) as fence:
            _seed_c_rand()
            second = observe(op, sample.args, sample.kwargs, site=site, phase=phase,
                             fill=OTHER_FILL)
    except Exception as exc:
        return first, f"the second run raises {first_line(exc)}"
    return first, f"{OVERRUN} {ALLOCATED}" if fence.overran else difference(op, first, second)


def _dtypes(calls: Sequence[ObservedCall], name: str) -> list[str]:
    """The dtypes argument `name` had over `calls`, in order of appearance."""
    found: dict[str, None] = {}
    for call in calls:
        arg = call.arg(name)
        for facts in (arg.tensor,) if arg.tensor else arg.tensors or ():
            if facts is not None:
                found[facts.dtype] = None
    return list(found)


def _dtype_class(name: str, faulty: Sequence[ObservedCall], clean: Sequence[ObservedCall]
                 ) -> str:
    """`` `code` is bfloat16 or float16 `` where tensor argument `name` has those dtypes in
    the faulty calls, another in some clean call, and those in fewer clean calls than faulty
    ones: a fault that shows on some runs only (what lies past a buffer) leaves a call of the
    class clean now and then, and the count says how many ("4 of 5 such calls"); else ""."""
    bad = _dtypes(faulty, name)
    if not bad or not set(_dtypes(clean, name)) - set(bad):
        return ""
    alike = sum(bool(set(_dtypes([c], name)) & set(bad)) for c in clean)
    if alike >= len(faulty):
        return ""
    share = f" ({len(faulty)} of {len(faulty) + alike} such calls)" if alike else ""
    return f"`{name}` is {' or '.join(bad)}{share}"


def input_class(faulty: Sequence[FaultyCall], clean: Sequence[ObservedCall]) -> str:
    """What sets the faulty calls apart: `when `code` is bfloat16` for each tensor argument
    whose dtypes mark them (_dtype_class); else which calls (at most MAX_NAMED)."""
    calls = [f.call for f in faulty]
    parts = [part for arg in calls[0].args if (part := _dtype_class(arg.name, calls, clean))]
    if parts:
        return "when " + " and ".join(parts)
    named = list(dict.fromkeys(f.what or _inputs(f.call) for f in faulty))
    more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
    return "on " + "; ".join(named[:MAX_NAMED]) + more


def _inputs(call: ObservedCall) -> str:
    """`a [4, 64] uint8, code [256] bfloat16`: a call named by its tensors."""
    return ", ".join(f"{a.name} {list(a.tensor.shape)} {a.tensor.dtype}"
                     for a in call.args if a.tensor)


def kernel_finding(faulty: Sequence[FaultyCall], clean: Sequence[ObservedCall],
                   left_out_of: str) -> str:
    """The one line a report prints for an op's faulty calls: the first call's kind of
    fault leads (an overrun, or two runs that differ)."""
    if faulty[0].differs.startswith(f"{OVERRUN} {ALLOCATED}"):
        what, why = f"the kernel writes past the end of {ALLOCATED}", \
            "writes memory it does not own"
    elif faulty[0].differs.startswith(OVERRUN):
        what, why = "the kernel writes past the end of an input", "writes memory it does not own"
    else:
        what, why = "two eager runs on the same inputs differ", \
            "reads memory it does not own or leaves output unwritten"
    return (f"{what} {input_class(faulty, clean)} ({len(faulty)} call(s), e.g. "
            f"{faulty[0].differs}): the kernel {why}; those calls are left out of "
            f"{left_out_of}")


def one_call(op: OpOverload, sample: SampleInput, site: str = "", phase: str = STEP,
             diff_meta: bool = False) -> dict:
    """One call run twice (observe_twice) as plain data, which crosses from a forked child:
    {"rejected": why}, or the call, what its two runs differed in, and with `diff_meta` the
    existing meta's disagreements with the kernel (else None)."""
    try:
        recorded, differs = observe_twice(op, sample, site=site, phase=phase)
    except Exception as exc:
        return {"rejected": first_line(exc)}
    mismatches = fake_mismatches(op, sample.args, sample.kwargs, recorded.outputs) \
        if diff_meta and not differs else None
    return {"call": recorded.call.to_dict(), "differs": differs, "mismatches": mismatches}


def one_call_forked(op: OpOverload, sample: SampleInput, site: str = "", phase: str = STEP,
                    diff_meta: bool = False) -> dict:
    """`one_call` in a child forked for it (ChildDied where it crashes), the fence loaded
    here first, once for every child."""
    library()
    return run_forked(partial(one_call, op, sample, site, phase, diff_meta))


def without_faults(op: OpOverload, samples: Sequence[SampleInput], isolate: bool = False
                   ) -> tuple[list[SampleInput], list[str]]:
    """The samples whose two eager runs agree (and those the kernel rejects: the checks
    report them), and the kernel finding over the others ([] if none). With `isolate` (the
    kernel crashed while observed), each call runs twice in a child forked for it, so one
    that writes past what it owns corrupts no later check in this worker (fbgemm's
    permute_1D_sparse_data aborted a verification so, where its fake was right), and a
    crash is a faulty call like two runs that differ."""
    kept, clean, faulty = [], [], []
    for sample in samples:
        try:
            got = one_call_forked(op, sample) if isolate else one_call(op, sample)
        except ChildDied as died:
            got = {"call": observed_inputs(op, sample.args, sample.kwargs).to_dict(),
                   "differs": str(died)}
        if "rejected" in got:  # the kernel rejects it: check_op says so
            kept.append(sample)
            continue
        call, differs = ObservedCall.from_dict(got["call"]), got["differs"]
        if differs:
            faulty.append(FaultyCall(call, "", differs))
        else:
            kept.append(sample)
            clean.append(call)
    return kept, [kernel_finding(faulty, clean, "verification")] if faulty else []
