"""Shared fixtures: the bundled library loaded once, and a runner for the real CLI."""

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
BADOPS = ROOT / "tests" / "fixtures" / "badops.py"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def aclcap(*args: str, timeout: float = 600, cwd: Path = ROOT, **env_vars: str) -> Run:
    """Run the installed console script as a user would (a real process: kernels may crash)."""
    env = {**os.environ, "COLUMNS": "200", **env_vars}
    exe = Path(sys.executable).with_name("aclcap")
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env)
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def bundled():
    """Import the bundled op library (builds it if stale) and return torch.ops.aclcap."""
    import torch

    import aclcap_ops  # noqa: F401

    return torch.ops.aclcap
