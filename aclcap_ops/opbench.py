"""Time the bundled ops against their eager references and against the memory-traffic floor.

Each op is measured against its plain-PyTorch composite (aclcap_ops.reference), for
rms_norm also against torch.nn.functional.rms_norm, and against a floor: a trivial pass with
the op's own access pattern over the op's own tensors, timed in the same rounds. An
out-of-place op's floor reads what the op reads and writes a buffer of the size it writes,
prefaulted (rms_norm: x copied into an output-sized buffer; silu_and_mul: the two halves
added into one); an in-place op's floor is a read-modify-write pass over the buffers it
mutates (bitwise_or_(0) on an integer view). Such a pass is what any kernel must do at
least, so a kernel that beats it by more than 10% means the floor is wrong, not that the
kernel is fast; one well above it still has compute or overhead to remove. Allocation is
its own column: the floor with a freshly allocated output against the prefaulted one
(glibc serves blocks above its mmap threshold with fresh pages, so a large output pays page
faults on every call).

Why the measurements look the way they do:

* Interleaved turns (floor, kernel, references, then again), each a block of about 2 ms of
  calls, medians over blocks, and the speedup over the reference a ratio taken within a
  turn: drift of a shared machine (another process or VM taking a core for a while) slows
  the neighbouring blocks of one turn alike, so the ratios hold even when the absolute
  times wander.
* kernel/floor is the kernel's fastest block over the floor's fastest block: load only
  ever slows a block down, so each one's fastest is its speed on the quiet machine, and the
  floor timed as its own kernel reads 0.96 to 1.05 so (in-place and out= cases, 4096 x
  4096, two runs), where the kernel's median over the floor's fastest read 1.05 to 1.86:
  an in-place floor's blocks are bimodal here, so that quotient priced the floor's luck.
* One copy rate cannot be the floor of every op: a read-modify-write pass pays no
  read-for-ownership, a copy into a new buffer pays page faults. So each case brings its own
  floor over the same tensors.
* In-place ops are timed by calling them again and again on the same buffers, so their inputs
  are chosen to stay finite under repetition (see the `_case_*` builders) and are restored
  from a saved copy, outside the timer, before every measurement.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from aclcap_ops import OPS

# (tokens, hidden): a decode batch, a prefill chunk, and the size the targets are set at.
DEFAULT_SIZES = ((32, 4096), (512, 4096), (4096, 4096))
EPS = 1e-6


@dataclass(frozen=True)
class OpBenchRow:
    """One op at one shape and dtype; times are medians in microseconds."""

    op: str
    dtype: str
    size: tuple[int, int]  # the (tokens, hidden) the case was built for
    shape: tuple[int, ...]  # the op's main input
    bytes_moved: int
    kernel_us: float
    reference_us: float | None  # None: measured without the references (floors only)
    speedup: float | None  # reference / kernel (median of per-round ratios)
    achieved_gbps: float  # bytes_moved / kernel time
    floor_us: float  # the same-pattern pass over the same tensors, its fastest block
    floor_gbps: float  # bytes_moved / floor time
    kernel_best_us: float  # the kernel's fastest block
    kernel_over_floor: float  # kernel_best_us / floor_us: fastest over fastest (module doc)
    alloc_us: float | None  # out-of-place: floor with a fresh output minus prefaulted one
    f_rms_norm_us: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OpCase:
    """What to time for one op: the kernel, its baselines, and the bytes it must move."""

    op: str
    dtype: torch.dtype
    size: tuple[int, int]
    shape: tuple[int, ...]
    bytes_moved: int
    kernel: Callable[[], object]
    reference: Callable[[], object]
    floor: Callable[[], object]  # the op's access pattern, nothing else (module doc)
    fresh_floor: Callable[[], object] | None = None  # the floor writing a new output
    extra: dict[str, Callable[[], object]] = field(default_factory=dict)
    reset: Callable[[], None] = lambda: None


def _nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _restorer(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], None]:
    def reset() -> None:
        for live, saved in pairs:
            live.copy_(saved)

    return reset


def _floors(src: torch.Tensor, out_shape: tuple[int, ...]) -> dict[str, Callable]:
    prefaulted, fresh = _copy_floor(src, out_shape)
    return {"floor": prefaulted, "fresh_floor": fresh}


def _copy_floor(src: torch.Tensor, out_shape: tuple[int, ...]
                ) -> tuple[Callable[[], object], Callable[[], object]]:
    """Read `src`, write an output of `out_shape`: into a prefaulted buffer, and into a new
    one."""
    out = torch.empty(out_shape, dtype=src.dtype)
    out.fill_(0)
    return _copy_into(src, out), _copy_into(src, out, fresh=True)


def _copy_into(src: torch.Tensor, out: torch.Tensor, fresh: bool = False
               ) -> Callable[[], object]:
    """Read `src`, write `out` (`fresh`: a new buffer of its shape each call). Reading more
    than is written (silu_and_mul reads 2x) sums the halves instead."""
    if src.numel() == out.numel():
        flat = src.view(out.shape)
        return (lambda: torch.empty_like(out).copy_(flat)) if fresh else (lambda: out.copy_(flat))
    a, b = (_bits(h) for h in src.chunk(src.numel() // out.numel(), dim=-1)[:2])
    if fresh:
        return lambda: torch.add(a, b)
    bits = _bits(out)
    return lambda: torch.add(a, b, out=bits)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The same bytes as integers: a floor must not pay for float conversions (torch's
    bfloat16 arithmetic converts every element) that a fused kernel does not."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
        t.element_size()])


def _rmw_floor(*mutated: torch.Tensor) -> Callable[[], object]:
    """A read-modify-write pass over each mutated buffer (values unchanged)."""
    bits = [_bits(t) for t in mutated]

    def floor() -> None:
        for t in bits:
            t.bitwise_or_(0)

    return floor


def _reference():
    """Load the library on first use: loading builds the kernels if they are stale."""
    from aclcap_ops import load, reference

    load()
    return reference


def _heads(hidden: int) -> tuple[int, int, int]:
    """(head_size, query heads, key/value heads): 128-wide heads, 4 query heads per KV head."""
    head_size = 128 if hidden % 128 == 0 else hidden
    q_heads = hidden // head_size
    return head_size, q_heads, max(1, q_heads // 4)


def _case_rms_norm(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    ops, ref = torch.ops.aclcap, _reference()
    x = torch.randn(tokens, hidden, dtype=dtype)
    w = torch.randn(hidden, dtype=dtype)
    return OpCase(
        "rms_norm", dtype, (tokens, hidden), (tokens, hidden), 2 * _nbytes(x) + _nbytes(w),
        kernel=lambda: ops.rms_norm(x, w, EPS),
        reference=lambda: ref.rms_norm(x, w, EPS),
        extra={"f_rms_norm": lambda: F.rms_norm(x, (hidden,), w, EPS)},
        **_floors(x, (tokens, hidden)),
    )


def _case_fused_add_rms_norm(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    # Called repeatedly, residual <- residual + norm(residual) * w. With a random w the
    # elements with the largest w grow geometrically and overflow within tens of calls; with
    # w = 1 (a freshly initialized norm) every element scales by the same 1 + 1/rms, so rms
    # grows by about 1 per call: linear, finite in float32, and in 16-bit types the sum just
    # stops changing once the increment is below half an ulp.
    ops, ref = torch.ops.aclcap, _reference()
    x = torch.randn(tokens, hidden, dtype=dtype)
    residual = torch.randn(tokens, hidden, dtype=dtype)
    w = torch.ones(hidden, dtype=dtype)
    saved = [(x, x.clone()), (residual, residual.clone())]
    return OpCase(
        "fused_add_rms_norm", dtype, (tokens, hidden), (tokens, hidden),
        2 * _nbytes(x, residual) + _nbytes(w),
        kernel=lambda: ops.fused_add_rms_norm(x, residual, w, EPS),
        reference=lambda: ref.fused_add_rms_norm(x, residual, w, EPS),
        floor=_rmw_floor(x, residual),
        reset=_restorer(saved),
    )


def _case_silu_and_mul(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    ops, ref = torch.ops.aclcap, _reference()
    x = torch.randn(tokens, 2 * hidden, dtype=dtype)
    return OpCase(
        "silu_and_mul", dtype, (tokens, hidden), (tokens, 2 * hidden), _nbytes(x) * 3 // 2,
        kernel=lambda: ops.silu_and_mul(x),
        reference=lambda: ref.silu_and_mul(x),
        **_floors(x, (tokens, hidden)),
    )


def quarter_turn_cache(max_pos: int, rot_dim: int, dtype: torch.dtype) -> torch.Tensor:
    """A RoPE table whose angles are multiples of 90 degrees: cos and sin are 0 or +-1.

    Why: rotary_embedding rotates in place, so a benchmark applies it thousands of times to
    the same buffers. With a real table, cos^2 + sin^2 rounded to bf16 is off 1 by up to
    ~2^-8 and magnitudes drift geometrically (towards overflow or denormals, which would also
    distort the timing). Quarter turns are exact in every dtype, so repeated calls only
    permute and negate values, while the kernel does the same arithmetic as with any table.
    """
    half = rot_dim // 2
    turns = (torch.arange(max_pos)[:, None] + torch.arange(half)[None, :]) % 4
    cos = torch.tensor([1.0, 0.0, -1.0, 0.0])[turns]
    sin = torch.tensor([0.0, 1.0, 0.0, -1.0])[turns]
    return torch.cat((cos, sin), dim=-1).to(dtype)


def _case_rotary_embedding(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    ops, ref = torch.ops.aclcap, _reference()
    head_size, q_heads, k_heads = _heads(hidden)
    rot_dim = head_size - head_size % 2
    max_pos = 4096
    positions = torch.arange(tokens) % max_pos
    query = torch.randn(tokens, q_heads * head_size, dtype=dtype)
    key = torch.randn(tokens, k_heads * head_size, dtype=dtype)
    table = quarter_turn_cache(max_pos, rot_dim, dtype)
    # q and k are read and written; each token reads its position and its cos/sin row.
    moved = 2 * _nbytes(query, key) + _nbytes(positions) + tokens * rot_dim * table.element_size()
    saved = [(query, query.clone()), (key, key.clone())]
    args = (positions, query, key, head_size, table, True)
    return OpCase(
        "rotary_embedding", dtype, (tokens, hidden), (tokens, q_heads * head_size), moved,
        kernel=lambda: ops.rotary_embedding(*args),
        reference=lambda: ref.rotary_embedding(*args),
        floor=_rmw_floor(query, key),
        reset=_restorer(saved),
    )


def _case_get_masked_input_and_mask(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    # Token ids, not activations: [tokens] int64 whatever the float dtype (hidden is unused).
    # A rank holding a quarter of a 128k vocab plus 64 added ids, padded by 8.
    del dtype
    ops, ref = torch.ops.aclcap, _reference()
    vocab = 128 * 1024
    ids = torch.randint(0, vocab + 64, (tokens,), dtype=torch.int64)
    args = (ids, vocab // 4, vocab // 2, 8, vocab, vocab + 64)
    moved = 2 * _nbytes(ids) + tokens  # ids in, masked ids and a bool mask out
    return OpCase(
        "get_masked_input_and_mask", torch.int64, (tokens, hidden), (tokens,), moved,
        kernel=lambda: ops.get_masked_input_and_mask(*args),
        reference=lambda: ref.get_masked_input_and_mask(*args),
        **_floors(ids, (tokens,)),  # the ids; the mask's byte per id is left out: a bound
    )


def _case_reshape_and_cache(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    ops, ref = torch.ops.aclcap, _reference()
    head_size, _, kv_heads = _heads(hidden)
    block_size = 16
    blocks = 2 * (tokens + block_size - 1) // block_size
    key = torch.randn(tokens, kv_heads, head_size, dtype=dtype)
    value = torch.randn_like(key)
    key_cache = torch.zeros(blocks, block_size, kv_heads, head_size, dtype=dtype)
    value_cache = torch.zeros_like(key_cache)
    # vLLM's slot mapping: sequences of block_size tokens, each in a block of its own (here
    # every other block of the cache), the blocks in whatever order the allocator handed
    # them out: slot = block * block_size + position in the block.
    used = (tokens + block_size - 1) // block_size
    order = 2 * torch.randperm(used)
    slots = (order[:, None] * block_size + torch.arange(block_size)).reshape(-1)[:tokens]
    # key and value are read once and written once into their slots; plus the slot ids.
    moved = 2 * _nbytes(key, value) + _nbytes(slots)
    args = (key, value, key_cache, value_cache, slots)
    # The floor writes the same rows into the same slots, block by block in address order
    # (a strided view): the footprint is the kernel's, only the order of blocks differs. A
    # floor packed into the cache's first rows had half the kernel's page span and, at
    # bfloat16, fit the last-level cache where the kernel did not.
    full, rest = divmod(tokens, block_size)

    def same_slots(t: torch.Tensor, cache: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
        pairs = [(cache[0:2 * full:2], t[:full * block_size].view(full, block_size,
                                                                  *t.shape[1:]))]
        if rest:
            pairs.append((cache[2 * full, :rest], t[full * block_size:]))
        return pairs

    copies = same_slots(key, key_cache) + same_slots(value, value_cache)

    def floor() -> None:
        for dst, src in copies:
            dst.copy_(src)

    return OpCase(
        "reshape_and_cache", dtype, (tokens, hidden), (tokens, kv_heads, head_size), moved,
        kernel=lambda: ops.reshape_and_cache(*args),
        reference=lambda: ref.reshape_and_cache(*args),
        floor=floor,
    )


def _case_paged_attention(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    # Decode: one query token per sequence. At most 256 sequences, with 16k cached tokens
    # among them (blocks of 16 in random order, as vLLM's allocator hands them out): KV
    # caches of 128 MiB in float32, 64 MiB in bfloat16 at hidden 4096, beyond the cache.
    ops, ref = torch.ops.aclcap, _reference()
    head_size, q_heads, kv_heads = _heads(hidden)
    block_size, seqs = 16, min(tokens, 256)
    per_seq = max(1, 16384 // (block_size * seqs))  # blocks per sequence
    tables = torch.randperm(seqs * per_seq).to(torch.int32).view(seqs, per_seq)
    lens = torch.full((seqs,), per_seq * block_size, dtype=torch.int32)
    shape = (seqs * per_seq, block_size, kv_heads, head_size)
    key_cache, value_cache = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    query = torch.randn(seqs, q_heads, head_size, dtype=dtype)
    out = torch.zeros_like(query)
    args = (query, key_cache, value_cache, head_size ** -0.5, tables, lens)
    # Every cached key and value is read once (its KV head's query heads share it), the
    # query read and the output written.
    moved = _nbytes(key_cache, value_cache, tables, lens) + 2 * _nbytes(query)
    # The floor reads the same caches in address order (a byte-wise max, a read-only pass:
    # every block is used, so that is exactly the bytes the op reads) and writes the output.
    caches = [t.view(torch.uint8) for t in (key_cache, value_cache)]

    def floor() -> None:
        for c in caches:
            c.amax()
        out.copy_(query)

    return OpCase(
        "paged_attention", dtype, (tokens, hidden), tuple(query.shape), moved,
        kernel=lambda: ops.paged_attention(*args),
        reference=lambda: ref.paged_attention(*args),
        floor=floor,
    )


# The out= cases time their floor over the kernel's own input and output, as every other
# case does: over the functional case's tensors instead, the floor's buffers and the
# kernel's sat differently in the last-level cache, and rms_norm.out at bfloat16 read 0.65
# to 0.81x of that floor in one run and 1.02 to 1.11x of its own (medians over blocks).
def _case_rms_norm_out(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    case = _case_rms_norm(tokens, hidden, dtype)
    x, w = torch.randn(tokens, hidden, dtype=dtype), torch.randn(hidden, dtype=dtype)
    out = torch.zeros_like(x)
    case.op, case.fresh_floor, case.extra = "rms_norm.out", None, {}
    case.kernel = lambda: torch.ops.aclcap.rms_norm.out(x, w, EPS, out=out)
    case.floor = _copy_into(x, out)
    return case


def _case_silu_and_mul_out(tokens: int, hidden: int, dtype: torch.dtype) -> OpCase:
    case = _case_silu_and_mul(tokens, hidden, dtype)
    x = torch.randn(tokens, 2 * hidden, dtype=dtype)
    out = torch.zeros(tokens, hidden, dtype=dtype)
    case.op, case.fresh_floor = "silu_and_mul.out", None
    case.kernel = lambda: torch.ops.aclcap.silu_and_mul.out(x, out=out)
    case.floor = _copy_into(x, out)
    return case


_BUILDERS: dict[str, Callable[[int, int, torch.dtype], OpCase]] = {
    "rms_norm": _case_rms_norm,
    "rms_norm.out": _case_rms_norm_out,
    "silu_and_mul.out": _case_silu_and_mul_out,
    "fused_add_rms_norm": _case_fused_add_rms_norm,
    "silu_and_mul": _case_silu_and_mul,
    "rotary_embedding": _case_rotary_embedding,
    "get_masked_input_and_mask": _case_get_masked_input_and_mask,
    "reshape_and_cache": _case_reshape_and_cache,
    "paged_attention": _case_paged_attention,
}


# Every op, and the out= variants next to the functional forms they share kernels with.
CASES = (*OPS, "rms_norm.out", "silu_and_mul.out")


def writes_in_place(case: str) -> bool:
    """An out= or in-place case (its schema marks an argument written): the forms a graph
    runs, whose kernels the floor targets hold to (docs/bench.md#op-microbenchmarks---ops)."""
    name, _, overload = case.partition(".")
    op = getattr(getattr(torch.ops.aclcap, name), overload or "default")
    return any(a.alias_info is not None and a.alias_info.is_write
               for a in op._schema.arguments)


def op_cases(
    tokens: int, hidden: int, dtype: torch.dtype, ops: Iterable[str] = CASES
) -> list[OpCase]:
    """The timed cases of the named ops at [tokens, hidden] activations of `dtype`."""
    _check_ops(ops)
    return [_BUILDERS[op](tokens, hidden, dtype) for op in ops]


def _check_ops(ops: Iterable[str]) -> None:
    unknown = set(ops) - set(CASES)
    if unknown:
        raise ValueError(f"unknown ops {sorted(unknown)}; known: {', '.join(CASES)}")


BLOCK_S = 0.002  # one timed block of calls: short, so neighbours see the same machine


def _calls_per_block(fn: Callable[[], object]) -> int:
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    return max(1, min(10_000, int(BLOCK_S / max(once, 1e-7))))


def _time_block(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def measure_case(case: OpCase, rounds: int = 5, min_run_time: float = 0.1,
                 references: bool = True) -> OpBenchRow:
    """Time one case in `rounds` rounds of about `min_run_time` each; without `references`
    only the kernel and its floor (the composite references take most of a large case's
    time: two thirds of the floor test's).

    Within a round the functions (floor, kernel, references) take turns block by block,
    each block about 2 ms of calls: on a shared machine whose speed wanders within a tenth
    of a second (measured here: one function's time moving 40% between neighbouring
    100 ms measurements), a kernel and its floor timed in the same few milliseconds see the
    same machine. torch.utils.benchmark's Timer measures one statement at a time, so it
    cannot interleave at that grain. A slow reference joins only every so many turns.
    Times are medians over blocks, and speedup the median of the ratio within each turn (so
    it need not equal the quotient of the median times exactly). kernel_over_floor is the
    kernel's fastest block over the floor's (the module doc says why): under a load average
    of 11 on 2 cores, medians of per-turn kernel/floor ratios read 0.12 to 0.86 for kernels
    that read 0.96 to 1.4 on a quieter machine, and load only ever slows a block down.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    fns: dict[str, Callable[[], object]] = {"floor": case.floor, "kernel": case.kernel}
    if references:
        fns.update({"reference": case.reference,
                    **({"fresh_floor": case.fresh_floor} if case.fresh_floor else {}),
                    **case.extra})
    for name in fns:  # lazy init, first touch of inputs
        case.reset()
        fns[name]()
        fns[name]()
    calls = {name: _calls_per_block(fn) for name, fn in fns.items()}
    turns = rounds * max(1, round(min_run_time / BLOCK_S))
    # A function whose one call outlasts a block (the composite references, 100+ ms) joins
    # every so many turns only, so it does not set the pace; each still gets `rounds` turns.
    every = {name: min(max(1, round(_time_block(fn, calls[name]) * calls[name] / BLOCK_S)),
                       max(1, turns // rounds)) for name, fn in fns.items()}
    samples: dict[str, dict[int, float]] = {name: {} for name in fns}
    for turn in range(turns):
        for name, fn in fns.items():
            if turn % every[name]:
                continue
            case.reset()
            # One untimed call first: the restore above leaves the inputs in the cache, and
            # a block of one call would time that instead of the steady state of repeated
            # calls (measured: a kernel "under" its floor by 23%).
            fn()
            samples[name][turn] = _time_block(fn, calls[name])
    case.reset()

    def median_ratio(num: str, den: str) -> float:
        both = samples[num].keys() & samples[den].keys()
        return statistics.median(samples[num][i] / samples[den][i] for i in both)

    t = {name: statistics.median(v.values()) for name, v in samples.items()}
    floor = min(samples["floor"].values())
    f_rms = t.get("f_rms_norm")
    fresh = t.get("fresh_floor")
    return OpBenchRow(
        op=case.op,
        dtype=str(case.dtype).removeprefix("torch."),
        size=case.size,
        shape=case.shape,
        bytes_moved=case.bytes_moved,
        kernel_us=t["kernel"] * 1e6,
        reference_us=t["reference"] * 1e6 if references else None,
        speedup=median_ratio("reference", "kernel") if references else None,
        achieved_gbps=case.bytes_moved / t["kernel"] / 1e9,
        floor_us=floor * 1e6,
        floor_gbps=case.bytes_moved / floor / 1e9,
        kernel_best_us=min(samples["kernel"].values()) * 1e6,
        kernel_over_floor=min(samples["kernel"].values()) / floor,
        alloc_us=None if fresh is None else max(0.0, fresh - t["floor"]) * 1e6,
        f_rms_norm_us=None if f_rms is None else f_rms * 1e6,
    )


def measure_ops(
    sizes: Sequence[tuple[int, int]],
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.bfloat16),
    rounds: int = 5,
    ops: Sequence[str] = CASES,
    min_run_time: float = 0.1,
    on_row: Callable[[OpBenchRow], None] | None = None,
    references: bool = True,
) -> list[OpBenchRow]:
    """Benchmark `ops` at every (tokens, hidden) size and dtype; one row per measurement
    (kernel and floor only, without `references`).

    get_masked_input_and_mask takes int64 token ids, so it is measured once per size rather
    than once per dtype. `on_row` sees each row as it is done (for progress output).
    """
    _check_ops(ops)
    rows: list[OpBenchRow] = []
    for tokens, hidden in sizes:
        for i, dtype in enumerate(dtypes):
            for op in ops:
                if i > 0 and op == "get_masked_input_and_mask":
                    continue
                # One case at a time, so that only its tensors are alive while it is timed.
                row = measure_case(_BUILDERS[op](tokens, hidden, dtype), rounds, min_run_time,
                                   references)
                rows.append(row)
                if on_row:
                    on_row(row)
    return rows
