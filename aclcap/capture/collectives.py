"""The collectives a rank's step issues, found without communicating, so that ranks whose
steps would issue different collectives are named before a real step deadlocks on it.

The eager step runs under a dispatch mode that records each collective (op, group, dtype,
shape, model line) and answers a functional collective locally with a tensor of the shape
the real one returns. A rank-dependent collective deadlocks eager itself, so no real
communication may happen before the ranks agree. Collectives that are not functional
(in-place `c10d` ops, which return a Work) run for real; a mismatch there is caught by the
ranks' deadline instead."""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from aclcap._compat import TorchDispatchMode
from aclcap._tensors import clone_tensors

_NAMESPACES = ("_c10d_functional", "c10d", "_c10d_functional_autograd")


@dataclass(frozen=True)
class Collective:
    op: str
    group: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    line: int
    caller: int = 0  # the model-file line that called `line`, when a helper issues it

    def key(self) -> tuple:
        """What must be equal on every rank (the source line may differ between ranks)."""
        return self.op, self.group, self.dtype, self.shape

    def text(self) -> str:
        where = f" at {Path(self.file).name}:{self.line}" if self.line else ""
        where += f" (called from line {self.caller})" if self.caller else ""
        return f"{self.op} {self.dtype} {list(self.shape)} (group {self.group}){where}"


def _local_answer(name: str, args: tuple) -> Any:
    """What a functional collective returns, without communicating: right shape and dtype,
    this rank's own values."""
    x = args[0]
    if name in ("all_reduce", "broadcast", "all_to_all_single", "all_reduce_"):
        return x if name.endswith("_") else x.clone()
    if name == "all_gather_into_tensor":
        return torch.cat([x] * int(args[1]))
    if name == "reduce_scatter_tensor":
        return x.chunk(int(args[2]))[0].clone()
    if name == "wait_tensor":
        return x
    return None


class _Recorder(TorchDispatchMode):
    def __init__(self, model_file: Path) -> None:
        super().__init__()
        self.model_file = model_file.resolve()
        self.calls: list[Collective] = []

    def _site(self) -> tuple[str, int, int]:
        frames = [f for f in traceback.extract_stack()
                  if Path(f.filename).resolve() == self.model_file]
        if not frames:
            return "", 0, 0
        caller = frames[-2].lineno or 0 if len(frames) > 1 else 0
        return frames[-1].filename, frames[-1].lineno or 0, caller

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ns, name = func.namespace, func._schema.name.split("::")[-1]
        if ns not in _NAMESPACES:
            return func(*args, **kwargs)
        if not name.startswith("_") and name != "wait_tensor":  # skip wrappers and waits
            x = args[0] if isinstance(args[0], torch.Tensor) else args[0][0]
            group = next((str(a) for a in reversed(args) if isinstance(a, str)), "")
            self.calls.append(Collective(name, group, str(x.dtype).removeprefix("torch."),
                                         tuple(x.shape), *self._site()))
        answer = _local_answer(name, args) if ns == "_c10d_functional" else None
        return answer if answer is not None else func(*args, **kwargs)


def record_collectives(model: torch.nn.Module, inputs_by_size: dict[int, tuple],
                       model_file: Path) -> dict[int, list[Collective]]:
    """Per size, the collectives one eager step issues, in order."""
    found = {}
    with torch.no_grad():
        for size, args in sorted(inputs_by_size.items()):
            recorder = _Recorder(model_file)
            with recorder:
                model(*clone_tensors(args))
            found[size] = recorder.calls
    return found


def first_mismatch(by_rank: list[dict[int, list[Collective]]]) -> str | None:
    """The first size and collective where ranks differ, named on each rank, or None."""
    for size in sorted(by_rank[0]):
        sequences = [ranks.get(size, []) for ranks in by_rank]
        for i in range(max(len(s) for s in sequences)):
            here = [s[i] if i < len(s) else None for s in sequences]
            if len({c.key() if c else None for c in here}) > 1:
                said = "; ".join(
                    f"rank {r} issues {c.text()}" if c else
                    f"rank {r} issues none (its step ends after {len(sequences[r])})"
                    for r, c in enumerate(here))
                return f"size {size}: ranks issue different collectives at #{i + 1}: {said}"
    return None


def as_dicts(found: dict[int, list[Collective]]) -> dict[str, list[dict]]:
    return {str(size): [asdict(c) for c in calls] for size, calls in found.items()}
