"""check-meta's options as one frozen value: built once by the CLI, passed whole to the
runner (a new option is one field here, its flag, and the code that reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CheckMetaOptions:
    libs: list[str]  # .so, .py or module names, loaded in order
    namespaces: list[str] | None = None  # None: those the libraries and model files register
    device: str = "cpu"  # where real kernels run (resolved: cpu, cuda or npu)
    timeout_s: float = 60.0  # per op, before it is reported as timed out
    strict: bool = False  # warnings (an unused `!`) fail the op
    dtypes: tuple[str, ...] = ("float32", "bfloat16")  # declared samples, once per dtype
    samples_from: list[str] = field(default_factory=list)  # model files to harvest from
    shapes: list[int] | None = None  # their step sizes (None: each file's SHAPES)
