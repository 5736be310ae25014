"""The options capture and bench share, as one frozen record built once by the CLI and
passed whole to the step, the backend, the `--nproc` ranks and the AOTI cache key (as
vLLM's CompilationConfig travels, with its compute_hash and its ignored factors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

# --max-autotune: Inductor benchmarks its C++ GEMM template against ATen's per GEMM shape,
# and freezing folds the weights in as constants so the template can prepack them.
# Measured on tiny_llama here (one run, interleaved): graph/eager 0.30 -> 0.13 at size 1,
# 0.41 -> 0.31 at size 8; the first compile 17 s -> 54 s.
MAX_AUTOTUNE = {"max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN",
                "freezing": True}


@dataclass(frozen=True)
class StepOptions:
    """What builds one step and its backend. `model` None: bench's default model file."""

    model: str | None = None
    shapes: tuple[int, ...] | None = None  # None: the model file's SHAPES
    device: str = "auto"
    dtype: str = "float32"
    compile_backend: str | None = None  # None: the backend's default
    max_autotune: bool = False
    use_cache: bool = True  # False: --no-cache, the AOTI artifact is compiled afresh
    nproc: int | None = None  # --nproc: ranks of torch.distributed
    timeout: float = 120.0  # --nproc: seconds before a silent rank is diagnosed
    port: int = 0  # --nproc: the TCPStore's port (0: any free one)
    graph_mode: str = "full"  # full: one graph per size; piecewise: split at splitting ops
    split_ops: tuple[str, ...] | None = None  # --split-ops; None: the model's SPLITTING_OPS
    cpu_mechanism: str = "auto"  # auto: aoti, inductor where torch.export fails
    # --fakes: fake impls (the file `check-meta --synthesize` writes) loaded after the model
    # file's import, which loads the ops they register on
    fakes: tuple[str, ...] = ()

    # Every field is either keyed (it changes the artifact's code: cache_factors() reads it)
    # or ignored, with the reason. A test fails on a field in neither, so a new option has
    # to decide whether it changes the artifact.
    CACHE_KEYED: ClassVar[frozenset[str]] = frozenset({"max_autotune"})
    CACHE_IGNORED: ClassVar[dict[str, str]] = {
        "model": "the exported program is keyed instead (its code, weights and signature): "
                 "a file that reads its environment would reuse another graph's artifact",
        "shapes": "the artifact serves every size of its exported range",
        "device": "only cpu has an AOTI backend",
        "dtype": "in the exported program's weights and signature",
        "compile_backend": "on cpu it only records recompiles: the artifact is Inductor's",
        "use_cache": "says whether the key is looked up, not what it names",
        "nproc": "each rank's exported program is keyed on its own",
        "timeout": "a deadline of the launcher, not of the code",
        "port": "where the ranks meet, not what they compile",
        "graph_mode": "piecewise artifacts are keyed on each piece's own exported program",
        "split_ops": "they change the pieces, whose exported programs are keyed",
        "cpu_mechanism": "an inductor capture writes no artifact: Inductor keys its own",
        "fakes": "keyed through the exported program's custom op calls (their fake outputs) "
                 "and, for the trace, the files' bytes (library_fingerprint)",
    }

    def inductor_configs(self) -> dict[str, Any]:
        """What aoti_compile_and_package is given beyond its defaults."""
        return dict(MAX_AUTOTUNE) if self.max_autotune else {}

    def cache_factors(self) -> dict[str, Any]:
        """The options that enter the AOTI cache key (next to the exported program, the
        torch and aclcap versions and the op libraries): what changes the artifact's code."""
        return self.inductor_configs()


GRAPH_MODES = ("full", "piecewise")
CPU_MECHANISMS = ("auto", "aoti", "inductor")


def parse_cpu_mechanism(name: str) -> str:
    """`--cpu-mechanism`, checked before torch is imported."""
    from aclcap.errors import UsageError

    if name not in CPU_MECHANISMS:
        raise UsageError(f"--cpu-mechanism {name}: choose auto (aoti, and inductor where "
                         "torch.export cannot take the step), aoti or inductor")
    return name


def parse_graph_mode(mode: str, split_ops: str | None, several: bool = False
                     ) -> tuple[str, tuple[str, ...] | None]:
    """`--graph-mode` (bench: `several` comma-separated, e.g. full,piecewise) and
    `--split-ops a,b`, checked before torch is imported; bad input raises UsageError naming
    the fix. Returns the modes in a fixed order, comma-joined, and the split ops."""
    from aclcap.errors import UsageError

    modes = [m.strip() for m in mode.split(",") if m.strip()] if several else [mode]
    if not modes or any(m not in GRAPH_MODES for m in modes):
        listed = "full,piecewise (comma-separated)" if several else "full"
        raise UsageError(f"--graph-mode {mode}: choose {listed} (one graph per size) or "
                         "piecewise (split at the splitting ops, a graph per piece per size)")
    joined = ",".join(m for m in GRAPH_MODES if m in modes)
    if split_ops is None:
        return joined, None
    if "piecewise" not in modes:
        raise UsageError("--split-ops names where piecewise capture splits: add "
                         "--graph-mode piecewise")
    ops = tuple(o.strip() for o in split_ops.split(",") if o.strip())
    if not ops or any("::" not in o for o in ops):
        raise UsageError(f"--split-ops {split_ops!r}: give ops as namespace::name, "
                         "comma-separated, e.g. --split-ops aclcap::paged_attention")
    return joined, ops
