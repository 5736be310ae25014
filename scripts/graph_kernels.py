"""Device check: how many kernels one replay of a captured graph launches when aclcap
captures the torch.compile'd step (inductor) against the same step compiled with Dynamo's
eager backend (eager kernels), both through aclcap's own DeviceGraphBackend. Fewer kernels
in the compiled graph prove that the compiled code, not eager kernels, was captured.
Counted with torch.profiler over one replay (CUPTI reports each kernel a graph launches).
Usage: python scripts/graph_kernels.py MODEL.py SIZE [DEVICE] [--json PATH]; prints JSON, or
writes it to PATH."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from aclcap.graph.backends.device import DeviceGraphBackend
from aclcap.graph.options import StepOptions
from aclcap.graph.step import prepare_step


def kernels_per_replay(model_path: str, size: int, device: str, compile_backend: str) -> int:
    step = prepare_step(StepOptions(model=model_path, device=device))
    backend = DeviceGraphBackend(device, compile_backend=compile_backend)
    (captured,) = backend.capture(step, [size])
    captured.replay(captured.static_inputs)
    torch.accelerator.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        captured.replay(captured.static_inputs)
        torch.accelerator.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main() -> None:
    args = sys.argv[1:]
    path = None
    if "--json" in args:
        i = args.index("--json")
        path, args = args[i + 1], args[:i] + args[i + 2:]
    model, size = args[0], int(args[1])
    device = args[2] if len(args) > 2 else "cuda"
    counts = {name: kernels_per_replay(model, size, device, name)
              for name in ("eager", "inductor")}
    text = json.dumps({"model": model, "size": size, "kernels_per_replay": counts,
                       "compiled_fewer": counts["inductor"] < counts["eager"]})
    if path:
        Path(path).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
