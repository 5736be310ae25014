"""aclcap bench: step time of eager vs torch.compile vs graph replay per size, interleaved
in rounds in one process so machine drift cancels (docs/bench.md: how bench times)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch

from aclcap._compat import TorchDispatchMode
from aclcap._tensors import clone_tensors
from aclcap.bench.floor import ReadFloor, StepBytes, step_bytes
from aclcap.bench.host_update import UPDATE, host_update
from aclcap.bench.modes import MODES
from aclcap.bench.options import BenchOptions
from aclcap.bench.profile import StepProfile, profile_step
from aclcap.bench.stats import UNSTABLE_CI, Stability, median_p90, stability
from aclcap.bench.timing import BLOCK_S, BlockTime, steps_for, time_block, time_settled_steps
from aclcap.capture.options import CaptureOptions
from aclcap.capture.run import capture_step
from aclcap.draw_state import restore, sets_state
from aclcap.errors import CaptureError, UsageError
from aclcap.graph.backends.base import Captured
from aclcap.graph.distributed import RankInfo, settle, settle_each_call
from aclcap.graph.options import StepOptions
from aclcap.graph.padding import padded_sizes
from aclcap.graph.replay import replay_check
from aclcap.graph.step import StepContext, draw_reproducibly, prepare_step
from aclcap.status import Status

WARMUP_STEPS = 3
MAX_ROUNDS = 60  # rounds past --rounds stop here whatever --min-time or --max-time ask
SETTLED_STEPS = 50  # --nproc on cpu: steps per block, each timed alone (see settle)


@dataclass
class BenchRow:
    """One row of the bench table (docs/contracts.md: machine-readable output)."""

    size: int
    mode: str
    mechanism: str
    step_median_us: float | None  # None with the times below: a row not timed (`stale`)
    step_p90_us: float | None
    host_us: float | None
    device_us: float | None
    launches: int | None
    speedup_vs_eager: float | None = None
    speedup_ci: list[float] | None = None  # bootstrap 95% interval of speedup_vs_eager
    spread: float = 0.0  # p90 / median over rounds
    unstable: bool = False  # by Stability.unstable, after extended rounds
    per_rank: list[dict] | None = None  # --nproc: each rank's host and device time
    floor_us: float | None = None  # the step's bytes at its fastest read pass
    over_floor: float | None = None  # step median / floor
    floor_level: str | None = None  # where that pass ran: a cache level (`L3`) or `memory`
    # graph rows of a step with host values: their update before each replay (host_update.py)
    host_update_us: float | None = None
    # graph, piecewise and padded rows: why their replay is no speedup (capture fails the
    # size, or the replay differs from eager on a fresh draw): never timed, and bench exits 1
    stale: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def stability(self) -> Stability:
        """The judgement judge_rows made, from the row's own numbers (an eager row's
        speedup is 1 with an interval of [1, 1]: never wide)."""
        return Stability(self.spread, self.speedup_vs_eager,
                         tuple(self.speedup_ci) if self.speedup_ci else None)


@dataclass
class BenchReport:
    model: str
    device: str
    dtype: str
    mechanism: str
    rounds: int
    rows: list[BenchRow] = field(default_factory=list)
    interrupted: bool = False
    # Every round's block times per (size, mode): --nproc merges ranks round by round.
    raw: dict[tuple[int, str], list[BlockTime]] = field(default_factory=dict, repr=False)
    ranks: int | None = None
    profiles: list[StepProfile] = field(default_factory=list)  # --profile
    step_bytes: dict[int, StepBytes] = field(default_factory=dict)  # per exact size
    read_gbps: dict[int, float] = field(default_factory=dict)  # per size: its floor's rate
    floor_passes: dict[int, int] = field(default_factory=dict)  # per size: passes its min is of
    floor_levels: dict[int, str] = field(default_factory=dict)  # per size: its floor's level
    max_autotune: bool = False  # graph mode's artifact compiled with --max-autotune

    @property
    def unstable(self) -> bool:
        """A row flagged unstable: its numbers may not repeat in another run."""
        return any(r.unstable for r in self.rows)

    def padding_cost(self) -> dict[int, float]:
        """Per padded size, step time on the padded graph over the exact-size graph."""
        by = {(r.size, r.mode): r.step_median_us for r in self.rows if not r.stale}
        return {size: by[(size, "padded")] / by[(size, "graph")]
                for size, mode in by if mode == "padded" and (size, "graph") in by}

    def host_overhead_removed(self) -> dict[int, float]:
        """Per size, the share of eager's host time per step that graph replay removed (a
        stale replay removes nothing: its results are wrong)."""
        by = {(r.size, r.mode): r for r in self.rows}
        return {size: 1 - by[(size, "graph")].host_us / by[(size, "eager")].host_us
                for size, mode in by if mode == "eager" and (size, "graph") in by
                and not by[(size, "graph")].stale}

    @property
    def stale(self) -> list[BenchRow]:
        """The replaying rows left untimed: capture fails their size, or their replay
        differs from eager on fresh inputs."""
        return [r for r in self.rows if r.stale]


class _OpCounter(TorchDispatchMode):
    """Counts the ops one eager step dispatches: the launches a host issues without a graph."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def eager_launches(model: torch.nn.Module, args: tuple) -> int:
    counter = _OpCounter()
    fresh = clone_tensors(list(args))  # outside the counter: copies are not the step's ops
    with torch.no_grad(), counter:
        model(*fresh)
    return counter.count


def default_model() -> Path:
    """examples/tiny_llama.py of the checkout aclcap runs from."""
    from aclcap.build import ops_dir

    path = ops_dir().parent / "examples" / "tiny_llama.py"
    if not path.exists():
        raise UsageError("no MODEL.py given and examples/tiny_llama.py is not beside this "
                         "install: pass the model file to bench")
    return path


def with_model(options: BenchOptions) -> BenchOptions:
    """The options with the model file named: the default one where none was given."""
    return options if options.model else replace(options, model=str(default_model()))


def run_bench(options: BenchOptions,
              on_progress: Callable[[str, int, int], None] | None = None,
              rank: RankInfo | None = None) -> BenchReport:
    """Measure every (size, mode); Ctrl-C returns what the finished rounds measured. With
    `options.pad`, every size between capture sizes is also timed both ways: its own graph
    (`graph`) and the next capture size's graph on padded inputs (`padded`), so the cost of
    padding is a measured ratio. With `rank` (one of --nproc ranks), block lengths are
    agreed across ranks, so every rank runs the same steps in lockstep."""
    rounds, pad, profile = options.rounds, options.pad, options.profile
    if rounds < 5:
        raise UsageError(f"--rounds {rounds}: at least 5 rounds, so medians and p90 mean "
                         "something")
    modes = list(options.modes or MODES)
    if pad and "graph" not in modes:
        raise UsageError("--pad measures graph replay: keep graph in --modes")
    step = prepare_step(with_model(options))
    if rank is not None:
        draw_reproducibly(step)
    model, resolved, backend = step.model, step.device, step.backend
    capture_sizes = sorted(set(options.shapes or step.spec.shapes))
    between = padded_sizes(capture_sizes) if pad else {}
    sizes = sorted([*capture_sizes, *between])
    report = BenchReport(step.spec.name, resolved, options.dtype, backend.mechanism, rounds,
                         max_autotune=options.max_autotune)
    total = len(sizes) * len(modes) + len(between) + rounds
    progress = (lambda msg, done: on_progress(msg, done, total)) if on_progress else \
        (lambda msg, done: None)

    steps: dict[tuple[int, str], Callable[[], object]] = {}
    launches: dict[tuple[int, str], int | None] = {}
    captured, captured_pw, pieces = {}, {}, {}
    pw_mechanism = "aoti-piecewise"
    fails: dict[int, str] = {}
    if "graph" in modes:
        progress(f"capturing sizes {sizes} ({backend.mechanism}) and checking them as "
                 "`aclcap capture` does", 0)
        verdict = None if rank is not None else capture_verdict(step, options, sizes)
        fails, captured = (verdict.fails, verdict.captured) if verdict else ({}, {})
        passed = [size for size in sizes if size not in fails]
        try:  # capture's graphs where it made them; where its checks stopped first, bench's
            if passed and not captured:
                captured = {c.size: c for c in backend.capture(step, passed)}
        except CaptureError as exc:
            raise CaptureError(f"graph mode: capture failed: {exc} (run `aclcap capture` for "
                               "the details, or leave graph out of --modes)") from exc
        report.mechanism = backend.mechanism  # aoti may have become inductor: export failed
        if options.graph_mode == "full,piecewise":  # the piecewise step gets rows of its own
            from aclcap.graph.piecewise.backend import PiecewiseAotiBackend

            piecewise = PiecewiseAotiBackend(options)
            captured_pw = {c.size: c for c in piecewise.capture(step, sizes)}
            pieces = piecewise.facts.piecewise or {}
            pw_mechanism = piecewise.mechanism
            modes.append("piecewise")
    # Replays that are no speedup, never timed (issue 50 item 7). --nproc: `aclcap capture
    # --nproc` checks the ranks' replays in lockstep; here a rank that found its replay
    # stale first would stop calling collectives the others wait in.
    stale = {} if rank is not None else {
        **{(size, "graph"): f"`aclcap capture` fails it: {why}" for size, why in fails.items()},
        **{(size, "padded"): f"`aclcap capture` fails the size {target} graph it pads to: "
           f"{fails[target]}" for size, target in between.items() if target in fails},
        **{(size, "piecewise"): f"on fresh inputs it differs from eager ({why}); `aclcap "
           "capture` names the cause" for size, why in stale_sizes(step, captured_pw).items()}}
    compiled = torch.compile(model) if "compiled" in modes else None
    done = 0
    for size in sizes:
        args = step.inputs(size)
        for mode in modes:
            progress(f"warming up size {size}, {mode}", done)
            done += 1
            if (size, mode) in stale:
                continue
            if mode == "eager":
                fn: Callable[[], object] = lambda a=args: model(*a)  # noqa: E731
                launches[(size, mode)] = eager_launches(model, args)
            elif mode == "compiled":
                fn = lambda a=args: compiled(*a)  # noqa: E731
                launches[(size, mode)] = None
            elif mode == "piecewise":
                cap = captured_pw[size]
                fn = lambda c=cap: c.replay(c.static_inputs)  # noqa: E731
                # a launch per graph piece, and at least one per eager splitting op
                launches[(size, mode)] = pieces["graphs_per_size"] + pieces["eager_pieces"]
            else:
                cap = captured[size]
                fn = lambda c=cap: c.replay(c.static_inputs)  # noqa: E731
                launches[(size, mode)] = 1  # one graph launch (one AOTI run call on cpu)
            fn = _with_state(args if mode in ("eager", "compiled") else cap.static_inputs, fn)
            settle(force=rank is not None)
            with torch.no_grad():
                for _ in range(WARMUP_STEPS):
                    fn()
            steps[(size, mode)] = fn
        if (size, "graph") in steps and (update := host_update(args)):
            steps[(size, UPDATE)] = update
            launches[(size, UPDATE)] = None
        if size in between:
            done += 1
            if (size, "padded") in stale:
                continue
            target = between[size]
            padded = step.pad(args, size, target)
            cap = captured[target]
            steps[(size, "padded")] = _with_state(padded, lambda c=cap, a=padded: c.replay(a))
            launches[(size, "padded")] = 1

    with torch.no_grad():
        blocks = {key: steps_for(fn) for key, fn in steps.items()}
    report.step_bytes = {size: step_bytes(model, step.inputs(size)) for size in capture_sizes}
    floors = {size: ReadFloor(resolved, b.total) for size, b in report.step_bytes.items()}
    settled = rank is not None and resolved == "cpu"
    if rank is not None:  # the longest block any rank wants: all ranks run the same steps
        every = rank.exchange(blocks)
        cap = SETTLED_STEPS if settled else None
        blocks = {key: min(max(b[key] for b in every), cap or 10**9) for key in blocks}
        settle_each_call(False)  # settled outside the timed spans only
    timings: dict[tuple[int, str], list] = {key: [] for key in steps}

    def one_round(r: int) -> None:
        progress(f"round {r + 1} of {rounds}" if r < rounds else
                 f"round {r + 1}: timing for {options.min_time_s:g} s at least, and longer "
                 f"while a speedup's interval is past ±{UNSTABLE_CI:.0%}",
                 done + min(r, rounds - 1))
        with torch.no_grad():
            for key, fn in steps.items():  # every (size, mode) once per round
                settle(force=rank is not None)
                timings[key].append(
                    time_settled_steps(fn, blocks[key], lambda: settle(force=True))
                    if settled else time_block(fn, blocks[key], resolved))
                if key[0] in floors:  # a floor block after each block it bounds
                    floors[key[0]].time_block(BLOCK_S)

    try:  # ranks run in lockstep: no rank may extend alone
        solo = rank is None  # ranks agree on nothing clocked alone: --rounds only
        report.rounds = run_rounds(one_round, lambda: unsettled(_step_times(timings)), rounds,
                                   options.max_time_s if solo else 0.0,
                                   options.min_time_s if solo else 0.0) if steps else 0
    except KeyboardInterrupt:
        report.interrupted = True
    report.raw = timings
    if profile and not report.interrupted:
        for (size, mode), fn in steps.items():
            progress(f"profiling size {size}, {mode}", done + rounds)
            report.profiles.append(profile_step(fn, size, mode, resolved))
            if mode == "compiled" and report.profiles[-1].kernels_per_step is not None:
                launches[(size, mode)] = round(report.profiles[-1].kernels_per_step)
    updates = {size: median_p90([t.step_us for t in timed])[0]
               for (size, mode), timed in timings.items() if mode == UPDATE and timed}
    mechanisms = {"eager": "eager", "compiled": "inductor", "piecewise": pw_mechanism}
    for size in sizes:
        for mode in [*modes, "padded"]:
            timed = timings.get((size, mode))
            if not timed and (size, mode) not in stale:
                continue  # not a mode of this size, or Ctrl-C came before its first block
            row = BenchRow(size, mode, mechanisms.get(mode, backend.mechanism), None, None,
                           None, None, launches.get((size, mode)), stale=stale.get((size, mode)))
            if timed:
                row.step_median_us, row.step_p90_us = median_p90([t.step_us for t in timed])
                row.host_us = median_p90([t.host_us for t in timed])[0]
                row.device_us = median_p90([t.device_us for t in timed])[0] \
                    if timed[0].device_us else None
            if mode == "graph":
                row.host_update_us = updates.get(size)
            report.rows.append(row)
    judge_rows(report.rows, _step_times(timings))
    set_floors(report, floors)
    return report


def _step_times(timings: dict[tuple[int, str], list[BlockTime]]
                ) -> dict[tuple[int, str], list[float]]:
    """Per (size, mode), its step times; the host-value update is no mode of its own."""
    return {key: [t.step_us for t in timed] for key, timed in timings.items()
            if key[1] != UPDATE}


def unsettled(rounds: dict[tuple[int, str], list[float]]) -> bool:
    """Whether any (size, mode) would be flagged unstable on the rounds so far."""
    return any(stability(times, rounds.get((size, "eager"))).unstable
               for (size, mode), times in rounds.items() if times)


STALE_DRAWS = 2  # fresh draws each captured size is replayed on before it is timed


def _with_state(draw: tuple, fn: Callable[[], object]) -> Callable[[], object]:
    """`fn`, run with the state its draw set outside its inputs put back first (vLLM's
    forward context): the modes are timed interleaved, and a kernel that read another
    size's attention metadata would read past its buffers. Every mode of a step that sets
    state pays the same restore."""
    if not sets_state(draw):
        return fn

    def run() -> object:
        restore(draw)
        return fn()

    return run


@dataclass
class CaptureVerdict:
    """What `aclcap capture` says of the sizes bench times: the first reason of each size it
    fails, and the graphs it captured (none where its checks failed before capturing)."""

    fails: dict[int, str]
    captured: dict[int, Captured]


def capture_verdict(step: StepContext, options: BenchOptions, sizes: list[int]
                    ) -> CaptureVerdict:
    """capture's whole check on bench's step and sizes: a replay it fails (a host read the
    graph cannot hold, a value frozen at capture, a mismatch) is never timed. bench then
    replays capture's own graphs."""
    shared = {f.name: getattr(options, f.name) for f in fields(StepOptions)}
    mode = "piecewise" if options.graph_mode == "piecewise" else "full"  # the step's backend
    report = capture_step(step, CaptureOptions(**{**shared, "shapes": tuple(sizes),
                                                  "graph_mode": mode}))
    return CaptureVerdict({r.size: r.reasons[0] if r.reasons else r.status.value
                           for r in report.rows if r.status == Status.FAIL}, report.captured)


def stale_sizes(step: StepContext, captured: dict[int, Captured]) -> dict[int, str]:
    """Per captured size whose replay differs from eager on a fresh draw (capture's check:
    a host value frozen at capture, a stale buffer), the first reason. bench never times
    such a replay."""
    stale = {}
    for size, cap in captured.items():
        for _ in range(STALE_DRAWS):
            check = replay_check(step, cap, step.inputs(size))
            if not check.ok:
                stale[size] = check.reasons[0]
                break
    return stale


def run_rounds(one_round: Callable[[int], None], unstable: Callable[[], bool],
               rounds: int, max_time_s: float, min_time_s: float = 0.0) -> int:
    """`rounds` rounds and at least `min_time_s` of them (so a run samples the machine over
    seconds, not one moment of it), then more while `unstable()` (a row's spread or its
    speedup's interval is past its limit) and the timing has run under `max_time_s`
    (pyperf's calibration, bounded): a noisy moment gets outvoted before a row is called
    unstable. Returns the rounds run."""
    started = time.perf_counter()
    done = 0

    def more() -> bool:
        elapsed = time.perf_counter() - started
        return elapsed < min_time_s or (elapsed < max_time_s and unstable())

    while done < rounds or (done < MAX_ROUNDS and more()):
        one_round(done)
        done += 1
    return done


def set_floors(report: BenchReport, floors: dict[int, ReadFloor]) -> None:
    """Each exact size's floor (its bytes at their fastest read pass, from the cache level
    that holds them or from memory), and every row's time over it."""
    for size, floor in floors.items():
        if floor.passes:  # none when Ctrl-C came before the first round ended
            report.read_gbps[size] = floor.gbps
            report.floor_passes[size] = floor.passes
            report.floor_levels[size] = floor.level
    for row in report.rows:
        if row.size in report.read_gbps and row.mode != "padded" and row.step_median_us:
            row.floor_us = report.step_bytes[row.size].total / report.read_gbps[row.size] / 1e3
            row.over_floor = row.step_median_us / row.floor_us
            row.floor_level = report.floor_levels[row.size]


def judge_rows(rows: list[BenchRow], rounds: dict[tuple[int, str], list[float]]) -> None:
    """Each row's spread, its speedup over eager at its size with the speedup's bootstrap
    95% interval (so a reader, and --baseline, knows how far to trust it), and whether
    Stability calls it unstable."""
    for row in rows:
        mine = rounds.get((row.size, row.mode))
        if not mine:
            continue
        judged = stability(mine, rounds.get((row.size, "eager")))
        row.spread = judged.spread
        if judged.speedup is not None and judged.speedup_ci is not None:
            row.speedup_vs_eager = judged.speedup
            row.speedup_ci = [round(x, 4) for x in judged.speedup_ci]
        row.unstable = judged.unstable
