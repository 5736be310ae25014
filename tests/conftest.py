"""Shared fixtures: the bundled library loaded once, and two runners for the CLI: in-process
through typer's CliRunner (most tests: cheap, no torch import per test), and as a real
process (the few end-to-end tests: console script, --debug tracebacks, import cost)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """One AOTI cache per test session: the first capture of a model compiles, later ones
    (and the cache-hit test) reuse it; runs never see a developer's own cache."""
    if "ACLCAP_CACHE_DIR" not in os.environ:
        import tempfile

        os.environ["ACLCAP_CACHE_DIR"] = tempfile.mkdtemp(prefix="aclcap-test-cache-")
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        # Two workers compiling the same graph at once write the same files of Inductor's
        # cache (its keys are the graph's hash): each worker, and what it starts, gets its own.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
            os.environ["ACLCAP_CACHE_DIR"], f"inductor-{worker}")


# Test files by their seconds on the 2-core CI machine, heaviest first (the rest follow in
# their own order). `make test` hands files to its two workers in collection order
# (--no-loadscope-reorder): a heavy file drawn last would leave the other worker idle for
# its whole length, and the tests that capture tiny_llama late find its artifact cached.
HEAVY_FIRST = ("test_transformers.py", "test_synthesize.py", "test_capture.py",
               "test_synth_blind.py", "test_synth_emit.py", "test_bench.py", "test_piecewise.py",
               "test_host_values.py", "test_tp.py", "test_check_meta.py", "test_wheel.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable within a file


BADOPS = ROOT / "tests" / "fixtures" / "badops.py"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def aclcap(*args: str, **env_vars: str) -> Run:
    """Run the CLI in this process. Kernels run in check-meta's worker process anyway, so
    only the parsing, the pipeline and the printing happen here."""
    from typer.testing import CliRunner

    from aclcap.cli import app

    # --debug sets ACLCAP_DEBUG in this process for its workers; CliRunner restores only
    # the variables it was given, so the run's own are given (and restored) too: a leak
    # would keep C++ backtraces in the reasons of every later subprocess test
    debug = {"ACLCAP_DEBUG": os.environ.get("ACLCAP_DEBUG")}
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **debug, **env_vars})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def aclcap_process(*args: str, timeout: float = 600, cwd: Path = ROOT, **env_vars: str) -> Run:
    """Run the installed console script as a user would, in its own process."""
    env = {**os.environ, "COLUMNS": "200", **env_vars}
    exe = Path(sys.executable).with_name("aclcap")
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env)
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def bundled():
    """Import the bundled op library (builds it if stale) and return torch.ops.aclcap."""
    import torch

    import aclcap_ops

    aclcap_ops.load()

    return torch.ops.aclcap
