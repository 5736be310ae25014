"""bench --profile: where a step's time goes, per mode, from torch.profiler. The top ops by
self time as a share of the step, and what the profiler cannot see (generated kernels of
an artifact, Python between ops) as its own row, so the shares add up to the step."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile

from aclcap._quiet import kineto_status_lines_dropped
from aclcap.devices import synchronizer

TOP = 8
PROFILE_STEPS = 10
UNSEEN = "(not seen by the profiler)"


@dataclass
class StepProfile:
    size: int
    mode: str
    step_us: float  # wall time per step while profiling (the profiler adds its own cost)
    top: list[dict] = field(default_factory=list)  # name, self_us per step, share, calls
    kernels_per_step: float | None = None  # device kernels the profiler saw (devices only)


def _short_name(key: str) -> str:
    """Inductor names its graph's event after the graph's hash, a 60-character column."""
    return "Inductor graph (generated code)" if key.startswith("## Call CompiledFxGraph") \
        else key


def profile_step(fn: Callable[[], object], size: int, mode: str, device: str,
                 steps: int = PROFILE_STEPS) -> StepProfile:
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sync = synchronizer(device)
    with torch.no_grad():
        fn()
        sync()
        with kineto_status_lines_dropped(), profile(activities=activities) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            sync()
            wall = (time.perf_counter() - t0) * 1e6 / steps
    averages = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    averages.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    seen = sum(e.self_cpu_time_total for e in averages) / steps
    top = [{"name": _short_name(e.key), "self_us": e.self_cpu_time_total / steps,
            "share": e.self_cpu_time_total / steps / wall, "calls": e.count / steps}
           for e in averages[:TOP]]
    others = sum(e.self_cpu_time_total for e in averages[TOP:]) / steps
    if others:
        top.append({"name": "(other ops)", "self_us": others, "share": others / wall,
                    "calls": None})
    rest = max(0.0, wall - seen)
    top.append({"name": UNSEEN, "self_us": rest, "share": rest / wall, "calls": None})
    kernels = None
    if device != "cpu":
        kernels = sum(1 for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA) / steps
    return StepProfile(size, mode, wall, top, kernels)
