"""Write a register_fake stub per op that lacks a meta impl, generated from its schema.

torch's own generator, `torch._library.fake_profile` (behind `torch.export.draft_export`),
writes no source and makes every output dim a fresh unbacked size, which brings
data-dependent guards into the graph; a fake to start from needs source with sizes kept
symbolic, so it is written here. A stub is exact where the schema decides the answer (an op
returning () only mutates its inputs; an output marked as the mutated input, `Tensor(a!)`,
is that input); a view of an input (`Tensor(a)`) is `x.view(...)` with a TODO for its
shape, which the schema does not give; elsewhere it guesses `empty_like` of the first
tensor argument and leaves a TODO naming the output.
"""

from __future__ import annotations

import keyword

import torch

from aclcap.meta.registry import OpInfo

HEADER = '''"""register_fake stubs written by `aclcap check-meta --emit-stubs` from the op schemas.

Load with `aclcap check-meta --lib <your library> --lib {path}`. Resolve each TODO: a fake
must compute every output's shape and dtype from the inputs' shapes alone, with sizes kept
symbolic (no int(), .item() or .tolist()).
"""

import torch
'''


def _pyname(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def _params(schema: torch._C.FunctionSchema) -> str:
    parts, kwarg_only = [], False
    for arg in schema.arguments:
        if arg.kwarg_only and not kwarg_only:
            parts.append("*")
            kwarg_only = True
        parts.append(_pyname(arg.name))
    return ", ".join(parts)


def _alias_sets(alias_info) -> set[str]:
    return set(alias_info.before_set) if alias_info is not None else set()


def _return_expr(schema: torch._C.FunctionSchema, index: int, ret, todos: list[str]) -> str:
    aliases = _alias_sets(ret.alias_info)
    label = ret.name or f"output {index}"
    for arg in schema.arguments:
        if aliases and aliases & _alias_sets(arg.alias_info):
            if ret.alias_info.is_write:
                return _pyname(arg.name)  # exact: the schema says this output is that input
            # A view of the input: same storage, a shape the schema does not say.
            todos.append(f"{label} is a view of {arg.name}: give the view's shape (e.g. "
                         f"{_pyname(arg.name)}.view(-1) or a slice), in sym sizes")
            return f"{_pyname(arg.name)}.view({_pyname(arg.name)}.shape)"
    type_str = str(ret.type)
    first_tensor = next((a for a in schema.arguments if str(a.type) == "Tensor"), None)
    if type_str == "Tensor" and first_tensor is not None:
        todos.append(f"{label} is guessed as empty_like({first_tensor.name}): give its real "
                     "shape and dtype")
        return f"torch.empty_like({_pyname(first_tensor.name)})"
    todos.append(f"{label} ({type_str}) cannot be guessed from the schema: compute it")
    return f'NotImplementedError("TODO: {label}")'


def stub_source(op: OpInfo) -> str:
    """The register_fake stub for one op, as Python source."""
    schema = op.overload()._schema
    fn = "_fake_" + op.qualname.split("::", 1)[1].replace(".", "_")
    todos: list[str] = []
    returns = [_return_expr(schema, i, r, todos) for i, r in enumerate(schema.returns)]
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
    """Write stubs for the ops whose meta is missing or only torch-generated; their names."""
    chosen = [o for o in ops if o.meta_kind in ("missing", "trivial")]
    text = HEADER.format(path=path) + "".join("\n\n" + stub_source(o) for o in chosen)
    with open(path, "w") as f:
        f.write(text)
    return [o.qualname for o in chosen]
