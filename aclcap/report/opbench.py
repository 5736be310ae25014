"""`aclcap bench --ops` (and scripts/bench_ops.py): one row per op, dtype and shape."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from aclcap.report.layout import Col, short, table, times

if TYPE_CHECKING:
    from aclcap_ops.opbench import OpBenchRow

OPS_WIDE = 140  # the --ops table shows every column from here: its eleven need about 135

_OPS = (Col("op", "op", True), Col("dtype", "dtype", True), Col("shape", "shape", True),
        Col("kernel\n(µs)", "kern µs"), Col("reference\n(µs)", None),
        Col("speedup", "speedup"), Col("F.rms_norm\n(µs)", None), Col("GB/s", None),
        Col("floor\n(µs)", None), Col("kernel/floor\n(fastest)", "/ floor"),
        Col("alloc\n(µs)", None))


def render(rows: list[OpBenchRow], width: int = OPS_WIDE, title: str | None = None) -> Table:
    """Below OPS_WIDE the kernel's time and its two ratios: the reference's time, the floor's
    and GB/s follow from them; F.rms_norm and alloc are only shown at width."""
    cells = ([r.op, _dtype(r.dtype), "x".join(map(str, r.shape)),
              short(r.kernel_us, 1, 1000), short(r.reference_us, 1, 1000),
              times(r.speedup), short(r.f_rms_norm_us, 1, 1000),
              f"{r.achieved_gbps:.1f}", short(r.floor_us, 1, 1000),
              f"{r.kernel_over_floor:.2f}", short(r.alloc_us, 1, 1000)] for r in rows)
    return table(title or "aclcap bench --ops: kernels vs eager reference and their floor "
                 "(the op's own access pattern over its own tensors)", _OPS, cells,
                 width >= OPS_WIDE)


def to_dicts(rows: list[OpBenchRow]) -> list[dict]:
    """The rows as the bench document's `ops` list."""
    return [r.to_dict() for r in rows]


def _dtype(name: str) -> str:
    """float32 -> fp32, bfloat16 -> bf16: the short names kernels are known by."""
    return name.replace("bfloat", "bf").replace("float", "fp")
