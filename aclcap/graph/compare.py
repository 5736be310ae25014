"""Compare a replayed step with eager: outputs and mutated inputs, with max abs/rel error
and the allclose verdict under the tolerance in force. A difference of structure (count,
nesting, type, dtype, shape) is named, never a crash."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from aclcap._compat import tree_flatten


@dataclass
class Comparison:
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons


def _meta(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"
    return type(t).__name__


def _compare_tensor(result: Comparison, label: str, want: torch.Tensor, got: torch.Tensor,
                    tol: dict[str, float]) -> None:
    if want.shape != got.shape or want.dtype != got.dtype:
        result.reasons.append(f"{label}: eager {_meta(want)}, graph {_meta(got)}")
        return
    w64, g64 = want.detach().double().cpu(), got.detach().double().cpu()
    diff = (w64 - g64).abs()
    if diff.numel() == 0:
        return
    abs_err = float(diff.nan_to_num(nan=float("inf")).max())
    significant = w64.abs() > tol["atol"]
    rel_err = float((diff[significant] / w64.abs()[significant]).max()) \
        if significant.any() else 0.0
    result.max_abs_err = max(result.max_abs_err, abs_err)
    result.max_rel_err = max(result.max_rel_err, rel_err)
    if not torch.allclose(g64, w64, atol=tol["atol"], rtol=tol["rtol"], equal_nan=True):
        result.reasons.append(f"{label} differs from eager: max abs err {abs_err:.3g} "
                              f"(atol {tol['atol']:g}, rtol {tol['rtol']:g})")


def compare(expected: dict[str, object], actual: dict[str, object], tol: dict[str, float]
            ) -> Comparison:
    """`expected`/`actual` map a label ("output 0", "input 3 (mutated)") to values."""
    result = Comparison()
    want_outputs = sum(label.startswith("output") for label in expected)
    got_outputs = sum(label.startswith("output") for label in actual)
    if want_outputs != got_outputs:
        result.reasons.append(f"the graph returns {got_outputs} output(s), eager returns "
                              f"{want_outputs}")
    for label, want in expected.items():
        if label not in actual:
            continue
        want_leaves, want_spec = tree_flatten(want)
        got_leaves, got_spec = tree_flatten(actual[label])
        if want_spec != got_spec:
            result.reasons.append(f"{label}: eager returns {want_spec.num_leaves} value(s) "
                                  f"of another structure than the graph's "
                                  f"{got_spec.num_leaves}")
            continue
        for i, (w, g) in enumerate(zip(want_leaves, got_leaves, strict=True)):
            where = label if len(want_leaves) == 1 else f"{label}[{i}]"
            if isinstance(w, torch.Tensor) != isinstance(g, torch.Tensor):
                result.reasons.append(f"{where}: eager {_meta(w)}, graph {_meta(g)}")
            elif isinstance(w, torch.Tensor):
                _compare_tensor(result, where, w, g, tol)
            elif w != g:
                result.reasons.append(f"{where}: eager {w!r}, graph {g!r}")
    return result
