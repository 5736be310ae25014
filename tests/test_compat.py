"""The torch range aclcap supports and the scripts that prove it (scripts/compat_check.sh, the
device check and its rehearsal): the range in pyproject is the range docs/devices.md says
was tested, the device check's requirement check names what is missing, and the scripts refuse
bad arguments in one line before any download or install."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import subprocess
import tomllib

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

from aclcap import _compat
from tests.conftest import ROOT


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_requirement() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(Requirement(d) for d in deps if Requirement(d).name == "torch")


def _tested_rows() -> list[list[str]]:
    """docs/devices.md's "Tested with" table, one list of cells per row."""
    page = (ROOT / "docs" / "devices.md").read_text()
    section = page.split("## Tested with", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if re.match(r"\|\s*2\.\d+", line)]


def test_torch_range_is_2_11_to_2_15() -> None:
    spec = _torch_requirement().specifier
    assert all(spec.contains(v) for v in ("2.11.0", "2.13.0", "2.15.0", "2.11.0+cu130"))
    assert not any(spec.contains(v) for v in ("2.10.0", "2.16.0"))


def test_tested_with_covers_both_ends_of_the_range() -> None:
    """Every row passes each smoke step, and the range's lowest and highest minor have rows:
    widening pyproject's range without running scripts/compat_check.sh fails here."""
    rows = _tested_rows()
    spec = _torch_requirement().specifier
    minors = {Version(r[0].split("+")[0]).minor for r in rows}
    admitted = [m for m in range(0, 30) if spec.contains(f"2.{m}.0")]
    assert {admitted[0], admitted[-1]} <= minors, (admitted, minors)
    for row in rows:
        assert spec.contains(row[0].split("+")[0]), row
        assert all(cell.startswith("pass") for cell in row[2:6]), row


def test_requirement_check_names_what_is_missing_or_out_of_range() -> None:
    check = _load_script("device_requirements").check
    found, unmet = check(md.requires("aclcap") or [])
    assert unmet == [] and any(line.startswith("torch ") for line in found)
    _, unmet = check(["torch>=99", "aclcap-no-such-package>=1", "pytest; extra == 'dev'"])
    assert unmet == [f"torch {torch.__version__} does not satisfy torch>=99",
                     "aclcap-no-such-package is missing (aclcap needs aclcap-no-such-package>=1)"]


def test_accelerator_graph_is_torch_s_where_it_has_one() -> None:
    """torch 2.13 has torch.accelerator.Graph; 2.11 does not, and the device backend then
    takes the device module's own class (compat_check.sh runs the protocol test there)."""
    graph = getattr(torch.accelerator, "Graph", None)
    assert _compat.accelerator_graph() is graph
    if Version(torch.__version__.split("+")[0]) >= Version("2.13"):
        assert graph is not None


@pytest.mark.parametrize(("script", "args", "message"), [
    ("device_check.sh", ["--device", "xpu"],
     "error: --device 'xpu' is not cuda or cpu (cpu is the rehearsal)"),
    ("compat_check.sh", ["2.11"], "error: '2.11' is not a torch release: pass e.g. 2.11.0"),
    ("compat_check.sh", [], "error: usage: scripts/compat_check.sh VERSION | --venv DIR"),
    ("compat_check.sh", ["--venv", "/nonexistent"], "error: no venv at /nonexistent"),
])
def test_scripts_refuse_bad_arguments_in_one_line(script: str, args: list[str],
                                                  message: str) -> None:
    run = subprocess.run(["bash", str(ROOT / "scripts" / script), *args], capture_output=True,
                         text=True, timeout=60)
    assert (run.returncode, run.stderr.strip(), run.stdout) == (2, message, "")


def test_device_check_without_carried_wheels_says_how_to_fetch_them(tmp_path) -> None:
    run = subprocess.run(["bash", str(ROOT / "scripts" / "device_check.sh"), "--device", "cpu",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "ACLCAP_DEVICE_WHEELS": str(tmp_path),
                              "ACLCAP_DEVICE_WORK": str(tmp_path / "work")})
    assert run.returncode == 2
    assert run.stderr.strip() == (f"error: no wheels in {tmp_path}: run "
                                  "scripts/fetch_device_wheels.sh where pip has a network, "
                                  "then carry .whl")
