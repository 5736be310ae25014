"""Replay a captured step on fresh inputs and compare it with eager on the same values:
outputs and every input the step mutates (a KV cache). One sequence for exact sizes and for
sizes padded onto a larger graph."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from aclcap._tensors import clone_tensors, wait_collectives
from aclcap.draw_state import restore
from aclcap.graph.accuracy import LogprobResult, logprob_check
from aclcap.graph.backends.base import Captured
from aclcap.graph.compare import Comparison, compare
from aclcap.graph.padding import cut_outputs, unpad
from aclcap.graph.step import StepContext
from aclcap.host_values import input_names
from aclcap.size_dims import size_from


@dataclass
class ReplayCheck:
    comparison: Comparison
    logprobs: LogprobResult | None

    @property
    def ok(self) -> bool:
        return self.comparison.ok and (self.logprobs is None or self.logprobs.ok)

    @property
    def reasons(self) -> list[str]:
        return self.comparison.reasons + (self.logprobs.reasons if self.logprobs else [])


def _labelled(outputs: Any, args: tuple, mutated: list[int], buffers: dict[str, Any],
              names: list[str]) -> dict[str, Any]:
    """Outputs by position, mutated inputs by the step's parameter names (`input k_cache
    (mutated)`), written buffers by theirs."""
    leaves = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    labelled: dict[str, Any] = {f"output {i}": o for i, o in enumerate(leaves)}
    labelled.update({f"input {names[i]} (mutated)": args[i] for i in mutated})
    labelled.update({f"buffer {name} (mutated)": b for name, b in buffers.items()})
    return labelled


def _eager_from_same_state(model: torch.nn.Module, args: tuple
                           ) -> tuple[Any, tuple, list[int], dict[str, torch.Tensor]]:
    """`eager_step`, plus the model's buffers it wrote (a KV cache the model owns), with
    every buffer put back as it was: the replay that follows starts from the state eager
    started from, and leaves the model in the state it reaches itself."""
    buffers = dict(model.named_buffers())
    before = {name: b.clone() for name, b in buffers.items()}
    out, after, mutated = eager_step(model, args)
    written = {name: b.clone() for name, b in buffers.items()
               if not torch.equal(b, before[name])}
    for name, b in buffers.items():
        b.copy_(before[name])  # in place: a replay holds the model's own buffers
    return out, after, mutated, written


def eager_step(model: torch.nn.Module, args: tuple) -> tuple[Any, tuple, list[int]]:
    """Eager outputs, the inputs after the step, and which of them the step mutated."""
    after = clone_tensors(args)
    with torch.no_grad():
        out = wait_collectives(model(*after))
    mutated = [i for i, (a, b) in enumerate(zip(args, after, strict=True))
               if isinstance(a, torch.Tensor) and not torch.equal(a, b)]
    return out, after, mutated


def against_eager(step: StepContext, args: tuple,
                  run: Callable[[tuple], tuple[Any, tuple]]) -> tuple[Comparison, Any, Any]:
    """`run` (a replay, a compiled step) on a copy of `args` against eager on `args`, from the
    same model state: outputs, the inputs the step mutates, the buffers it writes. `run`
    returns its outputs and the inputs as it left them. The comparison, both outputs."""
    restore(args)  # the forward context make_inputs set with these args, for both runs
    want_out, want_args, mutated, want_buffers = _eager_from_same_state(step.model, args)
    got_out, got_args = run(clone_tensors(args))
    buffers = dict(step.model.named_buffers())
    got_buffers = {name: buffers[name] for name in want_buffers}
    names = input_names(step.model, len(args))
    result = compare(_labelled(want_out, want_args, mutated, want_buffers, names),
                     _labelled(got_out, got_args, mutated, got_buffers, names), step.tolerance)
    return result, want_out, got_out


def _first(outputs: Any) -> Any:
    return outputs[0] if isinstance(outputs, (tuple, list)) and outputs else outputs


def replay_check(step: StepContext, cap: Captured, args: tuple, logits: bool = False
                 ) -> ReplayCheck:
    """Replay `cap` on a copy of `args` (padded up to its size when `args` are smaller) and
    compare with eager on `args` itself, both from the same model state."""
    size = next((size_from(d, a.shape[d] if isinstance(a, torch.Tensor) else len(a))
                 for a, ds in zip(args, step.dims, strict=True) for d in ds), cap.size)

    def replay(got_args: tuple) -> tuple[Any, tuple]:
        if size == cap.size:
            return cap.replay(got_args), got_args
        padded = step.pad(got_args, size, cap.size)
        restore(padded)  # a forward context pad_inputs set for the padded step
        return cut_outputs(cap.replay(padded), size, cap.size), unpad(padded, step.dims, size)

    result, want_out, got_out = against_eager(step, args, replay)
    lp = None
    want0, got0 = _first(want_out), _first(got_out)
    if logits and isinstance(want0, torch.Tensor) and isinstance(got0, torch.Tensor) \
            and want0.shape == got0.shape:
        lp = logprob_check(want0, got0)
    return ReplayCheck(result, lp)
