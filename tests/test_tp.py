"""Tensor-parallel capture and bench on 2 gloo ranks (cpu): the ranks are real processes of
torch.distributed, the collectives real; planted rank-divergent models are named, not hung,
and no rank process outlives a run."""

from __future__ import annotations

import os
import pickle
import re
import socket
from pathlib import Path

import pytest

from tests.conftest import ROOT, aclcap, aclcap_process

TP = str(ROOT / "examples" / "tp_llama.py")
DIVERGENT = str(ROOT / "tests" / "models" / "tp_divergent.py")
HOST_SCALE = str(ROOT / "tests" / "models" / "tp_host_scale.py")


def _rank_processes() -> list[int]:
    """Processes of any aclcap rank run still alive (they carry ACLCAP_RANK_RUN)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if b"ACLCAP_RANK_RUN=" in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_tp_llama_captures_on_two_ranks_and_matches_eager():
    run = aclcap("capture", TP, "--nproc", "2", "--shapes", "1,2,4,8", "--pad", "--device",
                 "cpu", "--json", "-")
    assert run.code == 0, run.stderr
    doc = run.json()
    rows = doc["results"]
    assert sorted({r["rank"] for r in rows}) == [0, 1]
    assert all(r["status"] == "pass" and r["mechanism"] == "aoti" for r in rows)
    for rank in (0, 1):  # every exact and padded size on each rank
        assert sorted(r["size"] for r in rows if r["rank"] == rank) == list(range(1, 9))
    per_rank = doc["backend"]["collectives"]
    assert per_rank[0] == per_rank[1] or all(  # same ops and shapes; lines may differ
        [(c["op"], c["shape"]) for c in per_rank[0][s]] ==
        [(c["op"], c["shape"]) for c in per_rank[1][s]] for s in per_rank[0])
    ops = [c["op"] for c in per_rank[0]["8"]]
    assert ops.count("all_reduce") == 1 + 2 * 2 and ops[-1] == "all_gather_into_tensor"
    assert "2 ranks (worst rank per size)" in run.stderr
    assert not _rank_processes()


def test_ranks_draw_the_same_host_values_and_each_names_the_frozen_one():
    """make_inputs draws its host float with Python's `random`: every rank must see the
    value the others see (as one scheduler's sequence lengths), at capture and per replay."""
    run = aclcap("capture", HOST_SCALE, "--nproc", "2", "--shapes", "2", "--device", "cpu",
                 "--json", "-")
    assert run.code == 1, run.stderr
    rows = run.json()["results"]
    assert sorted(r["rank"] for r in rows) == [0, 1] and all(r["status"] == "fail" for r in rows)
    first = [r["reasons"][0] for r in rows]
    assert first[0].startswith("frozen at capture: aten::mul(other) at tp_host_scale.py:17, "
                               "from input scale: captured ")
    assert first[0] == first[1]  # the same captured and replayed values on both ranks
    assert not _rank_processes()


def test_bench_on_two_ranks_reports_the_slowest_rank():
    run = aclcap("bench", TP, "--nproc", "2", "--shapes", "2", "--modes", "eager,graph",
                 "--rounds", "5", "--device", "cpu", "--json", "-")
    assert run.code == 0, run.stderr
    rows = run.json()["results"]
    assert [r["mode"] for r in rows] == ["eager", "graph"]
    for r in rows:
        assert [p["rank"] for p in r["per_rank"]] == [0, 1]
        # each round's time is its slowest rank's, so the median is at least every rank's
        assert r["step_median_us"] >= max(p["step_median_us"] for p in r["per_rank"])
    assert "each round the slowest rank's" in run.stderr


@pytest.mark.parametrize("mode,named", [
    ("extra", "rank 0 issues none (its step ends after 1); rank 1 issues all_reduce float32 "
              "[2, 8] (group 0) at tp_divergent.py:34"),
    ("shape", "rank 0 issues all_reduce float32 [2, 8] (group 0) at tp_divergent.py:37; "
              "rank 1 issues all_reduce float32 [2, 4] (group 0) at tp_divergent.py:37"),
])
def test_ranks_issuing_different_collectives_are_named_before_any_step(mode, named):
    run = aclcap("capture", DIVERGENT, "--nproc", "2", "--device", "cpu", "--json", "-",
                 ACLCAP_TEST_DIVERGE=mode)
    assert run.code == 1, run.stderr
    doc = run.json()
    assert {r["rank"] for r in doc["results"]} == {0, 1}
    assert all(r["status"] == "fail" for r in doc["results"])
    assert named in doc["results"][0]["reasons"][0]
    assert "across ranks: size 2: ranks issue different collectives at #2" in run.stderr


def test_a_deadlock_is_diagnosed_within_the_timeout_and_no_rank_is_left():
    # 30 s: beside another heavy process (issue 50), rank 1 was still reading its stack
    # positions before the extra all_reduce when a 12 s budget ran out
    run = aclcap_process("capture", DIVERGENT, "--nproc", "2", "--device", "cpu",
                         "--timeout", "30", timeout=180, ACLCAP_TEST_DIVERGE="c10d")
    assert run.code == 1, run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert "deadlock: no rank progress within --timeout 30 s" in line
    # rank 1 either still waits in its extra all_reduce or has raised from it by then; on a
    # loaded machine its stack may be dumped in c10d's logging wrapper around the call
    assert re.search(r"rank 1 waits in (all_reduce \(distributed_c10d|wrapper \(c10d_logger)"
                     r"\.py\) at tp_divergent\.py:39", line) or "rank 1 raised" in line, line
    assert not _rank_processes()


@pytest.mark.parametrize("mode,message", [
    ("raise", "rank 1: model file"),
    ("none", "the step issues no collective over its process group"),
])
def test_rank_errors_are_one_line_exit_2(mode, message):
    run = aclcap("capture", DIVERGENT, "--nproc", "2", "--device", "cpu",
                 ACLCAP_TEST_DIVERGE=mode)
    assert run.code == 2, run.stderr
    assert message in run.stderr.strip().splitlines()[-1]
    assert not _rank_processes()


def test_nproc_bad_input_exits_2():
    run = aclcap("capture", TP, "--nproc", "0", "--device", "cpu")
    assert run.code == 2 and "Invalid value for '--nproc'" in run.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = aclcap("capture", TP, "--nproc", "2", "--device", "cpu", "--port", str(port))
    assert run.code == 2, run.stderr
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in run.stderr


def _slow_phases(info, seconds: float, phases: int) -> int:
    """A rank whose phases each take `seconds`: slower in all than the timeout, never stuck."""
    import time

    for n in range(phases):
        info.phase(f"phase {n}")
        time.sleep(seconds)
    return info.rank


def test_the_timeout_bounds_a_phase_not_the_whole_run():
    from aclcap.graph.distributed import launch

    # 3 phases of 2 s under a 4 s timeout: 6 s in all, each phase within the timeout
    assert launch(_slow_phases, {"seconds": 2.0, "phases": 3}, 2, "cpu", timeout=4) == [0, 1]
    assert not _rank_processes()


def test_ranks_busy_in_their_own_work_are_a_timeout_not_a_deadlock(tmp_path):
    from aclcap.graph.distributed import _diagnosis

    busy = ('Thread 0x1 (most recent call first):\n'
            '  File "/usr/lib/python3.11/subprocess.py", line 1196 in communicate\n'
            '  File "/x/torch/_inductor/cpp_builder.py", line 10 in build\n')
    waits = ('Thread 0x1 (most recent call first):\n'
             '  File "/x/torch/distributed/distributed_c10d.py", line 2 in all_reduce\n')
    for rank in range(2):
        (tmp_path / f"rank{rank}.stack").write_text(busy)
        (tmp_path / f"rank{rank}.phase").write_text("capturing size 8 (aoti)")
    slow = _diagnosis(tmp_path, 2, 120, None)
    assert slow.startswith("timeout: no rank progress within --timeout 120 s, and no rank "
                           "waits in a collective: rank 0 is busy in communicate"), slow
    assert "not a deadlock: raise --timeout" in slow
    (tmp_path / "rank1.stack").write_text(waits)
    stuck = _diagnosis(tmp_path, 2, 120, None)
    assert stuck.startswith("deadlock: no rank progress within --timeout 120 s"), stuck
    assert "rank 1 waits in all_reduce (distributed_c10d.py)" in stuck
    # one rank waits for the others' results (not in a collective), the other raised
    (tmp_path / "rank0.stack").write_text(
        'Thread 0x1 (most recent call first):\n'
        '  File "/x/aclcap/graph/distributed.py", line 9 in exchange\n')
    (tmp_path / "rank1.result").write_bytes(pickle.dumps(("capture", "Connection reset")))
    peer = _diagnosis(tmp_path, 2, 120, None)
    assert peer.startswith("deadlock: no rank progress within --timeout 120 s"), peer
    assert "rank 0 waits for the other ranks" in peer and "rank 1 raised" in peer
