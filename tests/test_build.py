"""aclcap build: incremental no-op builds, skip reasons per backend, compile errors."""

from __future__ import annotations

import time

from aclcap.build import build, default_build_dir
from tests.conftest import aclcap, aclcap_process


def test_second_build_is_up_to_date_and_fast(bundled):
    start = time.perf_counter()
    report = build(default_build_dir())
    elapsed = time.perf_counter() - start
    cpu = report.targets[0]
    assert (cpu.name, cpu.status) == ("cpu", "up_to_date")
    assert elapsed < 2.0
    start = time.perf_counter()
    run = aclcap_process("build")
    assert time.perf_counter() - start < 2.0  # the whole command: no torch import, no ninja
    assert run.code == 0
    run = aclcap("build", "--json", "-")
    assert run.code == 0
    assert "up to date" in run.stderr
    targets = {t["name"]: t for t in run.json()["results"]}
    assert targets["cpu"]["status"] == "up_to_date"
    assert targets["cpu"]["output"].endswith("aclcap_ops_cpu.so")


def test_device_targets_are_skipped_with_a_reason(bundled):
    targets = {t.name: t for t in build(default_build_dir()).targets}
    assert targets["cuda"].status == "skipped" and targets["cuda"].reason
    assert targets["npu"].status == "skipped"
    assert targets["npu"].reason == "CANN not found: ASCEND_HOME_PATH unset"


def test_compile_error_shows_first_error_lines_exit_2(tmp_path):
    src = tmp_path / "lib"
    (src / "csrc").mkdir(parents=True)
    (src / "csrc" / "broken.cpp").write_text("int main() { return undefined_symbol_xyz; }\n")
    run = aclcap("build", "--src", str(src), "--build-dir", str(tmp_path / "out"))
    assert run.code == 2
    assert "undefined_symbol_xyz" in run.stderr and "error" in run.stderr
    assert "Traceback" not in run.stderr


def test_missing_sources_is_bad_input(tmp_path):
    run = aclcap("build", "--src", str(tmp_path))
    assert run.code == 2
    assert run.stderr.strip().splitlines() == [
        f"error: no C++ sources in {tmp_path}/csrc: point --src at an op library folder"]
