"""Which receivers of `.size()`, `->size()` and `.numel()` in a C++ meta impl are lists, not
Tensors: `opt->size()` on a `c10::optional<at::IntArrayRef>` is a list's length, not a dim.

The lint knows only the declarations tree-sitter gives it inside the impl (parameters, locals,
`auto r = opt.value()`), not C++'s type system: a receiver it cannot type stays a finding."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

_NS = r"(?:(?:at|c10|std|torch)::)?"
_LIST_NAMES = re.compile(
    _NS + r"(?:IntArrayRef|SymIntArrayRef|TensorList|ITensorListRef|DimVector|SymDimVector|"
    r"SymIntVector|string|string_view)")
_LIST_TEMPLATES = re.compile(_NS + r"(?:ArrayRef|vector|List|SmallVector|array|IListRef|"
                             r"basic_string)<")
_OPTIONAL = re.compile(_NS + r"optional<(?P<inner>.*)>")
# Lists of int64_t sizes: an overload taking one can catch a bare braced list of ints.
_INT_SIZES = re.compile(_NS + r"(?:IntArrayRef|DimVector|(?:ArrayRef|vector|SmallVector|"
                        r"initializer_list|List)<(?:std::)?int64_t\b.*)")
# OptionalArrayRef's operator-> and value() give the ArrayRef it holds.
_OPTIONAL_REFS = {"OptionalIntArrayRef": "IntArrayRef",
                  "OptionalSymIntArrayRef": "SymIntArrayRef"}
# What a Tensor's (or an optional's) method returns, for `auto s = x.sizes()`.
_RETURNS = {"sizes": "IntArrayRef", "sym_sizes": "SymIntArrayRef",
            "strides": "IntArrayRef", "sym_strides": "SymIntArrayRef"}


def _normal(type_text: str) -> str:
    """`const c10::optional<at::IntArrayRef> &` -> `c10::optional<at::IntArrayRef>`."""
    text = re.sub(r"\b(?:const|volatile|struct|class|typename)\b", "", type_text)
    return re.sub(r"[\s&]", "", text)


def _is_list(type_text: str) -> bool:
    return bool(_LIST_NAMES.fullmatch(type_text) or _LIST_TEMPLATES.match(type_text))


def _unwrap(type_text: str) -> str | None:
    """The type `->`, `*` or `.value()` gives: a pointer's pointee, an optional's value."""
    if type_text.endswith("*"):
        return type_text[:-1]
    optional = _OPTIONAL.fullmatch(type_text)
    if optional:
        return optional["inner"]
    base = type_text.rsplit("::", 1)[-1]
    if base in _OPTIONAL_REFS:
        return _OPTIONAL_REFS[base]
    optional_ref = re.fullmatch(_NS + r"OptionalArrayRef<(?P<inner>.*)>", type_text)
    return f"ArrayRef<{optional_ref['inner']}>" if optional_ref else None


def _expression_type(node: Node, types: dict[str, str | None]) -> str | None:
    """The declared type of a receiver expression, where the impl's declarations tell it."""
    kind = node.type
    if kind == "identifier":
        return types.get((node.text or b"").decode())
    if kind == "parenthesized_expression" and node.named_children:
        return _expression_type(node.named_children[0], types)
    if kind == "pointer_expression" and node.children and node.children[0].type == "*":
        inner = node.child_by_field_name("argument")
        inner_type = _expression_type(inner, types) if inner is not None else None
        return _unwrap(inner_type) if inner_type else None
    if kind == "call_expression":
        function = node.child_by_field_name("function")
        if function is None or function.type != "field_expression":
            return None
        field = function.child_by_field_name("field")
        name = (field.text or b"").decode() if field is not None else ""
        if name in _RETURNS:
            return _RETURNS[name]
        if name == "value":
            receiver = _receiver_type(function, types)
            return _unwrap(receiver) if receiver else None
    return None


def _receiver_type(field_expression: Node, types: dict[str, str | None]) -> str | None:
    """The type a field expression's method is called on: `a.f()` a's, `a->f()` *a's."""
    argument = field_expression.child_by_field_name("argument")
    operator = field_expression.child_by_field_name("operator")
    declared = _expression_type(argument, types) if argument is not None else None
    if declared and operator is not None and operator.type == "->":
        return _unwrap(declared)
    return declared


def _declared(declarator: Node) -> tuple[str, str] | None:
    """The name a declarator declares and the `*`s it adds to the type."""
    stars = ""
    node: Node | None = declarator
    while node is not None and node.type != "identifier":
        if node.type == "pointer_declarator":
            stars += "*"
        if node.type not in ("pointer_declarator", "reference_declarator", "init_declarator"):
            return None
        node = node.child_by_field_name("declarator") or next(
            (c for c in node.named_children if c.type.endswith(("declarator", "identifier"))),
            None)
    return ((node.text or b"").decode(), stars) if node is not None else None


def declared_types(nodes: list[Node]) -> dict[str, str | None]:
    """Each name the impl declares and its type (`None` where two declarations disagree),
    in source order so that `auto` locals read the declarations above them."""
    types: dict[str, str | None] = {}
    for node in nodes:
        if node.type not in ("parameter_declaration", "optional_parameter_declaration",
                             "declaration"):
            continue
        type_node = node.child_by_field_name("type")
        if type_node is None:
            continue
        base = _normal((type_node.text or b"").decode())
        for declarator in node.children_by_field_name("declarator"):
            named = _declared(declarator)
            if named is None:
                continue
            name, stars = named
            declared: str | None = base + stars
            if base == "auto" and declarator.type == "init_declarator":
                value = declarator.child_by_field_name("value")
                declared = _expression_type(value, types) if value is not None else None
            types[name] = declared if types.get(name, declared) == declared else None
    return types


def on_a_list(call: Node, types: dict[str, str | None]) -> bool:
    """Whether a method call's receiver is a list (IntArrayRef, std::vector, c10::List, an
    optional of one via `->` or `.value()`): its size() is a length, not a tensor dim."""
    function = call.child_by_field_name("function")
    if function is None or function.type != "field_expression":
        return False
    receiver = _receiver_type(function, types)
    return receiver is not None and _is_list(receiver)


def takes_int_sizes(definition: Node) -> bool:
    """Whether a function definition's first parameter is a list of int64_t sizes (the
    overload a bare braced list of ints picks)."""
    declarator = definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters") if declarator else None
    first = parameters.named_children[:1] if parameters is not None else []
    type_node = first[0].child_by_field_name("type") if first else None
    return type_node is not None and bool(
        _INT_SIZES.fullmatch(_normal((type_node.text or b"").decode())))
