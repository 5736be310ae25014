"""Compare a replayed step with eager: outputs and mutated inputs, with max abs/rel error
and the allclose verdict under the tolerance in force."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten

# Per-dtype defaults; a model file's TOLERANCE overrides them. Compiled code fuses ops and
# keeps intermediates in float32, so 16-bit dtypes differ from eager by a few ulps.
DEFAULT_TOLERANCE = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.bfloat16: {"atol": 6e-2, "rtol": 6e-2},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
}


@dataclass
class Comparison:
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None) -> dict[str, float]:
    tol = dict(DEFAULT_TOLERANCE.get(dtype, DEFAULT_TOLERANCE[torch.float32]))
    tol.update(override or {})
    return tol


def compare(expected: dict[str, object], actual: dict[str, object], tol: dict[str, float]
            ) -> Comparison:
    """`expected`/`actual` map a label ("output 0", "input 3 (mutated)") to tensors."""
    result = Comparison()
    for label, want in expected.items():
        got = actual[label]
        want_leaves, _ = tree_flatten(want)
        got_leaves, _ = tree_flatten(got)
        for w, g in zip(want_leaves, got_leaves, strict=True):
            if not isinstance(w, torch.Tensor):
                continue
            if w.shape != g.shape:
                result.reasons.append(f"{label}: shape {list(g.shape)}, eager {list(w.shape)}")
                continue
            w64, g64 = w.detach().double().cpu(), g.detach().double().cpu()
            diff = (w64 - g64).abs()
            if diff.numel() == 0:
                continue
            abs_err = float(diff.max())
            significant = w64.abs() > tol["atol"]
            rel_err = float((diff[significant] / w64.abs()[significant]).max()) \
                if significant.any() else 0.0
            result.max_abs_err = max(result.max_abs_err, abs_err)
            result.max_rel_err = max(result.max_rel_err, rel_err)
            if not torch.allclose(g64, w64, atol=tol["atol"], rtol=tol["rtol"], equal_nan=True):
                result.reasons.append(f"{label} differs from eager: max abs err {abs_err:.3g} "
                                      f"(atol {tol['atol']:g}, rtol {tol['rtol']:g})")
    return result
