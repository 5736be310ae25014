"""A schema line corrected to say what the kernel does: `Tensor(a!)` on the arguments it
writes, `Tensor(a)` on an argument an output aliases and on that output. Written on the
schema's text because torchgen's FunctionSchema refuses the out-variants real libraries
define (`-> ()` with a `Tensor(a!) out`), and torch._C's schema cannot be edited."""

from __future__ import annotations

import re
import string

_ANNOTATED = re.compile(r"^Tensor\((?P<set>[a-z])(?P<bang>!?)\)")


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets (defaults such as `int[] s=[1, 2]`)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _annotate(token: str, alias_set: str, write: bool) -> str:
    """`Tensor x` / `Tensor? x` / `Tensor(a) x` with the alias annotation set or made a write."""
    found = _ANNOTATED.match(token)
    if found:
        bang = "!" if write or found["bang"] else ""
        return f"Tensor({found['set']}{bang})" + token[found.end():]
    return f"Tensor({alias_set}{'!' if write else ''})" + token[len("Tensor"):]


def corrected_schema(schema: str, writes: list[str], aliased: dict[int, str]) -> str:
    """`schema` (`ns::name.overload(args) -> returns`, as torch prints it) without the
    namespace, as `m.def` takes it, with each argument in `writes` marked `!` and each
    return index in `aliased` annotated with the alias set of the argument it aliases."""
    head, returns = schema.rsplit(") -> ", 1)
    name, args_text = head.split("(", 1)
    name = name.split("::", 1)[-1]
    args = _split_top(args_text)
    used = set(re.findall(r"Tensor\(([a-z])!?\)", schema))
    free = iter(c for c in string.ascii_lowercase if c not in used)
    sets: dict[str, str] = {}
    for i, token in enumerate(args):
        if token == "*" or not token.startswith("Tensor"):
            continue
        arg = token.rsplit(" ", 1)[-1].split("=", 1)[0]
        if arg in writes or arg in aliased.values():
            found = _ANNOTATED.match(token)
            sets[arg] = found["set"] if found else next(free)
            args[i] = _annotate(token, sets[arg], arg in writes)
    tuple_returns = returns.startswith("(")
    rets = _split_top(returns[1:-1] if tuple_returns else returns)
    for index, arg in aliased.items():
        rets[index] = _annotate(rets[index], sets[arg], arg in writes)
    new_returns = f"({', '.join(rets)})" if tuple_returns else rets[0]
    return f"{name}({', '.join(args)}) -> {new_returns}"
