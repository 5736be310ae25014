"""check-meta's options as one frozen value: built once by the CLI, passed whole to the
runner (a new option is one field here, its flag, and the code that reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


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
    use_cache: bool = True  # False: --no-cache, every op is checked afresh

    # Every field either changes a verdict (keyed: cache_factors() reads it; the result
    # cache hashes the model files' content besides) or not, with the reason. A test
    # fails on a field in neither, so a new option has to decide.
    CACHE_KEYED: ClassVar[frozenset[str]] = frozenset(
        {"device", "strict", "dtypes", "samples_from", "shapes"})
    CACHE_IGNORED: ClassVar[dict[str, str]] = {
        "libs": "each op is keyed on the files that register its kernels, meta and samples "
                "instead: another library loaded beside it re-checks nothing",
        "namespaces": "they pick the ops; each op's row is keyed on its own",
        "timeout_s": "a deadline of the run, not a property of the op: a timed-out row "
                     "is never cached",
        "use_cache": "says whether the cache is read, not what a verdict is",
    }

    def cache_factors(self) -> dict[str, Any]:
        """The options that enter every row's cache key: what changes a verdict."""
        return {"device": self.device, "strict": self.strict, "dtypes": list(self.dtypes),
                "samples_from": list(self.samples_from), "shapes": self.shapes}
