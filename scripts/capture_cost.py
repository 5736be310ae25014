"""What a cold `aclcap capture --shapes 1,2,4` costs against a plain
`torch.compile(fullgraph=True)` of the same step at the same sizes, per cpu mechanism: whole
processes, each on empty caches (aclcap's and Inductor's), interleaved round by round so
that machine drift falls on every command alike; the medians' ratios are printed.

    python scripts/capture_cost.py MODEL.py [MODEL.py ...] [--rounds 3]
        [--mechanisms auto,inductor] [--aclcap PATH]   (a venv's aclcap: vLLM's, say)

A benchmark, not a test: its figures belong in docs/measurements.md with the machine's load."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The plain compile: the model file's own build_model and make_inputs, the step compiled
# once with its size dims dynamic (as aclcap marks them) and run at every size.
PLAIN = """
import sys, torch
from aclcap.loading.model_file import load_model_file, instantiate_model, probe_inputs, \\
    make_step_inputs
from aclcap.graph.compiles import mark_size_dims
spec = load_model_file(sys.argv[1])
model = instantiate_model(spec, "cpu", torch.float32)
dims, _ = probe_inputs(spec, "cpu", torch.float32)
compiled = torch.compile(model, fullgraph=True)
with torch.no_grad():
    for size in (4, 2, 1):
        compiled(*mark_size_dims(make_step_inputs(spec, size, "cpu", torch.float32), dims,
                                 size))
"""


def timed(command: list[str]) -> float:
    """Seconds of one whole process on empty caches; a failure stops the benchmark."""
    with tempfile.TemporaryDirectory() as aclcap_cache, \
            tempfile.TemporaryDirectory() as inductor_cache:
        env = {**os.environ, "ACLCAP_CACHE_DIR": aclcap_cache,
               "TORCHINDUCTOR_CACHE_DIR": inductor_cache}
        start = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True, env=env)
        took = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {run.returncode}: "
                 f"{(run.stderr or run.stdout).strip().splitlines()[-1:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mechanisms", default="auto,inductor")
    parser.add_argument("--aclcap", default=str(Path(sys.executable).with_name("aclcap")))
    args = parser.parse_args()
    python = str(Path(args.aclcap).with_name("python"))
    mechanisms = args.mechanisms.split(",")
    for model in args.models:
        commands = {"plain": [python, "-c", PLAIN, str(model)]}
        commands |= {m: [args.aclcap, "capture", str(model), "--shapes", "1,2,4",
                         "--cpu-mechanism", m] for m in mechanisms}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, command in commands.items():
                times[name].append(timed(command))
        plain = statistics.median(times["plain"])
        cells = [f"plain {plain:.1f} s"] + [
            f"{m} {statistics.median(times[m]) / plain:.2f}x" for m in mechanisms]
        print(f"{model.name}: " + ", ".join(cells) + f" (median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
