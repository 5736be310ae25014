"""The interface every capture mechanism implements, and what it hands back per size."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aclcap.graph.compiles import CompileLog
    from aclcap.graph.step import StepContext


@dataclass
class Captured:
    """One size's captured step. `replay(inputs)` returns the outputs and leaves every
    input the model mutates (a KV cache) mutated as eager would; `static_inputs` are the
    buffers the graph reads, so passing them back replays with no copies at all."""

    size: int
    capture_us: float
    memory_bytes: int
    replay: Callable[[tuple], Any]
    static_inputs: tuple = ()


class Backend(Protocol):
    mechanism: str  # "aclgraph", "cudagraph" or "aoti"
    compile_backend: Any  # what torch.compile uses (on cpu: only to record recompiles)

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None,
                log: CompileLog | None = None) -> list[Captured]:
        """Capture one step per size (largest first), or raise CaptureError; with `log`,
        record every compile torch.compile makes of the step across the sizes."""
        ...

    def summary(self) -> dict[str, Any]:
        """Backend facts for the report (cache hit, artifact, graph API)."""
        ...
