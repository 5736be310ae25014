"""torch.export of one model step with every size dim dynamic (shared by the AOTI backend
and --bisect, so both see the same graph), and the split into size ranges for a step that
branches on its size (one exported program per range of sizes its guards allow)."""

from __future__ import annotations

import contextlib
import io
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from aclcap._compat import OpOverload, export_guards, int_oo, takes_modulo
from aclcap._tensors import clone_tensors
from aclcap.errors import CaptureError, first_line
from aclcap.size_dims import SizeDim, sizes_within

# What a GraphModule already has: unlifting the exported state onto one (AOTInductor, and
# ExportedProgram.module()) fails on a parameter or buffer of the same name with
# `KeyError: "attribute 'code' already exists"` (torch 2.13).
_GRAPH_MODULE = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())


def _taken(fqn: str) -> bool:
    return any(hasattr(_GRAPH_MODULE, part) for part in fqn.split("."))


def _safe_names(model: torch.nn.Module) -> dict[str, str]:
    """Each parameter and buffer of the model under a name a GraphModule never has
    (`state_0_proj_code` for `proj.code`) -> its own name."""
    return {f"state_{i}_{fqn.replace('.', '_')}": fqn for i, (fqn, _) in
            enumerate([*model.named_parameters(), *model.named_buffers()])}


class _SafeNames(torch.nn.Module):
    """The model with its parameters and buffers lifted under safe names (`_safe_names`):
    the step runs the model itself through torch.func.functional_call on them, so the graph
    is the same and so are the values. The model is kept off the module tree, so its own
    names are not exported too. The buffers named in `lifted` are no state of this module
    but trailing inputs of forward, in that order."""

    def __init__(self, model: torch.nn.Module, lifted: tuple[str, ...] = ()) -> None:
        super().__init__()
        object.__setattr__(self, "_model", model)
        self._lifted = lifted
        tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        self._fqns = {safe: fqn for safe, fqn in _safe_names(model).items()
                      if fqn not in lifted}
        for safe, fqn in self._fqns.items():
            if isinstance(tensors[fqn], torch.nn.Parameter):
                self.register_parameter(safe, tensors[fqn])
            else:
                self.register_buffer(safe, tensors[fqn])

    def forward(self, *args: Any) -> Any:
        count = len(args) - len(self._lifted)
        state = {fqn: getattr(self, safe) for safe, fqn in self._fqns.items()}
        state.update(zip(self._lifted, args[count:], strict=True))
        return torch.func.functional_call(self._model, state, args[:count])


def exportable(model: torch.nn.Module) -> torch.nn.Module:
    """The model, or where one of its parameters or buffers is named like a GraphModule
    attribute (`code`, `graph`, `meta`, ...) the model behind safe names (_SafeNames).
    Only then: every other model exports exactly as written, with its own state names."""
    names = [n for n, _ in [*model.named_parameters(), *model.named_buffers()]]
    return _SafeNames(model) if any(_taken(n) for n in names) else model


def _export(model: torch.nn.Module, args: tuple, dims: list[list[int]], dim: Any,
            lifted: tuple[str, ...] = ()) -> torch.export.ExportedProgram:
    """torch.export prints the partial graph to stderr when it fails; the caller reports
    the exception in one line, so that print is dropped. `lifted`: buffers the program
    takes as trailing inputs (`_export_state`)."""
    # A host value is a constant of the program (frozen, as a device graph freezes it): no
    # dim of it is dynamic, and a list needs one entry per item to match its structure.
    dynamic = tuple(({d: _derived(d, dim) for d in ds} or None) if isinstance(a, torch.Tensor) else
                    [None] * len(a) if isinstance(a, (list, tuple)) else None
                    for a, ds in zip(args, dims, strict=True)) if dim is not None else None
    module = _SafeNames(model, lifted) if lifted else exportable(model)
    if module is not model and dynamic is not None:
        # _SafeNames.forward(*args): the inputs are one tuple; a lifted buffer is static
        dynamic = ((*dynamic, *(None for _ in lifted)),)
    buffers = dict(model.named_buffers())
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
        return torch.export.export(module, clone_tensors(tuple(args)) + tuple(
            buffers[name].clone() for name in lifted), dynamic_shapes=dynamic)


def _derived(d: int, dim: Any) -> Any:
    """The export dim of a size dim: `dim` itself, or `scale * dim + offset` for an affine
    one (offsets: `tokens + 1`); a hint (Dim.AUTO) stands for every dim as it is."""
    if not isinstance(d, SizeDim) or d.is_size:
        return dim
    try:
        scaled = dim * d.scale if d.scale != 1 else dim
        return scaled + d.offset if d.offset else scaled
    except TypeError:  # Dim.AUTO: export finds the relation itself
        return dim


def export_step(model: torch.nn.Module, args: tuple, dims: list[list[int]]
                ) -> torch.export.ExportedProgram:
    """Export with one Dim (sizes 1 and up) for all size dims."""
    from torch.export import Dim  # torch.export and sympy: only where a step is exported

    return _export(model, args, dims, Dim("tokens", min=1))


def _is_view(node: Any) -> bool:
    """An op whose output aliases its first argument without writing it (`select`, `slice`,
    `chunk`), or a getitem of such an op's outputs."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.args):
        return False
    if node.target is operator.getitem:
        return True
    if not isinstance(node.target, OpOverload) or not node.target._schema.returns:
        return False
    alias = node.target._schema.returns[0].alias_info
    return alias is not None and not alias.is_write


def _base(node: Any) -> Any:
    """The tensor a chain of views is a view of."""
    while _is_view(node):
        node = node.args[0]
    return node


def _written_buffers(model: torch.nn.Module, program: torch.export.ExportedProgram
                     ) -> tuple[str, ...]:
    """The model's buffers the program writes in place (a KV cache the model owns), by
    their own names: every argument an op's schema marks written (`Tensor(a!)`), traced
    through views to its base. torch.export's graph keeps in-place ops: its signature names
    no buffer mutation before run_decompositions, which costs as much as the export."""
    buffers = program.graph_signature.inputs_to_buffers
    written = []
    for node in program.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        for i, arg in enumerate(node.target._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = node.kwargs.get(arg.name, node.args[i] if i < len(node.args) else None)
            base = _base(value)
            if isinstance(base, torch.fx.Node) and base.name in buffers:
                written.append(buffers[base.name])
    safe = _safe_names(model)
    return tuple(dict.fromkeys(safe.get(name, name) for name in written))


def _export_state(model: torch.nn.Module, args: tuple, dims: list[list[int]], dim: Any
                  ) -> tuple[torch.export.ExportedProgram, tuple[str, ...]]:
    """The program, and the buffers it takes as trailing inputs. A buffer the step writes
    is lifted (exported again with it as an input): AOTInductor bakes buffers into the
    artifact as its own constants, so the writes of a replay would land in the artifact's
    copy and the model's buffer, which eager reads and writes, would never see them. Lifted,
    the replay passes the model's own buffer and the artifact writes it in place."""
    program = _export(model, args, dims, dim)
    lifted = _written_buffers(model, program)
    return (_export(model, args, dims, dim, lifted), lifted) if lifted else (program, ())


@dataclass
class SizeRange:
    """Sizes lo..hi (hi None: unbounded) served by one exported program (None: read back
    from the AOTI cache's index, not exported in this run), which takes the model's buffers
    named in `lifted` after the step's inputs (`_export_state`). `example`: the inputs it
    was exported on, whose host values the program holds as constants."""

    lo: int
    hi: int | None
    program: torch.export.ExportedProgram | None
    lifted: tuple[str, ...] = ()
    example: tuple | None = None
    # Sizes within lo..hi whose guards the program fails (`s // 2 != 1`: not 2 nor 3)
    excluded: tuple[int, ...] = ()
    why: str = ""  # why the range is one size where the step allows more ("": it does not)

    def covers(self, size: int) -> bool:
        return self.lo <= size and (self.hi is None or size <= self.hi) and \
            size not in self.excluded

    def label(self) -> str:
        text = f"{self.lo}+" if self.hi is None else \
            str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"
        return text + (" where its guards hold" if self.excluded else "")


def _size_range(program: torch.export.ExportedProgram, example: tuple, dims: list[list[int]]
                ) -> tuple[int, int | None]:
    """The range of sizes the program accepts: over every size dim of every tensor input,
    the intersection of torch.export's range constraints (a static dim is its own range).
    Host values are constants of the program, with no placeholder of their own."""
    infinity = int_oo()
    user = set(program.graph_signature.user_inputs)
    nodes = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
    tensor_dims = [ds for a, ds in zip(example, dims, strict=True)
                   if isinstance(a, torch.Tensor)]
    lo, hi = 1, None
    for node, ds in zip(nodes, tensor_dims, strict=False):
        for d in ds:
            value = node.meta["val"].shape[d]
            if isinstance(value, int):
                r_lo, r_hi = value, value
            else:
                vr = program.range_constraints.get(value.node.expr)
                if vr is None:  # a dim derived from another one (offsets: tokens + 1)
                    continue
                r_lo, r_hi = int(vr.lower), None if vr.upper == infinity else int(vr.upper)
            r_lo, r_hi = sizes_within(d, r_lo, r_hi)
            lo = max(lo, r_lo)
            hi = r_hi if hi is None else hi if r_hi is None else min(hi, r_hi)
    return lo, hi


def is_size_guard(exc: Exception) -> bool:
    """torch.export refused one Dim over all sizes because the step guards on the size."""
    return "Constraints violated" in str(exc)


def export_ranges(model: torch.nn.Module, inputs: Callable[[int], tuple],
                  dims: list[list[int]], sizes: list[int], hosts: tuple[int, ...] = ()
                  ) -> list[SizeRange]:
    """One exported program for all sizes where the step allows it; else one per range of
    sizes its guards allow: export the largest size left with Dim.AUTO (which refines the
    range from the guards instead of failing), take the sizes that range covers, repeat.
    Raises CaptureError when even that fails."""
    from torch.export import Dim

    if any(dims[i] for i in hosts):  # a host list as long as the size
        return _per_size(model, inputs, dims, sizes)
    try:  # at a size >= 2: export specializes a dim whose example is 1
        example = inputs(max(max(sizes), 2))
        program, lifted = _export_state(model, example, dims, Dim("tokens", min=1))
    except Exception as exc:
        if not is_size_guard(exc):
            raise CaptureError(f"torch.export failed: {first_line(exc)}") from exc
    else:
        if (why := _static_instead(program, sizes)):
            return _per_size(model, inputs, dims, sizes, why)
        return [SizeRange(1, None, program, lifted, example)]
    ranges: list[SizeRange] = []
    left, why = sorted(sizes), ""
    while left:
        top = left[-1]
        example = inputs(max(top, 2))
        try:
            program, lifted = _export_state(model, example, dims, Dim.AUTO)
            if (why := _static_instead(program, left)):
                break  # the sizes left get a program each, below
            lo, hi = _size_range(program, example, dims)
            if lo == 2 and 1 in left:  # Dim.AUTO starts at 2 (0/1): try to take size 1 too
                with contextlib.suppress(Exception):
                    (program, lifted), lo = _export_state(
                        model, example, dims, Dim("tokens", min=1, max=hi)), 1
            excluded = _failing(model, program, inputs, sizes, lo, hi, lifted)
            if not (lo <= top and (hi is None or top <= hi)) or top in excluded:
                # size 1 alone, or a program whose own guards refuse the size it was
                # exported for (recurrent_gemma's loop over the tokens guards the size
                # equal to the example's, in a range that says [1, oo]): export static
                example = inputs(top)
                (program, lifted), lo, hi = _export_state(model, example, dims, None), top, top
                excluded = _failing(model, program, inputs, sizes, lo, hi, lifted)
        except Exception as exc:
            raise CaptureError(f"torch.export failed at size {top} even split by size "
                               f"range: {first_line(exc)}") from exc
        if top in excluded:  # never again: each turn must serve the largest size left
            raise CaptureError(f"torch.export's program for size {top} fails its own guards "
                               f"at size {top} on a fresh draw: the step's shapes follow its "
                               "values")
        ranges.append(SizeRange(lo, hi, program, lifted, example, excluded))
        left = [s for s in left if not ranges[-1].covers(s)]
    if left:
        return sorted(ranges[::-1] + _per_size(model, inputs, dims, left, why),
                      key=lambda r: r.lo)
    return ranges[::-1]


def _failing(model: torch.nn.Module, program: torch.export.ExportedProgram,
             inputs: Callable[[int], tuple], sizes: list[int], lo: int, hi: int | None,
             lifted: tuple[str, ...]) -> tuple[int, ...]:
    """The sizes within lo..hi whose guards `program` fails: a guard its range cannot say
    (`s // 2 != 1` leaves [2, oo]), which the artifact would not check, replaying the
    branch of another size (issue 50)."""
    hold = export_guards(program)
    if hold is None:
        return ()
    buffers = dict(model.named_buffers())
    state = tuple(buffers[name] for name in lifted)
    return tuple(s for s in sizes if lo <= s and (hi is None or s <= hi) and
                 not hold(tuple(inputs(s)) + state))


def _per_size(model: torch.nn.Module, inputs: Callable[[int], tuple], dims: list[list[int]],
              sizes: list[int], why: str = "") -> list[SizeRange]:
    """One static program per size: for a step with a host list as long as the size
    (`seq_lens`), each holds its own size's list as a constant, as a device graph captured
    at that size does, where one program over all sizes would hold one size's list for all;
    for a step whose shapes pad the size (`_static_instead`), each compiles in minutes
    less."""
    ranges = []
    for size in sorted(sizes):
        example = inputs(size)
        try:
            program, lifted = _export_state(model, example, dims, None)
        except Exception as exc:
            raise CaptureError(f"torch.export failed at size {size}: {first_line(exc)}") \
                from exc
        ranges.append(SizeRange(size, size, program, lifted, example, why=why))
    return ranges


# A program whose shapes take the size modulo a constant (a step that pads its tokens to
# whole chunks: Qwen3-Next's gated delta rule splits `(s + (64 - s % 64) % 64) // 64` chunks)
# costs Inductor's vectorized C++ codegen minutes of sympy in every kernel over a dynamic
# range: one such layer compiled in 358 s over sizes [2, oo] and in 52 s at one size
# (docs/measurements.md), so a static program per size is cheaper up to about 6 sizes;
# 4 keeps a margin, since both figures are single runs.
STATIC_SIZES_WHEN_PADDED = 4


def _static_instead(program: torch.export.ExportedProgram, sizes: list[int]) -> str:
    """Why the sizes get a static program each instead of `program` ("": they do not): its
    shapes take the size modulo a constant (a pad to whole chunks), and the sizes are few.
    A floor division alone (`x.chunk(2)`: `(s + 1) // 2`) compiles as fast as any shape."""
    if len(sizes) > STATIC_SIZES_WHEN_PADDED:
        return ""
    for node in program.graph.nodes:
        value = node.meta.get("val")
        for t in value if isinstance(value, (list, tuple)) else (value,):
            padded = next((d for d in getattr(t, "shape", ()) if isinstance(d, torch.SymInt)
                           and takes_modulo(d)), None)
            if padded is not None:
                return (f"a static program per size: the step's shapes pad the size "
                        f"({padded.node.expr} in {node.name}), which costs a dynamic "
                        "program's compile minutes more than a static one's")
    return ""
