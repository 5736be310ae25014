"""--samples-from MODEL.py: sample inputs harvested from a model's eager step. Every call of
an op of the checked namespaces is recorded with cloned arguments; the distinct calls (by
shapes, dtypes, strides and non-tensor values), a few per op, become that op's samples. A
TorchFunctionMode sees the op as the model calls it, C++ composites included (a dispatch
mode sees only what they decompose into). Runs in check-meta's worker: a crashing kernel
takes only the worker down."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from aclcap._tensors import clone_tensors
from aclcap.meta.sample_inputs import SampleInput

MAX_PER_OP = 3


@dataclass
class Harvested:
    """Per op overload: its distinct samples and the model-file lines they came from."""

    samples: dict[str, list[SampleInput]] = field(default_factory=dict)
    sites: dict[str, list[str]] = field(default_factory=dict)
    _keys: set[tuple] = field(default_factory=set)


def _overload(func: Any) -> torch._ops.OpOverload | None:
    if isinstance(func, torch._ops.OpOverload):
        return func
    if isinstance(func, torch._ops.OpOverloadPacket):
        names = func.overloads()
        return getattr(func, "default" if "default" in names else names[0]) if names else None
    return None


def _signature(args: tuple, kwargs: dict) -> tuple:
    leaves, spec = tree_flatten((args, kwargs))
    return (str(spec), *((tuple(v.shape), v.dtype, v.stride()) if isinstance(v, torch.Tensor)
                         else repr(v) for v in leaves))


class _Recorder(TorchFunctionMode):
    def __init__(self, namespaces: set[str], model_file: Path, into: Harvested) -> None:
        super().__init__()
        self.namespaces, self.model_file, self.into = namespaces, str(model_file), into

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = _overload(func)
        if op is not None and op._schema.name.split("::", 1)[0] in self.namespaces:
            name = op._schema.name
            qualname = name + "." + (op._overloadname or "default")
            key = (qualname, _signature(args, kwargs))
            have = self.into.samples.setdefault(qualname, [])
            if key not in self.into._keys and len(have) < MAX_PER_OP:
                self.into._keys.add(key)
                have.append(SampleInput(*clone_tensors((tuple(args), dict(kwargs)))))
                frames = [f for f in traceback.extract_stack() if f.filename == self.model_file]
                site = f"{Path(self.model_file).name}:{frames[-1].lineno}" if frames else \
                    Path(self.model_file).name
                sites = self.into.sites.setdefault(qualname, [])
                if site not in sites:
                    sites.append(site)
        return func(*args, **kwargs)


def harvest(model_path: str, shapes: list[int] | None, namespaces: set[str],
            device: str, dtype: torch.dtype, into: Harvested) -> None:
    """Run the model's eager step at each size and record the calls into `into`."""
    from aclcap.loading.model_file import instantiate_model, load_model_file, make_step_inputs

    spec = load_model_file(model_path)
    model = instantiate_model(spec, device, dtype)
    recorder = _Recorder(namespaces, spec.path.resolve(), into)
    for size in shapes or spec.shapes:
        args = make_step_inputs(spec, size, device, dtype)
        with torch.no_grad(), recorder:
            model(*args)
