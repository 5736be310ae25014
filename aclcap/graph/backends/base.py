"""The interface every capture mechanism implements, the step context it captures, and what
it hands back per size. The context and the interface refer to each other, so they live in one
module: graph/step.py, which picks a backend, imports this one, never the reverse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from aclcap.graph.compiles import mark_size_dims
from aclcap.graph.padding import pad_to
from aclcap.loading.model_file import ModelSpec, make_step_inputs, pad_step_inputs

if TYPE_CHECKING:
    from aclcap.graph.compiles import CompileLog


@dataclass
class StepContext:
    """Everything a run needs to make, run and capture one model step (built by
    graph/step.py's prepare_step)."""

    spec: ModelSpec
    model: torch.nn.Module
    device: str
    dtype: torch.dtype
    dtype_name: str
    dims: list[list[int]]  # per input, the dims that equal the size
    tolerance: dict[str, float]
    backend: Backend
    # Positions of the inputs that are host values (aclcap/host_values.py), found when the
    # size dims are probed: a property of the step, not of one draw.
    hosts: tuple[int, ...] = ()
    # The step pins its own size (`if x.shape[0] == 8`), as its trace found: its size dims
    # are only suggested dynamic (compiles.mark_size_dims), never required.
    size_suggested: bool = False

    def mark(self, args: tuple, size: int) -> tuple:
        """`args` with their size dims marked dynamic for torch.compile, as the trace did."""
        return mark_size_dims(args, self.dims, size, self.size_suggested)

    def inputs(self, size: int) -> tuple:
        """Fresh inputs of one step at `size`."""
        return make_step_inputs(self.spec, size, self.device, self.dtype)

    def pad(self, args: tuple, size: int, target: int) -> tuple:
        """`args` padded from `size` tokens up to `target`: by the model file's pad_inputs
        where it has one, else by repeating the last token (graph/padding.py)."""
        if self.spec.pad_inputs is not None:
            return pad_step_inputs(self.spec, args, size, target)
        return pad_to(args, self.dims, size, target)


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
    # The inputs the graph was captured on: its host values (and what the step computed
    # from them) are frozen in it, and replays on other values are compared against these.
    draw: tuple | None = None


@dataclass
class BackendSummary:
    """What a backend did, for the mechanism line and the JSON `backend` object. A fact
    this backend or run does not have stays None and is left out of the JSON; the field
    order is the JSON's key order."""

    compile_backend: str | None = None  # what torch.compile used
    inductor_configs: dict[str, Any] | None = None  # aoti: beyond Inductor's defaults
    compiles: int | None = None  # device graphs: compiles over the warm-up
    graph_api: str | None = None  # device graphs: the graph class used
    artifact: str | None = None  # aoti: the first artifact's path
    artifact_bytes: int | None = None  # aoti: all artifacts together
    cache_hit: bool | None = None  # aoti: every artifact came from the cache
    compile_s: float | None = None  # aoti: export and compile (or cache load) time
    artifacts: list[dict[str, Any]] | None = None  # aoti: one per exported size range
    cache_note: str | None = None  # aoti: a cached artifact that had to be rebuilt
    guard: str | None = None  # aoti: the size guard that split the ranges
    capture_order: list[int] | None = None  # sizes as captured (largest first)
    export_failed: str | None = None  # inductor: why torch.export could not take the step
    aoti_refused: str | None = None  # inductor: why AOTInductor cannot carry the export
    ranks: int | None = None  # --nproc
    collectives: list[dict[str, list[dict]]] | None = None  # --nproc: each rank's

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class Backend(Protocol):
    mechanism: str  # "aclgraph", "cudagraph" or "aoti"
    compile_backend: Any  # what torch.compile uses (on cpu: only to record recompiles)
    # True where torch.compile's code is not captured, only its guards recorded (aoti): the
    # trace's Dynamo pass over every size then fills the compile log, and capture takes it
    # as it is instead of tracing the step again.
    compile_log_in_trace: bool
    # The last capture's time by phase, in order, where the backend tells them apart
    # (aoti: compile_log, export, compile_or_load, capture); empty where it does not.
    phases_s: dict[str, float]

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None,
                log: CompileLog | None = None) -> list[Captured]:
        """Capture one step per size (largest first), or raise CaptureError; with `log`,
        record every compile torch.compile makes of the step across the sizes."""
        ...

    def summary(self) -> BackendSummary:
        """Backend facts for the report (cache hit, artifact, graph API)."""
        ...
