"""check-meta --lint: find meta impls that use concrete sizes. `size()`, `numel()` or
`at::empty({...})` in a C++ Meta kernel, and `int(t.shape[i])`, `.item()` or `.tolist()` in
a Python fake, turn symbolic dims into constants and break dynamic-shape tracing
(vllm-ascend rewrote its meta kernels for this and added a pre-commit lint). A line with a
`symbolic-meta-ok:` comment giving a reason, or below one, is exempt. No existing linter
knows which functions are meta impls, so this one is written here: it finds the Meta
registrations, resolves the functions they name (and the helpers those call), and reports
only what those functions do. A meta impl is a Meta-keyed C++ kernel, a Python fake, or a
Python Meta kernel.

C++ is parsed with tree-sitter: a real C++ grammar, kept up on PyPI, that parses macros
tolerantly and needs no includes. The regex scan it replaces missed one-line
`TORCH_LIBRARY_IMPL` blocks and matched functions by bare name; libclang would need each
file's compile flags and a matching toolchain. Python is parsed with `ast`."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aclcap.errors import UsageError
from aclcap.lint_rules import HINTS
from aclcap.meta.lint_types import declared_types, on_a_list, takes_int_sizes
from aclcap.status import Finding

try:
    import tree_sitter_cpp
    from tree_sitter import Language, Node, Parser
except ImportError as error:  # a declared dependency: a broken install, not an option
    raise ImportError(
        "aclcap check-meta --lint parses C++ with tree-sitter, which is not importable "
        f"({error}); install aclcap's dependencies: pip install tree-sitter tree-sitter-cpp"
    ) from error

ESCAPE = "symbolic-meta-ok:"

_CPP_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".cu", ".h", ".hh", ".hpp", ".cuh"})
_CPP_METHODS = {"size": "size()", "sizes": "sizes()", "numel": "numel()", "item": ".item()"}
_FACTORIES = frozenset(f"{ns}::{fn}" for ns in ("at", "torch")
                       for fn in ("empty", "zeros", "ones", "full"))
_INT64 = frozenset({"int64_t", "std::int64_t"})
_CONTAINERS = {"vector": "std::vector<int64_t>", "SmallVector": "SmallVector<int64_t>"}
_PY_FAKES = frozenset({"register_fake", "_register_fake", "impl_abstract"})
_PARSER = Parser(Language(tree_sitter_cpp.language()))


@dataclass(frozen=True)
class _Unit:
    """One parsed C++ file (nodes keep its tree alive)."""

    path: Path
    root: Node
    lines: list[str]


@dataclass(frozen=True)
class _Block:
    """The braces of a `TORCH_LIBRARY_IMPL*(ns, Meta, lib)` block, by byte offset."""

    start: int
    end: int
    library: str


@dataclass(frozen=True)
class _Impl:
    """A meta impl found: a function definition or a lambda, and the scope names resolve in."""

    unit: _Unit
    node: Node
    scope: tuple[str, ...]


def _text(node: Node) -> str:
    return (node.text or b"").decode(errors="replace")


def _plain(text: str) -> str:
    """`ns :: fn<float>` -> `ns::fn`: a name without spaces or template arguments."""
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif not depth and not ch.isspace():
            out.append(ch)
    return "".join(out)


def _walk(node: Node) -> Iterator[Node]:
    """Every node under `node` in source order, without recursion (deep expressions)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _exempt(lines: list[str], line: int) -> bool:
    """The escape comment, with a reason, on the 1-based `line` or the one above it."""
    for text in lines[max(line - 2, 0):line]:
        at = text.find(ESCAPE)
        if at >= 0 and text[at + len(ESCAPE):].strip(" */#\t\r"):
            return True
    return False


def _scope(node: Node) -> tuple[str, ...]:
    """The named namespaces and classes around `node`, outermost first (anonymous ones
    add nothing, as in C++ lookup)."""
    names: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type in ("namespace_definition", "class_specifier", "struct_specifier"):
            name = parent.child_by_field_name("name")
            if name is not None:
                names[:0] = _plain(_text(name)).split("::")
        parent = parent.parent
    return tuple(names)


def _declared_name(definition: Node) -> str | None:
    """The name a function definition declares, as written (`fn`, `ns::fn`, `S::fn`)."""
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        inner = declarator.child_by_field_name("declarator")
        declarator = inner or (declarator.named_children or [None])[-1]
    if declarator is None:
        return None
    name = declarator.child_by_field_name("declarator")
    return None if name is None else _plain(_text(name))


def _qualified(definition: Node) -> tuple[str, ...]:
    name = _declared_name(definition) or ""
    return _scope(definition) + tuple(part for part in name.split("::") if part)


def _macro_args(leaves: list[Node], at: int) -> tuple[list[str], int] | None:
    """The comma-split arguments of a macro whose `(` is leaves[at], and the index past `)`."""
    if at >= len(leaves) or leaves[at].type != "(":
        return None
    args, current, depth = [], "", 0
    for i in range(at, len(leaves)):
        kind = leaves[i].type
        depth += {"(": 1, ")": -1}.get(kind, 0)
        if depth == 0:
            return [*args, current], i + 1
        if kind == "," and depth == 1:
            args, current = [*args, current], ""
        elif i > at:
            current += _text(leaves[i])
    return None


def _closing_brace(leaves: list[Node], at: int) -> int:
    depth = 0
    for i in range(at, len(leaves)):
        depth += {"{": 1, "}": -1}.get(leaves[i].type, 0)
        if depth == 0:
            return i
    return len(leaves) - 1


def _meta_blocks(unit: _Unit) -> list[_Block]:
    """`TORCH_LIBRARY_IMPL*(ns, Meta, lib) {...}` blocks, found on the token stream: tree-sitter
    reads a macro invocation before braces as a function definition, or as an error in odd
    contexts, but the tokens are the same either way. Any macro named TORCH_LIBRARY_IMPL...
    counts (project wrappers like TORCH_LIBRARY_IMPL_EXPAND(CONCAT(ns, suffix), Meta, ops))."""
    leaves = [n for n in _walk(unit.root)
              if not n.children and not n.is_missing and n.type != "comment"]
    blocks = []
    for i, leaf in enumerate(leaves):
        if not (leaf.type.endswith("identifier") and
                _text(leaf).startswith("TORCH_LIBRARY_IMPL")):
            continue
        parsed = _macro_args(leaves, i + 1)
        if parsed is None:
            continue
        args, brace = parsed
        if len(args) == 3 and args[1] == "Meta" and brace < len(leaves) \
                and leaves[brace].type == "{":
            end = leaves[_closing_brace(leaves, brace)]
            blocks.append(_Block(leaves[brace].start_byte, end.end_byte, args[2]))
    return blocks


def _dispatch_key(node: Node) -> str | None:
    """`c10::DispatchKey::Meta`, `c10::DeviceType::Meta` or `c10::kMeta` -> "Meta"."""
    parts = _plain(_text(node)).split("::")
    if len(parts) > 1 and parts[-2] in ("DispatchKey", "DeviceType"):
        return parts[-1]
    if parts[-1][:1] == "k" and parts[-1][1:2].isupper() \
            and (len(parts) == 1 or parts[-2] in ("c10", "at", "torch")):
        return parts[-1][1:]
    return None


def _is_dispatch(call: Node) -> bool:
    """`torch::dispatch(key, fn)`, which overrides the key of the block around it."""
    function = call.child_by_field_name("function")
    return function is not None and _plain(_text(function)).split("::")[-1] == "dispatch"


def _args(call: Node) -> list[Node]:
    arguments = call.child_by_field_name("arguments")
    return [] if arguments is None else [a for a in arguments.named_children
                                         if a.type != "comment"]


def _fn_refs(node: Node) -> Iterator[Node]:
    """The lambdas and function names in a kernel argument: `fn`, `&ns::fn`, `TORCH_FN(fn)`,
    `fn<float>`, casts. A nested torch::dispatch is left to `_registrations`, which reads
    its own key."""
    if node.type in ("lambda_expression", "identifier", "qualified_identifier",
                     "template_function"):
        yield node
        return
    if node.type == "call_expression":
        if _is_dispatch(node):
            return
        children: Iterable[Node] = _args(node)
    else:
        children = node.named_children
    for child in children:
        yield from _fn_refs(child)


def _receiver(node: Node) -> str:
    """The variable a chain like `lib.impl(...).impl(...)` starts from."""
    while node.type in ("call_expression", "field_expression"):
        inner = node.child_by_field_name(
            "function" if node.type == "call_expression" else "argument")
        if inner is None:
            break
        node = inner
    return _text(node)


def _meta_kernels(call: Node, blocks: list[_Block]) -> list[Node]:
    """The kernel arguments `call` registers for the Meta key, if any: `lib.impl(name, fn)`
    in a Meta block, `x.impl(name, DispatchKey::Meta, fn)` and
    `torch::dispatch(DispatchKey::Meta, fn)` anywhere."""
    args = _args(call)
    if _is_dispatch(call):
        return args[1:] if args and _dispatch_key(args[0]) == "Meta" else []
    function = call.child_by_field_name("function")
    field = function.child_by_field_name("field") if function is not None else None
    if function is None or function.type != "field_expression" or field is None \
            or _text(field) != "impl":
        return []
    kernels = [a for a in args[1:] if _dispatch_key(a) is None]
    keys = [key for a in args[1:] if (key := _dispatch_key(a)) is not None]
    if keys:
        return kernels if keys[0] == "Meta" else []
    library = _receiver(function)
    in_block = any(b.start <= call.start_byte < b.end and b.library == library for b in blocks)
    return kernels if in_block else []


def _registrations(unit: _Unit) -> Iterator[tuple[Node, tuple[str, ...]]]:
    """Each lambda or function name registered for Meta in `unit`, with its scope."""
    blocks = _meta_blocks(unit)
    for node in _walk(unit.root):
        if node.type == "call_expression":
            for kernel in _meta_kernels(node, blocks):
                for ref in _fn_refs(kernel):
                    yield ref, _scope(ref)


class _Definitions:
    """Every C++ function definition in the sources, by qualified and by bare name."""

    def __init__(self, units: list[_Unit]) -> None:
        self.qualified: dict[str, list[_Impl]] = {}
        self.bare: dict[str, list[_Impl]] = {}
        for unit in units:
            for node in _walk(unit.root):
                if node.type == "function_definition" and (name := _qualified(node)):
                    impl = _Impl(unit, node, name[:-1])
                    self.qualified.setdefault("::".join(name), []).append(impl)
                    self.bare.setdefault(name[-1], []).append(impl)

    def resolve(self, name: str, scope: tuple[str, ...], *, bare: bool) -> list[_Impl]:
        """C++ lookup of `name` from `scope`: the innermost enclosing namespace first. With
        `bare`, fall back to every function of that unqualified name (a `using namespace`)."""
        if name.startswith("::"):
            return self.qualified.get(name[2:], [])
        for depth in range(len(scope), -1, -1):
            found = self.qualified.get("::".join((*scope[:depth], name)))
            if found:
                return found
        return self.bare.get(name.split("::")[-1], []) if bare else []


def _callees(impl: _Impl, definitions: _Definitions) -> Iterator[_Impl]:
    """The functions defined in the sources that `impl` calls by name: helpers run while
    tracing too. Unqualified-name fallback is off here: a meta impl calling at::rms_norm is
    not calling the project's own rms_norm kernel."""
    for node in _walk(impl.node):
        function = node.child_by_field_name("function") if node.type == "call_expression" \
            else None
        if function is not None and function.type in ("identifier", "qualified_identifier",
                                                      "template_function"):
            yield from definitions.resolve(_plain(_text(function)), impl.scope, bare=False)


def _cpp_impls(units: list[_Unit], definitions: _Definitions) -> list[_Impl]:
    """The meta impls of all `units`, registrations resolved across files, then the
    helpers they call, transitively."""
    todo: list[_Impl] = []
    for unit in units:
        for ref, scope in _registrations(unit):
            if ref.type == "lambda_expression":
                todo.append(_Impl(unit, ref, scope))
            else:
                todo += definitions.resolve(_plain(_text(ref)), scope, bare=True)
    seen: dict[tuple[Path, int], _Impl] = {}
    while todo:
        impl = todo.pop()
        key = (impl.unit.path, impl.node.start_byte)
        if key not in seen:
            seen[key] = impl
            todo += _callees(impl, definitions)
    return list(seen.values())


def _cpp_rule(node: Node) -> str | None:
    """The rule a call or template type breaks, if any."""
    if node.type == "template_type":
        name = node.child_by_field_name("name")
        arguments = node.child_by_field_name("arguments")
        first = arguments.named_children[:1] if arguments is not None else []
        if name is not None and first and _plain(_text(first[0])) in _INT64:
            return _CONTAINERS.get(_text(name))
        return None
    function = node.child_by_field_name("function") if node.type == "call_expression" \
        else None
    if function is None:
        return None
    if function.type == "field_expression":
        field = function.child_by_field_name("field")
        name = _plain(_text(field)) if field is not None else ""
        if name in _CPP_METHODS:
            return _CPP_METHODS[name]
    else:
        name = _plain(_text(function)).removeprefix("::")
    args = _args(node)
    if not args or args[0].type != "initializer_list":
        return None
    if name.endswith("empty_symint"):
        return "empty_symint({...})"
    return "at::empty({...})" if name in _FACTORIES else None


def _has_int_overload(call: Node, impl: _Impl, definitions: _Definitions) -> bool:
    """Whether the function `call` names has an int64_t-sizes overload in the sources: ATen's
    and torch's `*_symint` factories take SymInt sizes only, where a braced list is safe."""
    function = call.child_by_field_name("function")
    if function is None or function.type == "field_expression":  # a Tensor method
        return False
    name = _plain(_text(function))
    found = definitions.resolve(name, impl.scope, bare="::" not in name)
    return any(takes_int_sizes(d.node) for d in found)


def _lint_cpp(impl: _Impl, definitions: _Definitions) -> Iterator[Finding]:
    lines = impl.unit.lines
    nodes = list(_walk(impl.node))
    types = declared_types(nodes)
    for node in nodes:
        rule = _cpp_rule(node)
        line = node.start_point[0] + 1
        if rule in _CPP_METHODS.values() and on_a_list(node, types):
            continue  # a list's length (IntArrayRef, std::vector, ...), not a tensor's dim
        if rule == "empty_symint({...})" and not _has_int_overload(node, impl, definitions):
            continue  # no int64_t overload for the braced list to pick
        if rule and not _exempt(lines, line):
            yield Finding(HINTS[rule], file=str(impl.unit.path), line=line, rule=rule,
                          code=lines[line - 1].strip(), column=node.start_point[1] + 1)


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _names_meta(node: ast.expr) -> bool:
    """"Meta", or a list of dispatch keys holding it."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return any(_names_meta(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value == "Meta"


def _registers_meta(node: ast.expr) -> bool:
    """A call that registers a fake or a Meta kernel: register_fake(...), impl_abstract(...),
    lib._register_fake(...), torch.library.impl(..., "Meta"), lib.impl(op, fn, "Meta")."""
    if not isinstance(node, ast.Call):
        return False
    name = _last_name(node.func)
    return name in _PY_FAKES or (
        name == "impl" and any(_names_meta(a) for a in [*node.args,
                                                         *(k.value for k in node.keywords)]))


def _python_impls(tree: ast.Module) -> list[ast.AST]:
    """Fakes and Meta kernels: decorated functions (`@register_fake(op)`, `@op.register_fake`,
    `@impl_abstract(op)`, `@torch.library.impl(lib, op, "Meta")`), functions or lambdas
    passed to a registering call, directly or curried (`register_fake(op)(fn)`), and the
    file's own functions those call."""
    defs: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, []).append(node)
    todo: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _registers_meta(d) or _last_name(d) in _PY_FAKES for d in node.decorator_list):
            todo.append(node)
        elif isinstance(node, ast.Call) and (_registers_meta(node) or
                                             _registers_meta(node.func)):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Lambda):
                    todo.append(arg)
                elif isinstance(arg, ast.Name):
                    todo += defs.get(arg.id, [])
    seen: dict[int, ast.AST] = {}
    while todo:
        impl = todo.pop()
        if id(impl) not in seen:
            seen[id(impl)] = impl
            todo += [d for n in ast.walk(impl)
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     for d in defs.get(n.func.id, [])]
    return list(seen.values())


def _reads_size(node: ast.expr) -> bool:
    """`t.shape...`, `t.size(...)` or `t.numel()` somewhere in `node`."""
    return any((isinstance(n, ast.Attribute) and n.attr == "shape") or
               (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("size", "numel")) for n in ast.walk(node))


def _python_rule(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "tolist") \
            and not node.args:
        return f".{node.func.attr}()"
    if isinstance(node.func, ast.Name) and node.func.id == "int" and node.args \
            and _reads_size(node.args[0]):
        return "int(size)"
    return None


def _lint_python(path: Path) -> Iterator[Finding]:
    text = path.read_text(errors="replace")
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as error:  # a fake in it would go unlinted: never call that clean
        raise UsageError(f"{path}:{error.lineno}: cannot parse this Python file "
                         f"({error.msg}), so its fakes were not linted") from error
    lines = text.split("\n")
    for impl in _python_impls(tree):
        for node in ast.walk(impl):
            rule = _python_rule(node)
            if rule and not _exempt(lines, node.lineno):
                code = lines[node.lineno - 1].strip()
                yield Finding(HINTS[rule], file=str(path), line=node.lineno, rule=rule,
                              code=code, column=node.col_offset + 1)


def _parse_cpp(path: Path) -> _Unit:
    source = path.read_bytes()
    lines = source.decode(errors="replace").split("\n")
    return _Unit(path, _PARSER.parse(source).root_node, lines)


def _sources(paths: list[Path]) -> list[Path]:
    """The C++ and Python files under `paths`; build outputs and hidden folders (.venv,
    .git) are skipped. A missing path is an error: a typo must not lint nothing."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*")
                            if (p.suffix in _CPP_SUFFIXES or p.suffix == ".py") and p.is_file()
                            and not any(part == "build" or part.startswith(".")
                                        for part in p.relative_to(path).parts))
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return files


def lint(paths: list[Path]) -> list[Finding]:
    """Every concrete-size use in the meta impls under `paths`, sorted by file and line
    (one finding per rule and line). A Python file that does not parse is a UsageError."""
    files = _sources(paths)
    units = [_parse_cpp(f) for f in files if f.suffix in _CPP_SUFFIXES]
    definitions = _Definitions(units)
    findings = [f for impl in _cpp_impls(units, definitions) for f in _lint_cpp(impl, definitions)]
    findings += [f for path in files if path.suffix == ".py" for f in _lint_python(path)]
    unique = {(f.file, f.line, f.rule): f for f in findings}
    return sorted(unique.values(), key=lambda f: (f.file, f.line, f.column))
