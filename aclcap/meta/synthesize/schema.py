"""An op's schema as plain data read from torch's structured schema (arguments, types, alias
info), never by parsing its printed text: torch prints an unnamed alias set as
`Tensor($0! -> )`, which its own parser rejects, and a parsed schema reports `SymInt` as
`int`. Emitters and the corrected-schema line render from this."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from aclcap._compat import FunctionSchema, OpOverload, parse_schema

# torch type classes -> the schema's spelling; any other (ScalarType, Layout,
# MemoryFormat: a generic `Type`) prints as itself.
_SPELLING = {"TensorType": "Tensor", "IntType": "int", "SymIntType": "SymInt",
             "FloatType": "float", "BoolType": "bool", "StringType": "str",
             "NumberType": "Scalar", "DeviceObjType": "Device", "GeneratorType": "Generator",
             "ComplexType": "complex", "SymBoolType": "SymBool", "StorageType": "Storage"}


@dataclass(frozen=True)
class ArgSpec:
    """One argument: `type` as a schema spells it without alias marks (`Tensor?`,
    `SymInt[]`, `int[2]`, `ScalarType`), its alias set and whether the op writes it."""

    name: str
    type: str
    alias_set: str | None = None
    write: bool = False
    kwarg_only: bool = False
    has_default: bool = False
    default: Any = None
    scalar_type_default: bool = False  # a ScalarType default, held as c10's int

    @property
    def is_tensor(self) -> bool:
        return self.type.startswith("Tensor")

    def declared(self) -> str:
        """`Tensor(a!)?`: the type with its alias mark, as a schema line writes it."""
        if self.alias_set is None:
            return self.type
        mark = f"({self.alias_set}{'!' if self.write else ''})"
        return f"Tensor{mark}{self.type[len('Tensor'):]}"


@dataclass(frozen=True)
class OpSchema:
    """`ns::name.overload(args) -> returns`, structured."""

    name: str  # ns::name
    overload: str  # "" for the default overload
    args: tuple[ArgSpec, ...]
    returns: tuple[ArgSpec, ...]  # names are "" where the schema gives none

    @classmethod
    def of(cls, op: OpOverload) -> OpSchema:
        return from_torch(op._schema)

    @classmethod
    def parse(cls, text: str) -> OpSchema:
        """From a schema line a person wrote (tests, answer keys): torch parses it."""
        return from_torch(parse_schema(text))

    def arg(self, name: str) -> ArgSpec:
        return next(a for a in self.args if a.name == name)

    def parameters(self, render: Callable[[ArgSpec], str]) -> list[str]:
        """Each argument rendered, with `*` before the first keyword-only one: a schema
        line's parameters and a Python function's alike."""
        parts: list[str] = []
        for a in self.args:
            if a.kwarg_only and "*" not in parts:
                parts.append("*")
            parts.append(render(a))
        return parts

    def text(self, with_namespace: bool = True) -> str:
        """The schema line: `ns::name.overload(Tensor(a!) out, float eps) -> ()`."""
        name = self.name if with_namespace else self.name.split("::", 1)[-1]
        if self.overload:
            name += f".{self.overload}"
        parts = self.parameters(lambda a: f"{a.declared()} {a.name}" + (
            f"={_default_text(a)}" if a.has_default else ""))
        rets = [f"{r.declared()}{' ' + r.name if r.name else ''}" for r in self.returns]
        ret = rets[0] if len(rets) == 1 else f"({', '.join(rets)})"
        return f"{name}({', '.join(parts)}) -> {ret}"

    def corrected(self, writes: list[str], aliased: dict[int, str]) -> OpSchema:
        """This schema with each argument in `writes` marked `!` and each return index in
        `aliased` sharing the alias set of the argument it aliases (a fresh letter where
        the argument has none)."""
        used = {a.alias_set for a in (*self.args, *self.returns) if a.alias_set}
        free = iter(c for c in string.ascii_lowercase if c not in used)
        args = []
        for a in self.args:
            if a.is_tensor and (a.name in writes or a.name in aliased.values()):
                a = replace(a, alias_set=a.alias_set or next(free),
                            write=a.write or a.name in writes)
            args.append(a)
        sets = {a.name: a for a in args}
        returns = [replace(r, alias_set=sets[aliased[i]].alias_set,
                           write=sets[aliased[i]].write) if i in aliased else r
                   for i, r in enumerate(self.returns)]
        return replace(self, args=tuple(args), returns=tuple(returns))


def _spell(t: Any) -> str:
    kind = type(t).__name__
    if kind == "OptionalType":
        return _spell(t.getElementType()) + "?"
    if kind == "ListType":
        return _spell(t.getElementType()) + "[]"
    return _SPELLING.get(kind, str(t))


def _spec(arg: Any) -> ArgSpec:
    """One argument or return, its alias set as torch holds it (`a`, or unnamed `$0`)."""
    info = arg.alias_info
    alias = min(info.before_set) if info is not None and info.before_set else None
    kind = _spell(arg.real_type)
    if getattr(arg, "N", None) and kind.endswith("[]"):
        kind = f"{kind[:-2]}[{arg.N}]"
    has_default = arg.has_default_value()
    return ArgSpec(arg.name, kind, alias, bool(info and info.is_write), arg.kwarg_only,
                   has_default, arg.default_value if has_default else None,
                   has_default and "ScalarType" in str(arg.real_type))


def from_torch(schema: FunctionSchema) -> OpSchema:
    """Alias sets keep their letters; unnamed ones (`$0`) get the next free letter."""
    specs = [_spec(a) for a in (*schema.arguments, *schema.returns)]
    raw = list(dict.fromkeys(s.alias_set for s in specs if s.alias_set is not None))
    free = iter(c for c in string.ascii_lowercase if c not in raw)
    letters = {r: next(free) if r.startswith("$") else r for r in raw}
    specs = [replace(s, alias_set=letters[s.alias_set]) if s.alias_set is not None else s
             for s in specs]
    n = len(schema.arguments)
    return OpSchema(schema.name, schema.overload_name, tuple(specs[:n]), tuple(specs[n:]))


def _default_text(arg: ArgSpec) -> str:
    """A default as a schema line writes it (`=1e-05`, `=[1, 2]`, `=None`, `=float`)."""
    value = arg.default
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    if arg.scalar_type_default:
        return str(_SCALAR_TYPE_NAMES.get(value, value))
    return str(value)


# c10::ScalarType values a schema default can hold (`ScalarType dtype=float` parses to 6).
SCALAR_TYPE_DEFAULTS = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64",
                        5: "float16", 6: "float32", 7: "float64", 11: "bool", 15: "bfloat16"}
_SCALAR_TYPE_NAMES = {0: "Byte", 1: "Char", 2: "Short", 3: "int", 4: "long", 5: "Half",
                      6: "float", 7: "float64", 11: "bool", 15: "BFloat16"}
