"""The pre-commit hook: .pre-commit-hooks.yaml is a valid manifest, and its hook, run by
pre-commit in a temp git repo, fails on a staged meta impl with a concrete size and passes
on a clean one. The hook runs as `language: system` on this venv's aclcap: pre-commit's
`language: python` would pip-install aclcap and torch into a fresh env (network, minutes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

MANIFEST = ROOT / ".pre-commit-hooks.yaml"


def test_hook_manifest_is_valid():
    clientlib = pytest.importorskip("pre_commit.clientlib")  # the dev extra has it
    (hook,) = clientlib.load_manifest(str(MANIFEST))
    assert hook["id"] == "aclcap-lint" and hook["language"] == "python"
    assert hook["entry"].startswith("aclcap check-meta --lint")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_hook_runs_under_pre_commit(tmp_path: Path):
    clientlib = pytest.importorskip("pre_commit.clientlib")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (hook,) = clientlib.load_manifest(str(MANIFEST))
    aclcap = Path(sys.executable).with_name("aclcap")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    types = ", ".join(hook["types_or"])
    (repo / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n"
        f"  - id: {hook['id']}\n    name: {hook['name']}\n"
        f"    entry: {aclcap} {hook['entry'].removeprefix('aclcap ')}\n"
        f"    language: system\n    types_or: [{types}]\n    require_serial: true\n")
    shutil.copy(ROOT / "tests" / "fixtures" / "badops.cpp", repo / "ops.cpp")
    (repo / "README.txt").write_text("not linted\n")
    _git(repo, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache")}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=300)

    failed = run()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "ops.cpp:29:32: ACL101" in failed.stdout
    text = (repo / "ops.cpp").read_text()
    (repo / "ops.cpp").write_text(text.replace(
        "return at::empty({x.size(0), x.size(1)}, x.options());",
        "return at::empty_symint(x.sym_sizes(), x.options());"))
    _git(repo, "add", ".")
    passed = run()
    assert passed.returncode == 0, passed.stdout + passed.stderr
