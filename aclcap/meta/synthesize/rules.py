"""What synthesis infers about an op, as data: per output a shape made of small integer
expressions over the inputs, a dtype rule, a layout rule and an alias rule; per op what it
writes. infer.py produces these from observed calls, emit_python.py and emit_cpp.py turn them
into source, and the report prints them in words: each stage reads only this."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from aclcap.meta.synthesize.schema import OpSchema

# --- integer expressions ----------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: int


@dataclass(frozen=True)
class Dim:
    """`arg.shape[index]`; index may be negative (counted from the last dim), which is how
    a rule stays right for inputs of other ranks. `item` picks a tensor of a Tensor[] arg."""

    arg: str
    index: int
    item: int | None = None


@dataclass(frozen=True)
class Numel:
    arg: str
    item: int | None = None


@dataclass(frozen=True)
class IntArg:
    """An int argument's value, or one element of an int[] argument (`index`)."""

    arg: str
    index: int | None = None


@dataclass(frozen=True)
class ListLen:
    """The length of an int[] argument (`len(seq_lens)`: a batch of host lengths)."""

    arg: str


@dataclass(frozen=True)
class ItemSize:
    """Bytes per element of a ScalarType argument's dtype (`dtype.itemsize`), or of a
    tensor argument's (`tensor`): packed storage sized in another dtype's elements."""

    arg: str
    tensor: bool = False


@dataclass(frozen=True)
class BinOp:
    """`left op right`; "//" floors and "ceil//" rounds up (emitted as -(-a // b)); "max" is
    the larger (a broadcast dim), "min" the smaller (`x[:n]`); "**" a power whose exponent
    is a size or int argument (a spline basis's `(degree + 1) ** D`)."""

    op: Literal["+", "-", "*", "//", "ceil//", "max", "min", "**"]
    left: Expr
    right: Expr


Expr = Const | Dim | Numel | IntArg | ListLen | ItemSize | BinOp


@dataclass(frozen=True)
class Unbacked:
    """No expression fits every observation: a data-dependent size
    (`ctx.new_dynamic_size()`), said as such in the report."""

    min_seen: int
    max_seen: int
    # Two calls with equal inputs gave different sizes. False: no formula fitted, yet no
    # call showed the size following the data, so the rule is unproven there.
    data_dependent: bool = True


@dataclass(frozen=True)
class WholeShape:
    """The whole shape is an int[] argument's value (`out = x.new_empty(size)`)."""

    arg: str


@dataclass(frozen=True)
class LeadingDims:
    """`*arg.shape[:-drop]` (all of `arg.shape` when drop is 0), only ever as the FIRST
    element of OutputRule.shape, the expressions after it being the trailing dims: the
    shape of an op whose inputs come in several ranks, as `[..., hidden]` activations do
    (silu_and_mul: `(LeadingDims("x", 1), x.shape[-1] // 2)` is
    `[*x.shape[:-1], x.shape[-1] // 2]`; empty_like: `(LeadingDims("x", 0),)`). In C++:
    `x.sym_sizes().slice(0, x.dim() - drop)` then the trailing dims."""

    arg: str
    drop: int = 0


@dataclass(frozen=True)
class TrailingDims:
    """`*arg.shape[skip:]`, only ever as the LAST element of OutputRule.shape, after a
    LeadingDims: a gather by an index tensor of any rank is
    `(LeadingDims("idx", 0), TrailingDims("x", 1))`, `[*idx.shape, *x.shape[1:]]`."""

    arg: str
    skip: int = 0


@dataclass(frozen=True)
class AlongDim:
    """`[*arg.shape[:dim], *middle, *arg.shape[dim:][1:]]` where `dim` is the value of int
    argument `dim_arg` (negative counts from the end): a reduction or a scatter along a dim
    the caller picks. `middle` replaces that dim (`(IntArg("dim_size"),)`), empty removes
    it; `keepdim` names a bool argument that keeps it as 1 where True. With `rank_of`, the
    dim is that tensor's last (`indptr.dim() - 1`): a segment reduction along the dim its
    offsets tensor ends at, batched over the dims before it."""

    arg: str
    dim_arg: str
    middle: tuple[Expr | Unbacked, ...] = ()
    keepdim: str | None = None
    rank_of: str | None = None

    def dim_source(self, name: Callable[[str], str]) -> str:
        """The dim in either language, with `name` spelling an argument there."""
        return f"{name(self.rank_of)}.dim() - 1" if self.rank_of else name(self.dim_arg)


@dataclass(frozen=True)
class RankGuard:
    """The rule holds for `arg` of these ranks only: the kernel's outputs for other ranks
    follow no formula of the input sizes (`why` says what it gave), so the fake refuses
    them with torch._check rather than guess."""

    arg: str
    ranks: tuple[int, ...]
    why: str


# --- dtype, layout, alias ----------------------------------------------------------------


@dataclass(frozen=True)
class DtypeRule:
    """fixed: `dtype` names it ("uint8"); like: same as tensor argument `arg`; arg: the value
    of a ScalarType argument `arg`; promote: torch.result_type over the tensor arguments
    `args`."""

    kind: Literal["fixed", "like", "arg", "promote"]
    dtype: str | None = None
    arg: str | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class LayoutRule:
    """contiguous; the stride order of tensor argument `arg` (empty_like semantics); or a
    fixed dense `order` of dims, outermost first (`[H, T]` with strides `(1, H)`: (1, 0))."""

    kind: Literal["contiguous", "like", "order"]
    arg: str | None = None
    order: tuple[int, ...] = ()
    # like only for `arg` of these ranks, contiguous for the others (a kernel that keeps a
    # 2-D input's layout and copies a 3-D one through a reshape); () for every rank.
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class AliasRule:
    """none: a fresh tensor; input: returns argument `arg` itself; view: a view of `arg`
    (of the output's shape); mixed: only while inferring (some calls alias, some not)."""

    kind: Literal["none", "input", "view", "mixed"]
    arg: str | None = None


NONE_CONDITIONS = ("is None", "is not None", "== 0", "!= 0", "> 0", "<= 0", "< 0", ">= 0",
                   "is True", "is False")


@dataclass(frozen=True)
class OutputRule:
    """One output. `shape` is None for an output that is always None; `none_when` names a
    float/bool/optional argument whose value decides whether the output is None
    (e.g. `("scale", "is None")`), inferred from the observations. The condition is one of
    NONE_CONDITIONS, written so that `f"{arg} {condition}"` is the Python test; the output
    is None exactly where it holds."""

    shape: tuple[LeadingDims | Expr | Unbacked | TrailingDims, ...] | WholeShape | AlongDim \
        | None
    dtype: DtypeRule | None = None
    layout: LayoutRule = LayoutRule("contiguous")
    alias: AliasRule = AliasRule("none")
    none_when: tuple[str, str] | None = None
    # (optional argument, the rule where it is given, the rule where it is None): an op with
    # two regimes (`dim_size` given: that size; None: one that follows the data). Either rule
    # may branch again on another argument; this rule's own fields are then the None one's.
    given: tuple[str, OutputRule, OutputRule] | None = None
    # The test that picks `given[1]`: the argument given (optional), or a scalar's value
    # (`== 0`: softmax's temperature 0 returns zeros_like, the input's layout kept)
    given_test: str = "is not None"

    def sizes(self) -> list[object]:
        """Every size element of this rule and of its regimes: what is asked of each."""
        found: list[object] = []
        if self.given is not None:
            return [*self.given[1].sizes(), *self.given[2].sizes()]
        if isinstance(self.shape, tuple):
            found += self.shape
        elif isinstance(self.shape, AlongDim):
            found += self.shape.middle
        return found


@dataclass(frozen=True)
class SchemaDefect:
    """What the kernel does that its schema does not say, with the corrected schema."""

    message: str  # "writes `cache` but the schema does not mark it mutable"
    corrected_schema: str  # "" where no schema says it (an alias at some sizes only)


@dataclass
class OpRule:
    """Everything inferred for one op overload (`ns::name.overload`)."""

    op: str
    schema: str
    outputs: list[OutputRule]
    writes: list[str] = field(default_factory=list)
    defects: list[SchemaDefect] = field(default_factory=list)
    fitted_on: int = 0  # calls the rule was fitted on
    held_out: int = 0  # calls it was checked on and not fitted on
    evidence: str = ""  # "9 calls; sizes 1..64; float32, bfloat16"
    verified: str | None = None  # "verified on N unseen calls" or the failing check
    notes: list[str] = field(default_factory=list)  # what the inference could not settle
    spec: OpSchema | None = None  # the structured schema (None: parse `schema`, in tests)
    # Why the emitted files hold this rule's fake without registering it (a C++ composite,
    # a failed verification): "" registers it.
    unregistered: str = ""
    # Generalizations no observed call could prove (tied dims, empty inputs): the rule is
    # never called verified while any is left.
    unproven: list[str] = field(default_factory=list)
    rank_guard: RankGuard | None = None
    # Optional tensor arguments no call gave, beside an output that was None in every call:
    # what that output is where one is given, nothing showed, so the fake refuses such a
    # call rather than say None (fbgemm's permute_1D_sparse_data returns its permuted
    # weights there; a step that passed no weights fitted "always None").
    none_only: tuple[str, ...] = ()
    # Why no C++ Meta kernel could serve this op, whatever its rule (a custom_op, whose fake
    # slot torch asks instead; the library's own fake, which takes precedence): "" for none.
    no_cpp: str = ""

    def none_only_words(self) -> str:
        """`` `weights` None ``: the calls a none-only fake takes (`none_only`)."""
        return ", ".join(f"`{n}`" for n in self.none_only) + " None"

    def unbacked(self) -> list[Unbacked]:
        """The data-dependent sizes of every output, in every regime."""
        return [e for o in self.outputs for e in o.sizes() if isinstance(e, Unbacked)]

    def corrected_schema(self) -> str:
        """The one schema line that fixes every defect a schema can fix ("" for none)."""
        return next((d.corrected_schema for d in self.defects if d.corrected_schema), "")

    def python_only(self) -> str:
        """Why the C++ file has no Meta kernel for this rule ("" where it has one)."""
        if self.no_cpp:
            return self.no_cpp
        if self.unbacked():
            return ("an output size is data-dependent (no formula over the inputs fits). A "
                    "C++ Meta kernel cannot make an unbacked SymInt")
        if any(_has_power(e) for o in self.outputs for e in o.sizes()):
            return ("an output size is a power with a symbolic exponent, which c10::SymInt "
                    "has no operation for")
        if any(o.given is not None for o in self.outputs):
            return ("its rule has regimes of an argument (an optional one given or None, a "
                    "scalar at zero or not), which the C++ emitter does not write yet")
        return ""

    def schema_spec(self) -> OpSchema:
        """The structured schema the emitters read: never the printed line, re-parsed."""
        return self.spec if self.spec is not None else OpSchema.parse(self.schema)


def _has_power(e: object) -> bool:
    return isinstance(e, BinOp) and (e.op == "**" or _has_power(e.left) or
                                     _has_power(e.right))
