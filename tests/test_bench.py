"""aclcap bench: JSON structure and units, launch counts, baselines, the plot."""

from __future__ import annotations

import json

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from aclcap.bench.baseline import regressions, undecided
from aclcap.bench.caches import MEMORY, CacheLevel, cache_levels, floor_level
from aclcap.bench.options import BenchOptions
from aclcap.bench.run import eager_launches
from aclcap.bench.stats import ci_half_width
from aclcap.loading.model_file import instantiate_model, load_model_file, make_step_inputs
from tests.conftest import ROOT, aclcap, aclcap_process
from tests.perf import assert_median_holds

TINY = str(ROOT / "examples" / "tiny_llama.py")
ARGS = ("--device", "cpu", "--shapes", "1,2", "--modes", "eager,graph", "--rounds", "5")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    run = aclcap("bench", TINY, *ARGS, "--json", "-", "--save-baseline",
                 str(folder / "base.json"), "--plot", str(folder / "plot.png"))
    return run, folder


def test_json_structure_and_units(saved):
    run, _ = saved
    assert run.code == 0, run.stderr
    doc = run.json()
    # at least the rounds asked for: more while a row's spread is wide (--max-time)
    assert doc["command"] == "bench" and doc["device"] == "cpu" and doc["rounds"] >= 5
    keys = {"size", "mode", "mechanism", "step_median_us", "step_p90_us", "host_us",
            "device_us", "launches", "speedup_vs_eager"}
    rows = {(r["size"], r["mode"]): r for r in doc["results"]}
    assert set(rows) == {(1, "eager"), (1, "graph"), (2, "eager"), (2, "graph")}
    for r in rows.values():
        assert keys <= set(r)
        assert 0 < r["step_median_us"] <= r["step_p90_us"]
        assert r["device_us"] is None  # no device events on cpu
    assert rows[(1, "graph")]["mechanism"] == "aoti" and rows[(1, "graph")]["launches"] == 1
    assert rows[(1, "eager")]["speedup_vs_eager"] == 1.0
    lo, hi = rows[(1, "graph")]["speedup_ci"]  # the bootstrap interval of the median
    assert lo <= rows[(1, "graph")]["speedup_vs_eager"] <= hi
    graph = rows[(1, "graph")]
    # the interval's half width, or on a machine too busy for a ±7% interval the row
    # flagged with its relative width (`1.69x ±11%*`, explained under the table)
    half = f"±{ci_half_width(graph['speedup_vs_eager'], (lo, hi)):.0%}*" \
        if graph["unstable"] else f"±{(hi - lo) / 2:.2f}"
    assert half in run.stderr, run.stderr
    assert "removed" in run.stderr and "of eager's step time" in run.stderr


def test_eager_launches_equal_traced_op_count():
    spec = load_model_file(TINY)
    model = instantiate_model(spec, "cpu", torch.float32)
    args = make_step_inputs(spec, 2, "cpu", torch.float32)
    with torch.no_grad():
        traced = make_fx(model)(*[t.clone() for t in args])
    # getitem nodes unpack tuple outputs in the trace: not ops the host launches.
    ops = [n for n in traced.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
    assert eager_launches(model, args) == len(ops) > 100


def test_plot_is_a_png_that_opens(saved):
    import matplotlib.image

    path = saved[1] / "plot.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = matplotlib.image.imread(path).shape
    assert width > 400 and height > 300


def test_baseline_round_trip_passes_and_doctored_baseline_fails(saved):
    _, folder = saved
    base = json.loads((folder / "base.json").read_text())
    assert regressions(base, base, 0.10) == []
    doctored = json.loads(json.dumps(base))
    for r in doctored["results"]:
        if r["mode"] == "graph" and r["size"] == 2:
            r["step_median_us"] /= 4  # a baseline where graph replay was 4x faster
    # A run not flagged unstable has intervals within ±7%: a 4x change is past any doubt.
    # A flagged one may be too noisy to tell, and must say so instead of passing.
    found, unsure = regressions(base, doctored, 0.10), undecided(base, doctored, 0.10)
    assert [line.split(":")[0] for line in found + unsure] == ["size 2 graph/eager"]
    assert found or base["unstable"], unsure
    (folder / "doctored.json").write_text(json.dumps(doctored))
    run = aclcap("bench", TINY, *ARGS, "--baseline", str(folder / "doctored.json"),
                 "--max-regression", "0.5", "--json", str(folder / "rerun.json"))
    rerun_unstable = json.loads((folder / "rerun.json").read_text())["unstable"]
    if "regression: size 2 graph/eager" in run.stdout:
        assert run.code == 1
    else:  # too noisy to tell (either run's interval wide): said so, and not failed
        assert (rerun_unstable or base["unstable"]) and run.code == 0, run.stdout
        assert "undecided: size 2 graph/eager" in run.stdout
    assert "regression: size 1" not in run.stdout  # a rerun of the same code: not flagged


def test_op_microbenchmarks_measure_every_op_against_its_floor(bundled):
    import io

    from rich.console import Console

    import aclcap_ops
    from aclcap.report import opbench as ops_report
    from aclcap_ops import opbench

    rows = opbench.measure_ops([(8, 256)], dtypes=(torch.float32,), rounds=2,
                               min_run_time=0.01)
    assert {r.op for r in rows} == set(opbench.CASES) >= set(aclcap_ops.OPS)
    for r in rows:
        # an op reads at least its main input (float32 here) and its rates are its bytes
        # over its times
        assert r.bytes_moved >= 4 * torch.Size(r.shape).numel(), r
        assert r.achieved_gbps == pytest.approx(r.bytes_moved / r.kernel_us / 1e3), r
        assert r.floor_gbps == pytest.approx(r.bytes_moved / r.floor_us / 1e3), r
    norm = next(r for r in rows if r.op == "rms_norm")
    assert norm.f_rms_norm_us is not None and norm.alloc_us is not None
    assert next(r for r in rows if r.op == "rotary_embedding").alloc_us is None  # in place
    console = Console(width=ops_report.OPS_WIDE, record=True, file=io.StringIO())
    console.print(ops_report.render(rows))
    text = console.export_text()
    for r in rows:  # every row's ratio, as measured, in the table
        assert f"{r.kernel_over_floor:.2f}" in text and r.op in text, (r, text)
    [alone] = opbench.measure_ops([(8, 256)], dtypes=(torch.float32,), rounds=1,
                                  ops=["rms_norm"], min_run_time=0.01, references=False)
    assert alone.reference_us is alone.speedup is alone.f_rms_norm_us is None
    assert alone.kernel_over_floor > 0


@pytest.mark.perf
def test_kernels_sit_between_their_floor_and_twice_it(bundled):
    """A floor is a lower bound by construction (the op's own access pattern over its own
    tensors): a kernel whose median block runs more than 10% under the floor's fastest means
    the floor is wrong (the median: fastest over fastest strays to 0.76 for a kernel at its
    floor on the loaded machine, the in-place floors' blocks spreading widely). The forms a
    graph runs (out= and in-place) must come within 2x of it, bfloat16 included, as the
    table reports it (fastest over fastest): 1.5x held on the Intel machines CI ran on
    before; on an AMD EPYC (Zen, avx512_bf16, 32 MiB L3) fused_add_rms_norm, rms_norm.out
    and rotary_embedding read 1.56 to 1.87x, on the kernels of 2026-12-05 as on today's.
    Measured beyond the last-level cache, where memory traffic is what a floor prices: at
    cache-resident sizes a fused kernel beats torch's own passes on call overhead and loop
    speed alone. Each value is the margin to its bound: negative is a miss."""
    from aclcap_ops import opbench

    # every op's footprint beyond the 32 MiB cache in either dtype (reshape_and_cache's
    # too: at 2048 tokens its float32 rows fit, and torch's copy_ is the slower pass there)
    def measure() -> dict:
        rows = opbench.measure_ops([(4096, 4096)], dtypes=(torch.float32, torch.bfloat16),
                                   rounds=3, min_run_time=0.05, references=False)
        margins = {(r.op, r.dtype, ">= 0.9"): r.kernel_us / r.floor_us - 0.9 for r in rows}
        margins.update({(r.op, r.dtype, "<= 2"): 2.0 - r.kernel_over_floor
                        for r in rows if opbench.writes_in_place(r.op)})
        return margins

    assert_median_holds(measure, lambda margin: margin >= 0, "kernels outside their floor bounds")


@pytest.mark.perf
def test_the_floor_timed_as_its_own_kernel_reads_one(bundled):
    """kernel/floor is a fair statistic only if a kernel that is its floor reads 1: the
    calibration the median-over-fastest quotient failed (1.05 to 1.86 here)."""
    from aclcap_ops import opbench

    def measure() -> dict:
        ratios = {}
        for op in filter(opbench.writes_in_place, opbench.CASES):
            for dtype in (torch.float32, torch.bfloat16):
                [case] = opbench.op_cases(4096, 4096, dtype, [op])
                case.kernel = case.floor
                ratios[(op, str(dtype))] = opbench.measure_case(
                    case, rounds=3, min_run_time=0.05, references=False).kernel_over_floor
        return ratios

    assert_median_holds(measure, lambda ratio: 0.9 <= ratio <= 1.1,
                        "the floor against itself")


def test_pad_times_padded_against_exact_sizes():
    from aclcap.bench.run import run_bench

    report = run_bench(BenchOptions(model=TINY, shapes=(2, 4), device="cpu", modes=("graph",),
                                    rounds=5, pad=True, min_time_s=0.0,
                                    max_time_s=0.0))
    rows = {(r.size, r.mode): r for r in report.rows}
    assert set(rows) == {(2, "graph"), (3, "graph"), (3, "padded"), (4, "graph")}
    cost = report.padding_cost()
    assert cost == {3: pytest.approx(rows[(3, "padded")].step_median_us
                                     / rows[(3, "graph")].step_median_us)}


@pytest.mark.perf
def test_cpu_replay_fixed_cost_beats_eager_on_one_layer():
    """On a one-Linear step almost all time is fixed cost per call: the artifact's replay
    (loader.run, specs read once) must cost less than eager's Python dispatch."""
    from aclcap.bench.run import run_bench

    options = BenchOptions(model=str(ROOT / "examples" / "one_linear.py"), shapes=(1,),
                           device="cpu", modes=("eager", "graph"), rounds=7,
                           min_time_s=0.0)

    def measure() -> dict:
        report = run_bench(options)
        return {"graph": next(r for r in report.rows if r.mode == "graph").speedup_vs_eager}

    assert_median_holds(measure, lambda speedup: speedup > 1.0, "graph replay slower than eager")


@pytest.mark.perf
def test_no_mode_beats_its_floor():
    """A step's floor is its bytes at the measured read bandwidth: a mode more than 10%
    under it means the floor is wrong."""
    from aclcap.bench.run import run_bench

    options = BenchOptions(model=TINY, shapes=(2,), device="cpu", modes=("eager", "graph"),
                           rounds=5, min_time_s=0.0)

    def measure() -> dict:
        return {r.mode: r.over_floor for r in run_bench(options).rows}

    assert_median_holds(measure, lambda over: over > 0.9, "a mode faster than its floor")


def test_floor_of_the_same_bytes_holds_across_sizes():
    """A floor is the fastest of many read passes timed between the modes' blocks: the
    same bytes (tiny_llama's weights are its step's bytes at every size) get the same floor,
    within 30%, whatever the machine's load does to single passes. Judged on one run, not a
    median of tries: a minimum must hold in every run."""
    from aclcap.bench.run import run_bench

    report = run_bench(BenchOptions(model=TINY, shapes=(1, 2, 4, 8), device="cpu",
                                    modes=("eager",), rounds=10, min_time_s=0.0,
                                    max_time_s=0.0))
    totals = [b.total for b in report.step_bytes.values()]
    # the same bytes: the weights, and the embedding rows and inputs that grow with size
    assert max(totals) < 1.01 * min(totals), report.step_bytes
    floors = {r.size: r.floor_us for r in report.rows}
    assert set(floors) == {1, 2, 4, 8} and min(report.floor_passes.values()) >= 10 * 3
    assert max(floors.values()) <= 1.3 * min(floors.values()), \
        (floors, report.read_gbps, report.floor_passes)


@pytest.mark.slow
def test_three_runs_give_size1_speedups_within_30_percent():
    """Reproducibility across processes, as pyperf measures it: three separate `aclcap bench`
    runs of a small model give size-1 speedups within 30% of each other, unless a run is
    flagged unstable (a row's rounds spread, or its speedup's interval is wider than ±7%).
    Not that the 95% intervals overlap: an interval is bootstrapped over one process's
    rounds and bounds that process's noise only, while the machine moves a speedup a few
    percent between processes (1.745-1.761x against 1.801-1.845x, both steady, in one CI
    run: 3% apart, intervals disjoint). Each run times for --min-time's 3 s at least: a
    shared machine's memory slows for seconds at a time, and runs of a fraction of a second
    each timed one such phase, steady in itself and unlike the next run's (1.77x ±2% then
    2.21x ±7% in one CI run)."""
    runs = [aclcap_process("bench", TINY, "--device", "cpu", "--shapes", "1", "--modes",
                           "eager,graph", "--rounds", "5", "--max-time", "5", "--json", "-")
            for _ in range(3)]
    assert all(run.code == 0 for run in runs), [run.stderr[-2000:] for run in runs]
    docs = [run.json() for run in runs]
    graph = [next(r for r in doc["results"] if r["mode"] == "graph") for doc in docs]
    for doc in docs:  # the run is flagged exactly when one of its rows is
        assert doc["unstable"] == any(r["unstable"] for r in doc["results"])
    stable = [g for g, doc in zip(graph, docs, strict=True) if not doc["unstable"]]
    for g in stable:
        lo, hi = g["speedup_ci"]
        assert (hi - lo) / 2 <= 0.07 * g["speedup_vs_eager"], g
    if stable:
        speedups = [g["speedup_vs_eager"] for g in stable]
        # 30%, not 15%: on the idle 2-core machine three steady runs read 1.73x, 2.23x and
        # 1.82x (the same before and after the kernel and capture changes of 2026-12-05):
        # memory phases that last longer than a run move a speedup that far between
        # processes. A tool that did not reproduce at all (2x apart) still fails here.
        assert max(speedups) <= 1.30 * min(speedups), graph


def test_max_autotune_graph_is_named_in_the_title_and_json():
    run = aclcap("bench", str(ROOT / "examples" / "one_linear.py"), "--device", "cpu",
                 "--shapes", "1", "--modes", "eager,graph", "--rounds", "5", "--min-time", "0",
                 "--max-time", "0",
                 "--max-autotune", "--json", "-")
    assert run.code == 0, run.stderr
    assert run.json()["max_autotune"] is True
    assert "(graph mode: aoti, tuned by --max-autotune)" in run.stderr


def test_profile_and_floor_say_where_a_step_goes():
    # its own process: kineto's status lines go to fd 2, which an in-process run never sees
    run = aclcap_process("bench", TINY, "--device", "cpu", "--shapes", "2", "--modes",
                         "eager,graph", "--rounds", "5", "--min-time", "0", "--max-time", "0",
                         "--profile", "--json", "-")
    assert run.code == 0, run.stderr
    doc = run.json()
    profiles = {p["mode"]: p for p in doc["profile"]}
    assert set(profiles) == {"eager", "graph"}
    for p in profiles.values():  # the whole step is accounted for, the unseen part included
        assert p["top"][-1]["name"] == "(not seen by the profiler)"
        assert 0 <= p["top"][-1]["share"] <= 1 and sum(t["share"] for t in p["top"]) >= 0.99
    assert any(t["name"] == "aten::mm" for t in profiles["eager"]["top"])
    step = doc["step_bytes"]["2"]
    # what a step writes: its outputs (the logits), at most plus every input it mutates
    spec = load_model_file(TINY)
    args = make_step_inputs(spec, 2, "cpu", torch.float32)
    with torch.no_grad():
        logits = instantiate_model(spec, "cpu", torch.float32)(*[a.clone() for a in args])
    out_bytes = logits.numel() * logits.element_size()
    assert out_bytes <= step["written_bytes"] <= out_bytes + sum(
        a.numel() * a.element_size() for a in args), step
    gbps = doc["read_gbps"]["2"]
    assert 0.1 < gbps < 10_000, gbps  # a read pass, not a clock or unit error
    total = step["params_bytes"] + step["inputs_bytes"] + step["written_bytes"]
    # which floor it is: the cache level that holds the step's bytes, or memory
    level = floor_level(total, cache_levels())
    assert doc["floor_levels"] == {"2": level}
    for r in doc["results"]:
        assert r["floor_us"] == pytest.approx(total / gbps / 1e3)
        assert r["over_floor"] == pytest.approx(r["step_median_us"] / r["floor_us"])
        assert r["floor_level"] == level
    assert step["params_bytes"] < 11 * 2**20  # the embedding table counts only rows read
    assert "bench --profile, size 2: share of the step by self time" in run.stderr
    said = " ".join(run.stderr.split())
    assert "size 2: a step moves" in said
    assert (f"from the {level} cache (the fastest of" if level != MEMORY else
            "from memory (the fastest of") in said, said
    assert "profiler_start" not in run.stderr and "Completed Stage" not in run.stderr


def test_a_graph_capture_fails_is_never_timed_and_exits_1():
    """Issue 44: bench timed a capture that capture calls stale and said `graph replay
    removed 11%`; issue 50: it then timed it as "not valid". The graph of host_seq_lens
    freezes its seq_lens; the tensor one does not."""
    args = ("--device", "cpu", "--shapes", "2,4", "--pad", "--modes", "eager,graph",
            "--rounds", "5", "--json", "-")
    frozen = aclcap("bench", str(ROOT / "examples" / "host_seq_lens.py"), *args)
    assert frozen.code == 1, frozen.stdout + frozen.stderr
    rows = {(r["size"], r["mode"]): r for r in frozen.json()["results"]}
    assert set(rows) == {(s, m) for s in (2, 3, 4) for m in ("eager", "graph")} | {(3, "padded")}
    # capture's verdict, carried (issue 50 item 8): the frozen value and where it lives
    assert rows[(2, "graph")]["stale"].startswith(
        "`aclcap capture` fails it: frozen at capture: aclcap_example::attention_host_lens"
        "(seq_lens)")
    assert rows[(3, "padded")]["stale"].startswith(
        "`aclcap capture` fails the size 4 graph it pads to: frozen at capture: ")
    for key, row in rows.items():  # a replay capture fails is never timed (issue 50 item 7)
        timed = [row[k] for k in ("step_median_us", "step_p90_us", "host_us")]
        assert timed == [None] * 3 if key[1] != "eager" else None not in timed, row
        assert row["speedup_vs_eager"] is None or key[1] == "eager", row
    text = " ".join(frozen.stderr.split())  # the report, beside the JSON on stdout
    assert "size 2: graph replay is NOT VALID, not timed" in text and "removed" not in text
    live = aclcap("bench", str(ROOT / "examples" / "tensor_seq_lens.py"), *args)
    assert live.code == 0, live.stdout + live.stderr
    assert all(r["stale"] is None for r in live.json()["results"])


LEVELS = (CacheLevel(1, 32 << 10), CacheLevel(2, 1 << 20), CacheLevel(3, 32 << 20))


def test_a_floor_is_timed_at_the_smallest_cache_level_that_holds_its_bytes():
    """Issue 58: a kernel whose bytes fit in a cache beat a floor read from memory. Which
    floor a byte count gets is the selection alone, no timing: the smallest level that holds
    the bytes, memory past the last one, and memory where no cache size is known."""
    expected = {1: "L1", 32 << 10: "L1", (32 << 10) + 1: "L2", 1 << 20: "L2",
                11 << 20: "L3", 32 << 20: "L3", (32 << 20) + 1: MEMORY, 1 << 30: MEMORY}
    assert {n: floor_level(n, LEVELS) for n in expected} == expected
    assert floor_level(1 << 20, LEVELS[::-1]) == "L2"  # in whatever order they come
    assert floor_level(1 << 10, ()) == MEMORY


def test_cache_levels_are_read_from_sysfs_data_caches_only(tmp_path):
    """cpu0's cache directory as Linux lays it out: the instruction cache is no floor's
    level; an entry half there is skipped; no directory, no levels (memory floors)."""
    entries = [("1", "Data", "32K"), ("1", "Instruction", "32K"), ("2", "Unified", "1024K"),
               ("3", "Unified", "32768K"), ("4", "Unified", None)]
    for i, (level, kind, size) in enumerate(entries):
        index = tmp_path / "cache" / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        if size:
            (index / "size").write_text(f"{size}\n")
    assert cache_levels(tmp_path / "cache") == LEVELS
    assert cache_levels(tmp_path / "absent") == ()


def test_an_op_row_whose_bytes_fit_in_a_cache_takes_the_faster_floor():
    """A cache row's floor is the faster of its pattern pass and its cache floor (one call
    moving as many bytes in that cache), its ratio and rate recomputed; a memory row keeps
    its pattern pass. Numbers made up: the choice, not a timing."""
    from aclcap.bench.opfloor import bounded_row
    from aclcap.report.bench import op_floor_line
    from aclcap_ops.opbench import OpBenchRow

    row = OpBenchRow("rotary_embedding", "float32", (32, 4096), (32, 4096), 1 << 20,
                     kernel_us=9.0, reference_us=None, speedup=None, achieved_gbps=0.0,
                     floor_us=10.0, floor_gbps=0.0, kernel_best_us=8.0, kernel_over_floor=0.8,
                     alloc_us=None)
    cached = bounded_row(row, "L3", cache_us=5.0)
    assert (cached.floor_level, cached.floor_us, cached.kernel_over_floor) == ("L3", 5.0, 1.6)
    assert cached.floor_gbps == pytest.approx((1 << 20) / 5.0 / 1e3)
    assert cached.to_dict()["floor_level"] == "L3"  # the JSON row says which floor
    slower = bounded_row(row, "L3", cache_us=12.0)
    assert (slower.floor_us, slower.kernel_over_floor) == (10.0, 0.8)
    memory = bounded_row(row, MEMORY, None)
    assert memory.to_dict() == {**row.to_dict(), "floor_level": MEMORY}
    said = op_floor_line([cached, slower, memory]).plain  # under the --ops table
    assert said.startswith("floors: 2 rows' bytes fit in a cache (L3 2): their floor is the "
                           "faster of the op's own pass and one call moving as many bytes"), said
    assert "1 rows' floor is the op's own pass, from memory" in said


@pytest.mark.perf
def test_kernels_at_cache_resident_shapes_stay_above_their_floor(bundled):
    """Issue 58: on the idle machine 4 of 51 --ops rows ran under their floor at shapes
    whose bytes fit in a cache (rotary_embedding [32, 4096] 0.76x, reshape_and_cache
    [32, 8, 128] 0.73x): their floor's several torch calls, not its bytes, set its time.
    With the cache floor none runs more than 10% under it, as the table reports it (fastest
    block over fastest pass)."""
    from aclcap.bench.opfloor import bound_op_floors
    from aclcap_ops import opbench

    def measure() -> dict:
        rows = bound_op_floors(opbench.measure_ops(
            [(32, 4096), (512, 4096)], rounds=3, min_run_time=0.05, references=False))
        return {(r.op, r.dtype, r.shape): r.kernel_over_floor for r in rows
                if r.floor_level != MEMORY}

    assert_median_holds(measure, lambda ratio: ratio >= 0.9, "kernels under their cache floor")


ONE_SIZE_FROZEN = """\
\"\"\"host_seq_lens.py's decode step with its lengths frozen into the graph at size 2 only:
at size 1 every draw gives the one sequence its whole context, so a graph freezes nothing.\"\"\"
import sys

import torch

sys.path.insert(0, {examples!r})
from decode_math import CONTEXT, attend, build, draw  # noqa: E402


@torch.library.custom_op("aclcap_benchtest::attention_host_lens", mutates_args=())
def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              seq_lens: list[int]) -> torch.Tensor:
    return attend(q, k_cache, v_cache, seq_lens)


@attention.register_fake
def _(q, k_cache, v_cache, seq_lens):
    return torch.empty_like(q)


def build_model(device, dtype):
    return build(attention, device, dtype)


def make_inputs(size, device, dtype):
    x, k, v, lens = draw(size, device, dtype)
    return x, k, v, lens if size > 1 else [CONTEXT]
"""


def test_the_one_size_capture_fails_is_left_untimed_beside_the_sizes_it_passes(tmp_path):
    """Issue 58: a size `aclcap capture` fails is not timed in graph mode at all (its row's
    times and speedup null, capture's reason in `stale`, one line), while its eager row and
    the graph of the size capture passes are timed; bench exits 1."""
    model = tmp_path / "one_size_frozen.py"
    model.write_text(ONE_SIZE_FROZEN.format(examples=str(ROOT / "examples")))
    run = aclcap("bench", str(model), "--device", "cpu", "--shapes", "1,2", "--modes",
                 "eager,graph", "--rounds", "5", "--min-time", "0", "--max-time", "0",
                 "--json", "-")
    assert run.code == 1, run.stdout + run.stderr
    rows = {(r["size"], r["mode"]): r for r in run.json()["results"]}
    assert set(rows) == {(s, m) for s in (1, 2) for m in ("eager", "graph")}
    failed = rows.pop((2, "graph"))
    assert [failed[k] for k in ("step_median_us", "step_p90_us", "host_us", "device_us",
                                "speedup_vs_eager", "speedup_ci", "floor_us")] == [None] * 7
    assert failed["stale"].startswith("`aclcap capture` fails it: frozen at capture: "
                                      "aclcap_benchtest::attention_host_lens(seq_lens)")
    assert "\n" not in failed["stale"]
    for row in rows.values():  # the eager rows and the graph capture passes: timed
        assert row["stale"] is None and 0 < row["step_median_us"] <= row["step_p90_us"], row
    assert rows[(1, "graph")]["speedup_vs_eager"] is not None
    said = " ".join(run.stderr.split())
    assert "size 2: graph replay is NOT VALID, not timed: `aclcap capture` fails it" in said
    assert "size 1: graph replay is NOT VALID" not in said
