"""The calls synthesis learns from, made in check-meta's worker (a kernel that crashes costs
that op only): each sample (declared with @aclcap.samples, or harvested from a model file's
build and step) and its variations, run on the real kernel. A variation the kernel rejects
is no observation, nor is a call whose two eager runs differ (faults.py: the kernel's
fault, reported as such). The same samples are made again, in a fresh worker, to verify the
synthesized meta on the calls held out of fitting: every sample is drawn under a fixed seed,
and a call is found again by its key (shapes, dtypes, strides, argument values)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from aclcap._compat import OpOverload
from aclcap._isolated import ChildDied
from aclcap.meta.messages import CALL_STEP, is_call_step
from aclcap.meta.observe import (
    DECLARED,
    VARIATION,
    ObservedCall,
    RecordedCall,
    observed_inputs,
)
from aclcap.meta.sample_inputs import SampleInput, samples_for, seed_all
from aclcap.meta.synthesize.faults import FaultyCall, kernel_finding, one_call, one_call_forked
from aclcap.meta.variations import SAME_SIZES, TIED, Outputs, supplied, variations

MAX_CALLS = 300  # per op: ~3 samples with their variations
AS_GIVEN = "as given"  # the description of a sample's own call, before its variations


@dataclass
class Source:
    """One sample and where it came from: DECLARED, or BUILD / STEP with its model line."""

    sample: SampleInput
    phase: str = DECLARED
    site: str = ""


@dataclass
class Observation:
    """An op's real calls; `meta_diffs` where the op's existing meta disagrees with one."""

    calls: list[ObservedCall] = field(default_factory=list)
    tried: int = 0
    rejected: list[str] = field(default_factory=list)  # "x dim 1: 64 -> 65: <error>"
    meta_diffs: list[str] = field(default_factory=list)
    meta_compared: int = 0  # calls the existing meta was run on (diff_meta)
    faulty: list[FaultyCall] = field(default_factory=list)  # two eager runs differed
    crashed: list[tuple[str, str]] = field(default_factory=list)  # (call, how): isolated
    given: set[str] = field(default_factory=set)  # keys of the samples as given

    def to_dict(self) -> dict:
        """What crosses the pipe. A fault on a sample as given (declared or harvested) is a
        kernel finding, the kernel broken as its callers call it; one only on calls aclcap
        varied is a kernel warning: such a call may break the op's contract (a dim changed
        without the weight it must match), which a kernel that checks nothing reads past. A
        variation that keeps the sizes (values redrawn) has its sample's key, and is still
        a variation: vLLM's gated delta rule races when every state index is 0."""
        line = kernel_finding(self.faulty, self.calls, "fitting and verification") \
            if self.faulty else ""
        given = any(f.call.phase != VARIATION or (call_key(f.call) in self.given
                    and not f.what.endswith(SAME_SIZES)) for f in self.faulty)
        return {"calls": [c.to_dict() for c in self.calls], "tried": self.tried,
                "kernel_findings": [line] if given else [],
                "kernel_warnings": [f"{line}; only on calls aclcap varied from the samples, "
                                    "which may be outside the op's contract"]
                if line and not given else [],
                "rejected": self.rejected[:5], "rejected_count": len(self.rejected),
                # what each rejected call changed, without the error: what the kernel ties
                "rejected_changes": [r.split(": ", 1)[0] for r in self.rejected],
                "meta_diffs": self.meta_diffs, "meta_compared": self.meta_compared,
                "crashed": self.crashed}


def call_key(call: ObservedCall) -> str:
    """A call's key as a string: what crosses the pipe to the verifying worker."""
    return json.dumps(call.key(), default=str)


def sources(qualname: str, device: str, dtypes: Sequence[torch.dtype],
            harvested: Sequence[RecordedCall]) -> list[Source]:
    """The op's samples: declared ones (once per dtype, under a fixed seed, so a fresh
    worker makes the same ones) and the harvested calls of the op."""
    made = []
    declare = samples_for(qualname)
    if declare is not None:
        seed_all()
        for dtype in dtypes:
            made += [Source(s) for s in declare(torch.device(device), dtype)]
    made += [Source(r.sample, r.call.phase, r.call.site) for r in harvested
             if r.call.op == qualname]
    return made


def candidates(op: OpOverload, samples: Sequence[Source],
               outputs_of: Callable[[SampleInput], Outputs | None] = lambda _: None
               ) -> Iterator[tuple[SampleInput | None, str, str, str]]:
    """(sample, phase, site, description) of every call to try: each sample, its optional
    arguments given where it leaves them None (shaped by `outputs_of(sample)`, the outputs
    of its own call: variations.supplied), then its variations, in a fixed order; sample
    None (phase TIED) for a dim changed alone that an offsets tensor ties, which no call may
    change alone."""
    for source in samples:
        yield source.sample, source.phase, source.site, AS_GIVEN
        for variation in supplied(op, source.sample, lambda s=source.sample: outputs_of(s)):
            yield variation.sample, VARIATION, source.site, variation.description
        for variation in variations(op, source.sample):
            if variation.kind == TIED:  # no call: the kernel's contract ties the dim
                yield None, TIED, source.site, variation.description
            else:
                yield variation.sample, VARIATION, source.site, variation.description


def call_step(index: int, what: str) -> str:
    """The step announced before candidate call `index` runs: a crash is blamed on it."""
    return f"{CALL_STEP}{index}: {what}"


def crashed_call(step: str | None) -> tuple[int, str] | None:
    """(index, description) of the candidate call a crash happened in, from its step."""
    if not is_call_step(step):
        return None
    index, _, what = step.removeprefix(CALL_STEP).partition(": ")
    return int(index), what


def observe_op(op: OpOverload, samples: Sequence[Source], diff_meta: bool = False,
               limit: int = MAX_CALLS, skip: Collection[int] = (),
               hung: Sequence[str] = (), isolate: bool = False,
               announce: Callable[[str], None] | None = None) -> Observation:
    """Run the kernel on every candidate call (up to `limit` accepted) but those in `skip`
    (calls that crashed an earlier worker) and those that make a change in `hung` (one that
    hung the kernel), alone or first of a chain; `announce` hears each call's step before it
    runs, so a crash costs that call alone. With `isolate` (the kernel crashed a worker
    before), each call runs in a child of its own: one that wrote past what it allocated
    corrupts nothing the next call sees, and a crash is that call's, named with its signal,
    the same in every run. With `diff_meta`, the op's existing meta runs on each call too
    and its disagreements are kept."""
    seen = Observation()
    keys: set[str] = set()
    given_outputs: dict[int, Outputs] = {}  # id(sample) -> its own call's outputs
    seed_all()
    for index, (sample, phase, site, what) in enumerate(candidates(
            op, samples, lambda s: given_outputs.get(id(s)))):
        if len(seen.calls) >= limit:
            break
        if sample is None:
            seen.rejected.append(f"{what}: tied by an offsets tensor")
            continue
        key = call_key(observed_inputs(op, sample.args, sample.kwargs))
        if what == AS_GIVEN:  # a caller's own call, even where a variation made it first
            seen.given.add(key)
        if key in keys and not what.endswith(SAME_SIZES):
            continue  # the same call again (samples alike over dtypes): nothing new
        keys.add(key)
        if index in skip or any(what == h or what.startswith(h + ", ") for h in hung):
            continue
        seen.tried += 1
        if announce is not None:
            announce(call_step(index, what))
        args = (op, sample, site, phase, diff_meta and len(seen.meta_diffs) < 3)
        try:
            made = one_call_forked(*args) if isolate else one_call(*args)
        except ChildDied as died:
            seen.crashed.append((what, str(died)))
            continue
        if "rejected" in made:  # the kernel rejects it: no observation
            seen.rejected.append(f"{what}: {made['rejected']}")
            continue
        call = ObservedCall.from_dict(made["call"])
        if what == AS_GIVEN:
            given_outputs[id(sample)] = outputs(call)
        if made["differs"]:  # the kernel's fault (faults.py): its values tell nothing of a fake
            seen.faulty.append(FaultyCall(call, what, made["differs"]))
            continue
        seen.calls.append(call)
        if made["mismatches"] is not None:
            seen.meta_compared += 1
            for reason in made["mismatches"]:
                line = f"{_inputs(call)}: {reason}"
                if line not in seen.meta_diffs:  # the same call over dtypes says it once
                    seen.meta_diffs.append(line)
    return seen


def outputs(call: ObservedCall) -> Outputs:
    """(shape, dtype) of each output of a call (None where it returned None)."""
    return [(tuple(o.shape), getattr(torch, o.dtype)) if o is not None else None
            for o in call.outputs or ()]


def _own_outputs(op: OpOverload, sample: SampleInput) -> Outputs | None:
    """The outputs of the sample's own call, run here (the verifying worker's way to the
    calls observation shaped by them); None where the kernel rejects it."""
    made = one_call(op, sample)
    return outputs(ObservedCall.from_dict(made["call"])) if "call" in made else None


def samples_by_key(op: OpOverload, samples: Sequence[Source], keys: set[str]
                   ) -> list[SampleInput]:
    """The candidate calls whose keys are in `keys`, once each: the held-out calls again."""
    found: dict[str, SampleInput] = {}
    seed_all()
    for sample, _, _, _ in candidates(op, samples, lambda s: _own_outputs(op, s)):
        if sample is None:
            continue
        key = call_key(observed_inputs(op, sample.args, sample.kwargs))
        if key in keys and key not in found:
            found[key] = sample
    return list(found.values())


def _inputs(call: ObservedCall) -> str:
    """`input [3, 8], weight [8]`: the tensor shapes of a call, for a diff line."""
    return ", ".join(f"{a.name} {list(a.tensor.shape)}" for a in call.args if a.tensor)
