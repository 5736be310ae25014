"""Are a model file's inputs fresh? Replays run on new calls of make_inputs(size) so that a
value frozen into the graph at capture (an input read as a constant) shows up as a
difference from eager. A make_inputs that seeds its generator with the size returns the
capture's own values every time, and a replay then proves nothing about that: said as a
warning on the row, JSON `fresh_inputs: false`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from aclcap.host_values import same_value

STALE_INPUTS = ("make_inputs returned the same values twice: replays used the capture's own "
                "values, so values frozen into the graph would go unnoticed; draw them from "
                "an unseeded generator")


def inputs_are_fresh(first: tuple, second: tuple) -> bool:
    """Whether two calls of make_inputs at one size differ in any value (or in their
    structure). Capture compares the draws its replays use, before they run."""
    return len(first) != len(second) or any(
        (a != b) if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor)
        else a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a, b)
        for a, b in zip(first, second, strict=True))


VARY_TRIES = 32  # draws to find one in which every host value differs from the capture's


def varied_draw(draw: Callable[[], tuple], captured: tuple, hosts: Sequence[int]
                ) -> tuple[tuple, list[int]]:
    """A draw whose every host value differs from the captured one, so that a replay tests
    each frozen value (a bool's second draw equals the first half the time); else, after
    VARY_TRIES draws, the draw that varies most and the host positions it left unvaried."""
    best: tuple | None = None
    best_same: list[int] = []
    for _ in range(VARY_TRIES if hosts else 1):
        args = draw()
        same = [i for i in hosts if same_value(args[i], captured[i])]
        if best is None or len(same) < len(best_same):
            best, best_same = args, same
        if not same:
            break
    assert best is not None  # at least one draw was made
    return best, best_same
