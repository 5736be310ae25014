"""A warm capture without tracing: the trace report of a step that nothing it depends on
has changed, and the index of its AOTI artifacts, kept by content (as vLLM keys its compile
cache on a hash of the model code and config and skips Dynamo on a hit). On a hit, capture
loads the artifacts and goes straight to replay and comparison, which always run.

Keyed on what decides the trace and the artifacts: the bytes of the Python files in the
model file's folder (itself and what it imports from beside it), the op libraries' files,
the model's weights and buffers (AOTI bakes them in; an unseeded build_model must not reuse
another run's), the sizes, the options that change the trace or the code, the toolchain.
Not keyed: what a step reads from its environment (a variable, a config file elsewhere):
`--no-cache` traces again. Only a full-mode cpu capture with no host values is cached: a
device graph and a piecewise step are compiled by the capture itself, and a step with host
values holds this run's values."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aclcap import _version
from aclcap.build import cache_root
from aclcap.cache_budget import prune, touch
from aclcap.capture.options import CaptureOptions
from aclcap.capture.trace_report import TraceReport
from aclcap.graph.backends.aoti import library_fingerprint
from aclcap.graph.backends.trace_key import tensor_digest
from aclcap.graph.step import StepContext

CACHE_VERSION = "1"  # bump when what an entry holds, or what it is keyed on, changes


@dataclass
class CachedTrace:
    trace: TraceReport
    index_key: str  # the AOTI index of the artifacts (graph/backends/trace_key.py)
    taken: str  # when the trace was taken, local time


def _folder_sources(model_file: Path) -> list[str]:
    """Digests of the Python files in the model file's folder: the model file and what it
    may import from beside it (a step split over two files, as examples/decode_math.py
    is). The whole folder, not what this process imported: a module imported earlier in
    the process, from elsewhere, would hide an edit of its namesake here."""
    files = sorted(model_file.resolve().parent.glob("*.py"))
    return [f"{f.name}:{hashlib.sha256(f.read_bytes()).hexdigest()}" for f in files]


def capture_key(step: StepContext, options: CaptureOptions, sizes: list[int]
                ) -> str | None:
    """The key of this capture's trace, or None where it is not cached."""
    if not options.use_cache or step.device != "cpu" or options.graph_mode != "full" \
            or options.nproc or step.hosts:
        return None
    state = [f"{name}:{list(t.shape)}:{t.dtype}:{tensor_digest(t)}" for name, t in
             [*step.model.named_parameters(), *step.model.named_buffers()]]
    parts = [CACHE_VERSION, _version.code_fingerprint(), torch.__version__,
             torch.backends.cpu.get_cpu_capability(), step.spec.path.resolve().name,
             *_folder_sources(step.spec.path),
             library_fingerprint(step.spec), repr(sorted(sizes)), step.dtype_name,
             repr(options.compile_backend), repr(options.cache_factors()), *state]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _path(key: str) -> Path:
    return cache_root() / "capture" / f"{key}.json"


def load(key: str) -> CachedTrace | None:
    """The entry, or None where there is none or it cannot be read (a miss, never a crash)."""
    try:
        data = json.loads(_path(key).read_text())
        hit = CachedTrace(TraceReport.from_dict(data["trace"]), data["index_key"],
                          data["taken"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    touch(_path(key))
    return hit


def store(key: str, trace: TraceReport, index_key: str) -> None:
    """Written atomically (a temp file renamed over the entry); an unwritable cache is
    skipped: the next run traces again."""
    path = _path(key)
    entry = {"trace": trace.to_dict(), "index_key": index_key,
             "taken": time.strftime("%Y-%m-%d %H:%M:%S")}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(entry))
        partial.replace(path)
    prune()


def as_dict(hit: CachedTrace | None) -> dict[str, Any] | None:
    """JSON `trace_cache`: where the trace came from the cache, when it was taken."""
    return None if hit is None else {"hit": True, "taken": hit.taken}
