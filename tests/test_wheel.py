"""What a user installs: the built wheel holds every package and the kernel sources, and
from a fresh venv, outside the checkout, build, check-meta and capture work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(out)], check=True,
                   capture_output=True, text=True)
    (found,) = out.glob("aclcap-*.whl")
    return found


def test_wheel_holds_every_package_and_kernel_source(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.parent.relative_to(ROOT)) for top in ("aclcap", "aclcap_ops")
                for p in (ROOT / top).rglob("__init__.py")}
    for package in packages:
        assert f"{package}/__init__.py" in names, f"{package} left out of the wheel"
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "aclcap_ops" / "csrc").iterdir()}
    assert sources <= names
    assert "aclcap/graph/backends/aoti.py" in names  # the package a hand-kept list once lost
    assert not any(n.startswith(("tests/", "examples/")) for n in names)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed. Its dependencies (torch and the rest) are this
    environment's, linked in one by one, so no multi-GB download or reinstall; the
    checkout's own aclcap (an editable install) is left out, so pip installs the wheel."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(root)}))
    deps = root / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not entry.name.lower().startswith(("aclcap", "__editable__", "_aclcap")):
            (deps / entry.name).symlink_to(entry)
    (site / "deps.pth").write_text(f"{deps}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"),
                    "install", "--no-deps", "-q", str(wheel)], check=True, cwd=root,
                   env=_clean_env())
    return root


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH: nothing of the checkout may leak into the venv."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**_clean_env(), "COLUMNS": "200"}
    # The wheel's kernel sources hash to the checkout's: the build is found up to date
    # there only if every source file made it into the wheel.
    env["ACLCAP_BUILD_DIR"] = env.get("ACLCAP_BUILD_DIR", str(ROOT / "build"))
    return subprocess.run([str(venv / "bin" / "aclcap"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_installed_wheel_works_outside_the_checkout(venv, tmp_path):
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import aclcap, aclcap_ops; print(aclcap.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True,
                           env=_clean_env())
    assert str(venv) in where.stdout and str(ROOT) not in where.stdout
    build = _run(venv, tmp_path, "build", "--json", "build.json")
    assert build.returncode == 0, build.stderr
    assert "up to date" in build.stdout
    meta = _run(venv, tmp_path, "check-meta", "--device", "cpu")
    assert meta.returncode == 0, meta.stderr
    assert "9 ops: 9 pass" in meta.stdout
    assert "Failed to initialize NumPy" not in meta.stderr
    # a copy outside the checkout: the session's cached artifact of the same exported
    # program serves it (the cache finds artifacts by program), so no compile is repeated
    shutil.copy(ROOT / "examples" / "tiny_llama.py", tmp_path / "model.py")
    capture = _run(venv, tmp_path, "capture", "model.py", "--device", "cpu", "--shapes", "1,2")
    assert capture.returncode == 0, capture.stdout + capture.stderr
    assert "mechanism: aoti" in capture.stdout
