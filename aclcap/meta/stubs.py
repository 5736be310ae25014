"""Write a register_fake stub per op that lacks a meta impl, generated from its schema.

torch's own generator, `torch._library.fake_profile` (behind `torch.export.draft_export`),
writes no source and makes every output dim a fresh unbacked size, which brings
data-dependent guards into the graph; a fake to start from needs source with sizes kept
symbolic, so it is written here. A stub is exact where the schema decides the answer (an op
returning () only mutates its inputs; an output marked as the mutated input, `Tensor(a!)`,
is that input). A view of an input (`Tensor(a)`) is `x.view(...)` with its shape read off
the op's samples, called exact only when aclcap's fake-vs-real comparison passes on every
sample, else left with a TODO. Elsewhere a stub guesses `empty_like` of the first tensor
argument and leaves a TODO naming the output.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

import torch

from aclcap._compat import FunctionSchema, fake_tensor_mode, tree_map_only
from aclcap.meta.fakecheck import compare_outputs
from aclcap.meta.registry import OpInfo, generated_fake
from aclcap.meta.sample_inputs import SampleInput, samples_for

# Real calls of an op: its sample inputs and what the kernel returned for each.
Calls = list[tuple[SampleInput, Any]]

HEADER = '''"""register_fake stubs written by `aclcap check-meta --emit-stubs` from the op schemas.

Load with `aclcap check-meta --lib <your library> --lib {path}`. Resolve each TODO: a fake
must compute every output's shape and dtype from the inputs' shapes alone, with sizes kept
symbolic (no int(), .item() or .tolist()).
"""

import torch
'''


def _pyname(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def _params(schema: FunctionSchema) -> str:
    parts, kwarg_only = [], False
    for arg in schema.arguments:
        if arg.kwarg_only and not kwarg_only:
            parts.append("*")
            kwarg_only = True
        parts.append(_pyname(arg.name))
    return ", ".join(parts)


def _alias_sets(alias_info) -> set[str]:
    return set(alias_info.before_set) if alias_info is not None else set()


def _view_shapes(name: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...]
                 ) -> list[str]:
    """Candidate `view` arguments for an output of `out_shape` viewing an input of
    `in_shape`: the same shape, flat, each dim as the input dim of equal size (else the
    constant), and each of those with one dim left to -1."""
    dims = [next((f"{name}.shape[{i}]" for i, s in enumerate(in_shape) if s == size), str(size))
            for size in out_shape]
    found = [f"{name}.shape", "-1", ", ".join(dims)]
    found += [", ".join([*dims[:j], "-1", *dims[j + 1:]]) for j in range(len(dims))]
    return list(dict.fromkeys(found))


def _passes(view: Callable[[torch.Tensor], torch.Tensor], position: int, index: int,
            calls: Calls) -> bool:
    """aclcap's fake-vs-real comparison (shape, dtype, strides, offset) of `view` applied
    to fake copies of each sample's input against output `index` of the real kernel."""
    for sample, real in calls:
        real_out = real[index] if isinstance(real, (tuple, list)) else real
        try:
            with fake_tensor_mode() as mode:
                args = tree_map_only(torch.Tensor, mode.from_tensor, sample.args)
                fake = view(args[position])
        except Exception:
            return False
        if compare_outputs("stub", fake, real_out):
            return False
    return True


def _view_expr(schema: FunctionSchema, arg_index: int, index: int, calls: Calls
               ) -> str | None:
    """`x.view(...)` that reproduces the real view on every sample, or None."""
    name = _pyname(schema.arguments[arg_index].name)
    sample, real = calls[0]
    real_out = real[index] if isinstance(real, (tuple, list)) else real
    source = sample.args[arg_index] if arg_index < len(sample.args) else None
    if not isinstance(source, torch.Tensor) or not isinstance(real_out, torch.Tensor):
        return None
    for shape in _view_shapes(name, tuple(source.shape), tuple(real_out.shape)):
        expr = f"{name}.view({shape})"
        # The candidate is source this module wrote, evaluated to check it before it is
        # written out.
        view = eval(f"lambda {name}: {expr}")
        if _passes(view, arg_index, index, calls):
            return expr
    return None


def _return_expr(schema: FunctionSchema, index: int, ret, todos: list[str],
                 calls: Calls) -> str:
    aliases = _alias_sets(ret.alias_info)
    label = ret.name or f"output {index}"
    for position, arg in enumerate(schema.arguments):
        if aliases and aliases & _alias_sets(arg.alias_info):
            if ret.alias_info.is_write:
                return _pyname(arg.name)  # exact: the schema says this output is that input
            # A view of the input: same storage, a shape the schema does not say.
            if calls and (expr := _view_expr(schema, position, index, calls)):
                return expr
            todos.append(f"{label} is a view of {arg.name}: give the view's shape"
                         + (" (none of x.view(...) matched the samples)" if calls else
                            " (no samples to read it from)"))
            return f"{_pyname(arg.name)}.view({_pyname(arg.name)}.shape)"
    type_str = str(ret.type)
    first_tensor = next((a for a in schema.arguments if str(a.type) == "Tensor"), None)
    if type_str == "Tensor" and first_tensor is not None:
        todos.append(f"{label} is guessed as empty_like({first_tensor.name}): give its real "
                     "shape and dtype")
        return f"torch.empty_like({_pyname(first_tensor.name)})"
    todos.append(f"{label} ({type_str}) cannot be guessed from the schema: compute it")
    return f'NotImplementedError("TODO: {label}")'


def sample_calls(op: OpInfo, device: str = "cpu", dtype: torch.dtype = torch.float32
                 ) -> Calls:
    """The op's declared samples run through its real kernel; none where it has no samples
    or its kernel fails on them (the stub then keeps its TODO)."""
    make = samples_for(op.qualname)
    if make is None:
        return []
    try:
        return [(s, op.overload()(*s.args, **s.kwargs)) for s in make(device, dtype)]
    except Exception:
        return []


def _views_an_input(schema: FunctionSchema) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def stub_source(op: OpInfo, calls: Calls | None = None) -> str:
    """The register_fake stub for one op, as Python source; `calls` (real calls of the op)
    decide the shape of an output that views an input."""
    schema = op.overload()._schema
    fn = "_fake_" + op.qualname.split("::", 1)[1].replace(".", "_")
    todos: list[str] = []
    returns = [_return_expr(schema, i, r, todos, calls or [])
               for i, r in enumerate(schema.returns)]
    if not returns:
        body = ["    return None  # exact: the op returns () and only mutates its inputs"]
    elif any(r.startswith("NotImplementedError") for r in returns):
        body = [f"    raise {next(r for r in returns if r.startswith('NotImplementedError'))}"]
    else:
        body = [f"    return {returns[0] if len(returns) == 1 else '(' + ', '.join(returns) + ')'}"]
    lines = [f"# {op.schema}", f'@torch.library.register_fake("{op.dispatcher_name}")',
             f"def {fn}({_params(schema)}):"]
    lines += [f"    # TODO: {t}" for t in todos] + body
    return "\n".join(lines) + "\n"


def emit_stubs(ops: list[OpInfo], path: str) -> list[str]:
    """Write stubs for the ops whose meta is missing or only torch-generated; their names.
    None for an op torch makes the fake of from its tag: a stub would replace torch's."""
    chosen = [o for o in ops if o.meta_kind in ("missing", "trivial")
              and not generated_fake(o.overload())]
    text = HEADER.format(path=path) + "".join(
        "\n\n" + stub_source(o, sample_calls(o) if _views_an_input(o.overload()._schema)
                             else None) for o in chosen)
    with open(path, "w") as f:
        f.write(text)
    return [o.qualname for o in chosen]
