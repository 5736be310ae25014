"""One record of a real call of an op: what went in, what came out, what it wrote and what
it aliased. Harvesting, capture's fake cross-check and meta synthesis all read calls through
it, so "a call" means the same thing everywhere (as torch's frozen OpProfile does for
draft_export, which keeps rank and dtype only: synthesis needs every size and stride).

`ObservedCall` is plain data (JSON-able, it crosses the worker pipe); `RecordedCall` pairs
it with the cloned arguments and outputs for the checks that rerun the call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from aclcap._compat import OpOverload
from aclcap._tensors import raw_bytes
from aclcap.meta.guarded import FILL, Guards, exact_copies
from aclcap.meta.sample_inputs import SampleInput

BUILD, STEP, DECLARED, VARIATION = "build", "step", "declared", "variation"


@dataclass(frozen=True)
class TensorFacts:
    """Metadata of one tensor; `aliases` names the input argument whose storage an output
    shares, `is_input` says the output is that input itself (same view)."""

    shape: tuple[int, ...]
    dtype: str  # "float32": str(torch.float32) without the "torch." prefix
    strides: tuple[int, ...]
    storage_offset: int
    aliases: str | None = None
    is_input: bool = False

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class ArgFacts:
    """One schema argument as called: a tensor's facts, or a non-tensor value as JSON-able
    data (ints, floats, bools, lists, None; a dtype as its name)."""

    name: str
    tensor: TensorFacts | None = None
    tensors: tuple[TensorFacts, ...] | None = None  # Tensor[] arguments
    value: Any = None


@dataclass(frozen=True)
class ObservedCall:
    """One real call of `op` (`ns::name.overload`). `outputs` is None where only the inputs
    were recorded; an output that is None (an optional result) is None in the tuple."""

    op: str
    args: tuple[ArgFacts, ...]
    outputs: tuple[TensorFacts | None, ...] | None = None
    written: tuple[str, ...] = ()  # argument names whose bytes changed, byte-exact
    site: str = ""  # "model.py:33", where known
    phase: str = STEP  # BUILD, STEP, DECLARED or VARIATION

    def key(self) -> tuple:
        """The one dedup rule: op, and per argument its shape, dtype and strides or value."""
        return (self.op, *((a.name, a.tensor.shape, a.tensor.dtype, a.tensor.strides)
                           if a.tensor else (a.name, repr(a.tensors or a.value))
                           for a in self.args))

    def arg(self, name: str) -> ArgFacts:
        return next(a for a in self.args if a.name == name)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ObservedCall:
        def facts(t: dict | None) -> TensorFacts | None:
            return None if t is None else TensorFacts(
                tuple(t["shape"]), t["dtype"], tuple(t["strides"]), t["storage_offset"],
                t.get("aliases"), t.get("is_input", False))

        args = tuple(ArgFacts(a["name"], facts(a["tensor"]),
                              None if a["tensors"] is None else tuple(map(facts, a["tensors"])),
                              a["value"]) for a in d["args"])
        outputs = None if d["outputs"] is None else tuple(map(facts, d["outputs"]))
        return cls(d["op"], args, outputs, tuple(d["written"]), d["site"], d["phase"])


@dataclass
class RecordedCall:
    """An observed call with its cloned inputs (before the call) and outputs; `after` holds
    the inputs as the call left them where they are copies (`observe`), `step_size` the model
    step's size where a recorder ran over several."""

    call: ObservedCall
    sample: SampleInput
    outputs: Any = None
    step_size: int | None = None
    after: SampleInput | None = None
    overrun: str | None = None  # `observe`: the input whose guard band the call wrote


def qualname(op: OpOverload) -> str:
    return f"{op._schema.name}.{op._overloadname or 'default'}"


def bind(op: OpOverload, args: tuple, kwargs: dict) -> list[tuple[Any, Any]]:
    """(schema argument, value) pairs, positional and keyword alike, in schema order; an
    argument left to its default has that default, so calls that pass it and calls that do
    not are read alike (`out` given in one sample and not in another)."""
    bound = []
    for i, arg in enumerate(op._schema.arguments):
        if i < len(args):
            bound.append((arg, args[i]))
        elif arg.name in kwargs:
            bound.append((arg, kwargs[arg.name]))
        elif arg.has_default_value():
            bound.append((arg, arg.default_value))
    return bound


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor_facts(t: torch.Tensor, aliases: str | None = None, is_input: bool = False
                 ) -> TensorFacts:
    return TensorFacts(tuple(t.shape), _dtype_name(t.dtype), tuple(t.stride()),
                       t.storage_offset(), aliases, is_input)


def _plain(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return _dtype_name(value)
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def arg_facts(arg: Any, value: Any) -> ArgFacts:
    if isinstance(value, torch.Tensor):
        return ArgFacts(arg.name, tensor=tensor_facts(value))
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, torch.Tensor) for v in value):
        return ArgFacts(arg.name, tensors=tuple(tensor_facts(v) for v in value))
    kind = getattr(arg, "real_type", None)
    if isinstance(kind, torch.OptionalType):
        kind = kind.getElementType()
    if isinstance(value, int) and not isinstance(value, bool) and \
            isinstance(kind, torch.FloatType):
        # what the kernel receives: a Python wrapper's `p: float = 1` passes an int, which
        # must never give an output size (torch-cluster's random_walk was `walk_length + p`)
        value = float(value)
    return ArgFacts(arg.name, value=_plain(value))


def named_tensors(bound: list[tuple[Any, Any]], indexed: bool = False
                  ) -> list[tuple[str, torch.Tensor]]:
    """Every tensor of a bound call with its argument's name; inside a Tensor[] the name
    alone (what a call writes is an argument) or, `indexed`, `xs[1]` (what a reason names)."""
    named = []
    for arg, value in bound:
        if isinstance(value, torch.Tensor):
            named.append((arg.name, value))
        elif isinstance(value, (list, tuple)):
            named += [(f"{arg.name}[{i}]" if indexed else arg.name, v)
                      for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return named


def _storage_ptr(t: torch.Tensor) -> int | None:
    """Where a tensor's storage lives; None for one without real storage (a tensor subclass
    such as a functional collective's pending output, under --nproc)."""
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:
        return None


def _output_facts(out: torch.Tensor, inputs: list[tuple[str, torch.Tensor]]) -> TensorFacts:
    storage = _storage_ptr(out)
    for name, t in inputs:
        if storage is not None and _storage_ptr(t) == storage and out.numel() and t.numel():
            same = (out.shape, out.stride(), out.storage_offset(), out.dtype) == (
                t.shape, t.stride(), t.storage_offset(), t.dtype)
            return tensor_facts(out, aliases=name, is_input=same)
    return tensor_facts(out)


def observed_inputs(op: OpOverload, args: tuple, kwargs: dict, *, site: str = "",
                    phase: str = STEP) -> ObservedCall:
    """The call's inputs only (outputs None): enough for `key()`, before deciding to run."""
    return ObservedCall(qualname(op), tuple(arg_facts(a, v) for a, v in bind(op, args, kwargs)),
                        None, (), site, phase)


def record(op: OpOverload, call: Callable[..., Any], args: tuple, kwargs: dict, *,
           site: str = "", phase: str = STEP) -> RecordedCall:
    """Run `call(*args, **kwargs)` on the caller's own tensors (it may write them, as the
    model's step expects) and record it: inputs cloned before, outputs, aliasing, and which
    arguments it wrote (compared byte for byte with the clones, never by a mean).
    Raises what the call raises: a rejected input is no observation."""
    before = SampleInput(*exact_copies((tuple(args), dict(kwargs))))
    inputs = named_tensors(bind(op, args, kwargs))
    out = call(*args, **kwargs)
    written: list[str] = []
    for (name, old), (_, t) in zip(named_tensors(bind(op, before.args, before.kwargs)), inputs,
                                   strict=True):
        if name not in written and not torch.equal(raw_bytes(old), raw_bytes(t)):
            written.append(name)
    returns = op._schema.returns
    leaves = () if not returns else tuple(out) if len(returns) > 1 else (out,)
    outputs = tuple(_output_facts(o, inputs) if isinstance(o, torch.Tensor) else None
                    for o in leaves)
    observed = replace(observed_inputs(op, before.args, before.kwargs, site=site, phase=phase),
                       outputs=outputs, written=tuple(written))
    return RecordedCall(observed, before, out)


def observe(op: OpOverload, args: tuple, kwargs: dict | None = None, *,
            site: str = "", phase: str = STEP,
            setup: Callable[[], None] | None = None, fill: int = FILL) -> RecordedCall:
    """Run the real kernel on copies of the arguments, layouts kept and each in front of a
    guard band (guarded.py), and record the whole call (`record`) with the input it wrote
    past the end of, if any; the caller's tensors stay as they were. `setup` puts back the
    state the call reads outside its arguments first, and stays with the record
    (SampleInput.setup). `fill`: the bands' byte."""
    guards = Guards(fill=fill)
    run_args, run_kwargs = guards.copies((tuple(args), dict(kwargs or {})))
    if setup is not None:
        setup()
    recorded = record(op, op, run_args, run_kwargs, site=site, phase=phase)
    recorded.sample.setup = setup
    recorded.after = SampleInput(run_args, run_kwargs, setup)
    recorded.overrun = guards.overrun(named_tensors(bind(op, run_args, run_kwargs),
                                                    indexed=True))
    return recorded
