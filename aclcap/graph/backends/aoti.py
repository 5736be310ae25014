"""cpu: no device graphs exist on a CPU, so the traced step is "captured" as one
AOTInductor artifact (torch.export with the size dim dynamic, then
aoti_compile_and_package): a C++ replay with no Python dispatch per op. One artifact
serves every size; it is cached on disk under a key of everything that changes it."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import aclcap
from aclcap.errors import CaptureError, first_line
from aclcap.graph.backends.base import Captured
from aclcap.graph.export import export_step
from aclcap.graph.model import ModelSpec
from aclcap.graph.step import StepContext
from aclcap.meta.libload import BUNDLED


def default_cache_dir() -> Path:
    return Path(os.environ.get("ACLCAP_CACHE_DIR", Path.home() / ".cache" / "aclcap")) / "aoti"


def _library_fingerprint(spec: ModelSpec) -> str:
    """What the artifact calls into: the op libraries' files (the bundled one's stamp)."""
    parts = []
    for lib in spec.op_libraries:
        path = spec.path.parent / lib
        if path.is_file():
            parts.append(hashlib.sha256(path.read_bytes()).hexdigest())
        elif lib == BUNDLED:
            from aclcap.build import bundled_fingerprint

            parts.append(bundled_fingerprint())
        else:
            parts.append(lib)
    return "|".join(parts)


def cache_key(spec: ModelSpec, dtype: torch.dtype, dims: list[list[int]]) -> str:
    h = hashlib.sha256()
    for part in (spec.source_sha256, torch.__version__, aclcap.__version__, str(dtype),
                 repr(dims), _library_fingerprint(spec)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


class AotiBackend:
    mechanism = "aoti"

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = Path(cache_dir or default_cache_dir())
        self.facts: dict[str, Any] = {}

    def summary(self) -> dict[str, Any]:
        return dict(self.facts)

    def _compile(self, model: torch.nn.Module, example: tuple, dims: list[list[int]],
                 target: Path) -> None:
        try:
            exported = export_step(model, example, dims)
        except Exception as exc:
            raise CaptureError(f"torch.export failed: {first_line(exc)}") from exc
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial.pt2")
        try:
            torch._inductor.aoti_compile_and_package(exported, package_path=str(partial))
        except Exception as exc:
            partial.unlink(missing_ok=True)
            raise CaptureError(f"AOTInductor compile failed: {first_line(exc)}") from exc
        partial.replace(target)  # atomic: a concurrent run never loads half a file

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None) -> list[Captured]:
        spec, dims = step.spec, step.dims
        artifact = self.cache_dir / f"{spec.path.stem}-{cache_key(spec, step.dtype, dims)}.pt2"
        hit = artifact.exists()
        runner = None
        captured = []
        for size in sorted(sizes, reverse=True):
            if on_size:
                on_size(size)
            if runner is None:  # compile (or find in the cache) while the first size is shown
                start = time.perf_counter()
                if not hit:
                    # Export at a size >= 2: export specializes a dim whose example is 1.
                    self._compile(step.model, step.inputs(max(max(sizes), 2)), dims, artifact)
                self.facts = {"artifact": str(artifact),
                              "artifact_bytes": artifact.stat().st_size, "cache_hit": hit,
                              "compile_s": round(time.perf_counter() - start, 3)}
                runner = torch._inductor.aoti_load_package(str(artifact))
            static = step.inputs(size)
            t0 = time.perf_counter()
            with torch.no_grad():
                runner(*static)  # first run at this size: what "capture" costs once compiled
            captured.append(Captured(size, (time.perf_counter() - t0) * 1e6,
                                     artifact.stat().st_size, _replayer(runner), static))
        self.facts["capture_order"] = [c.size for c in captured]
        return captured


def _replayer(runner: Callable) -> Callable[[tuple], Any]:
    def replay(args: tuple) -> Any:
        with torch.no_grad():
            return runner(*args)

    return replay
