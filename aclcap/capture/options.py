"""`aclcap capture`'s options: the shared step options and what only capture does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from aclcap.graph.options import StepOptions


@dataclass(frozen=True)
class CaptureOptions(StepOptions):
    # vLLM's rule, which it compiles by (fullgraph=True): a graph break anywhere in the
    # step fails every size, piecewise too; False (--allow-breaks) captures around them
    fullgraph: bool = True
    pad: bool = False  # also replay the sizes between capture sizes, padded
    bisect: bool = False  # on a mismatch, name the first diverging node
    fail_on_recompile: bool = False  # a compile after the first size fails the run

    CACHE_IGNORED: ClassVar[dict[str, str]] = {
        **StepOptions.CACHE_IGNORED,
        "fullgraph": "judges the trace, which the artifact does not come from",
        "pad": "pads inputs to a captured size: the artifact is the same",
        "bisect": "runs after the replay, on the traced graph",
        "fail_on_recompile": "judges the compile log, not the artifact",
    }
