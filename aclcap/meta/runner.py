"""check-meta: list every op of the namespaces and check its meta impl. Real kernels run in
a worker process (worker.py) so that a segfault or a hang costs one op, not the run."""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from aclcap import _forkserver
from aclcap._compat import custom_op_def
from aclcap.errors import UsageError
from aclcap.loading.libraries import custom_namespaces, load_libraries, registered_namespaces
from aclcap.meta._process import WorkerProcess
from aclcap.meta.crashes import crash_outcome
from aclcap.meta.messages import (
    CheckStart,
    Error,
    OpRequest,
    Result,
    Start,
    WorkerRequest,
    is_call_step,
)
from aclcap.meta.options import CheckMetaOptions
from aclcap.meta.registrations import recording
from aclcap.meta.registry import MetaKind, OpInfo, generated_fake, list_ops
from aclcap.meta.result_cache import ResultCache
from aclcap.status import FAILING, Finding, Severity, Status

HUNG = "hung"  # how a call that never answered died

# A check worker's start (fork, libraries, its first compile) costs about three ops' checks:
# the test library's seven ops took 3.4 s in two workers against 4.1 s in one (paired
# medians of 8, the quiet 2-core machine; 1.09x of one at a load of 2.4). Synthesis keeps 4.
OPS_PER_WORKER = 3
SYNTHESIS_OPS_PER_WORKER = 4
# One call synthesis observes: a kernel that hangs on a varied value (random_walk at p=0)
# costs that call, skipped in a fresh worker, not the op's whole --timeout.
CALL_TIMEOUT_S = 20.0
WORKER_START_TIMEOUT_S = 300.0  # importing torch and loading libraries, on a slow CI box
SUMMARY_ORDER = (Status.PASS, Status.MISSING, Status.FAIL, Status.CRASHED, Status.TIMEOUT,
                 Status.NOT_EXERCISED, Status.UNVERIFIED, Status.NO_KERNEL)


@dataclass
class MetaResult:
    """One row of the check-meta table and of its JSON (README: machine-readable output)."""

    op: str
    schema: str
    kernels: list[str]
    meta_source: str
    status: Status
    findings: list[Finding] = field(default_factory=list)
    sample_count: int = 0
    sample_sources: list[str] = field(default_factory=list)  # "3 from model.py:33"
    data_dependent: bool = False  # an output size follows the values: runs between graphs
    check_s: float = 0.0  # the worker's time on this op (samples and checks)
    cached: bool = False  # the row is the result cache's (result_cache.py), not this run's

    def to_dict(self) -> dict:
        row = asdict(self)
        row["reasons"] = [f.text() for f in self.findings]
        row["findings"] = [f.to_dict() for f in self.findings]
        return row


@dataclass
class MetaReport:
    results: list[MetaResult]
    namespaces: list[str]
    ops: list[OpInfo] = field(default_factory=list)
    workers: int = 1  # worker processes side by side (worker_count); 0: none was needed
    device: str = "cpu"
    strict: bool = False  # --strict: an op with no kernel for the device fails the run too

    def count(self, status: Status) -> int:
        return sum(r.status == status for r in self.results)

    def counts(self) -> dict[str, int]:
        return {**{str(s): self.count(s) for s in SUMMARY_ORDER},
                "data_dependent": self.data_dependent()}

    def data_dependent(self) -> int:
        """Passing ops whose output size follows the values, counted apart: a device graph
        cannot hold them."""
        return sum(r.data_dependent and r.status == Status.PASS for r in self.results)

    def summary(self) -> str:
        broken = sum(self.count(s) for s in (Status.FAIL, Status.CRASHED, Status.TIMEOUT))
        kinds = {o.qualname: o.meta_kind for o in self.ops}
        autograd = sum(r.status == Status.UNVERIFIED
                       and kinds.get(r.op) == MetaKind.AUTOGRAD_CPP for r in self.results)
        return (f"{len(self.results)} ops: {self.count(Status.PASS)} pass, "
                f"{self.count(Status.MISSING)} missing meta, {broken} failing, "
                f"{self.count(Status.NOT_EXERCISED)} not exercised"
                + (f", {n} unverified C++ composite(s)"
                   if (n := self.count(Status.UNVERIFIED) - autograd) else "")
                + (f", {autograd} unverified C++ Autograd kernel(s)" if autograd else "")
                + (f", {n} with no kernel for {self.device} in this build"
                   if (n := self.count(Status.NO_KERNEL)) else "")
                + (f", {dynamic} with a data-dependent output size (eager between graphs)"
                   if (dynamic := self.data_dependent()) else ""))

    @property
    def exit_code(self) -> int:
        failing = FAILING | ({Status.NO_KERNEL} if self.strict else set())
        return 1 if any(r.status in failing for r in self.results) else 0

    def slowest(self, count: int = 5) -> list[MetaResult]:
        """The ops that took the worker longest in this run, slowest first (as pytest
        --durations): where a library of 60 ops spends check-meta's time."""
        timed = [r for r in self.fresh() if r.check_s > 0]
        return sorted(timed, key=lambda r: r.check_s, reverse=True)[:count]

    def fresh(self) -> list[MetaResult]:
        """The rows this run made, not read from the result cache."""
        return [r for r in self.results if not r.cached]

    def to_dicts(self) -> list[dict]:
        return [r.to_dict() for r in self.results]


@dataclass
class _Checked:
    status: Status
    findings: list[Finding]
    sample_count: int = 0
    sample_sources: list[str] = field(default_factory=list)
    data_dependent: bool = False
    synthesis: dict | None = None  # what a synthesis worker sent (messages.Result)
    check_s: float = 0.0
    crashed_in: str | None = None  # the step (messages.CheckStart) a crash happened in
    death: str | None = None  # how the worker died there: "crashed (signal 6: SIGABRT)"
    cached: bool = False  # read from the result cache, not checked in this run


def _lib_arg(spec: str) -> str:
    """Paths travel to the worker absolute, module names as they are."""
    path = Path(spec)
    return str(path.resolve()) if path.is_file() else spec


_DISPATCH_KEY = {"cpu": "CPU", "cuda": "CUDA", "npu": "PrivateUse1"}


def _has_kernel_for(op: OpInfo, device: str) -> bool:
    """A kernel for the device (CPU, QuantizedCPU, SparseCPU, ... for cpu), a composite, or
    a C++ Autograd body that calls other ops."""
    return op.meta_kind == MetaKind.AUTOGRAD_CPP or any(
        k.endswith(_DISPATCH_KEY[device]) or k.startswith("Composite") for k in op.kernels)


def _runs_nowhere(op: OpInfo, device: str) -> bool:
    """No kernel for the device, nor for the cpu it would fall back to: a CUDA-only op in
    a CPU build. Nothing runs it, and nothing traces it, here."""
    return op.meta_kind != MetaKind.NO_TENSOR and not _has_kernel_for(op, device) \
        and not _has_kernel_for(op, "cpu")


def _has_samples(op: OpInfo, checked: dict[str, _Checked]) -> bool:
    got = checked.get(op.qualname)
    return got is not None and (got.sample_count > 0 or got.status != Status.PASS)


def _model_namespaces(path: str) -> set[str]:
    """The op namespaces a model file brings: its OP_LIBRARIES and what its import
    registers (remembered per file, as imports are)."""
    from aclcap.loading.model_file import load_model_file

    added = registered_namespaces(path, lambda: load_model_file(path))
    return added | set(load_libraries(load_model_file(path).op_libraries))


def worker_count(ops: int, cores: int | None = None, per_worker: int = OPS_PER_WORKER) -> int:
    """Workers for `ops` ops: one per core, each with `per_worker` ops at least, since a
    worker's start (the libraries, any --samples-from model's steps, Dynamo's first
    compile; torch's import is the fork server's, once) costs about that many ops' checks."""
    return max(1, min(cores or os.cpu_count() or 1, ops // per_worker))


def run_checks(ops: list[OpInfo], options: CheckMetaOptions, namespaces: list[str],
               on_done: Callable[[str], None] | None = None, mode: str = "check",
               synthesis: dict | None = None) -> dict[str, _Checked]:
    """qualname -> outcome for each op, in `worker_count` workers side by side, each
    restarted past a crash; `mode` and `synthesis` make them meta synthesis's workers
    (messages.WorkerRequest). check-meta's workers are handed one op at a time as they
    answer one (_Deal); synthesis's are dealt theirs round-robin up front."""
    device = options.device
    pending = [OpRequest(o.qualname, o.meta_kind, o.meta_source,
                         device if _has_kernel_for(o, device) else "cpu") for o in ops]
    count = worker_count(len(pending), per_worker=OPS_PER_WORKER if mode == "check" else
                         SYNTHESIS_OPS_PER_WORKER)
    deal = _Deal(pending) if mode == "check" else None
    if count == 1:
        return _run_worker([] if deal else pending, options, namespaces, on_done, mode,
                           synthesis, deal=deal)
    threads = threads_each(count) if mode == "check" else 0
    with ThreadPoolExecutor(count) as pool:  # each thread waits on its worker's pipe
        shares = [pool.submit(_run_worker, [] if deal else pending[i::count], options,
                              namespaces, on_done, mode, synthesis, threads, deal)
                  for i in range(count)]
        return {op: got for share in shares for op, got in share.result().items()}


class _Deal:
    """A check run's ops not yet handed to a worker, shared by the threads that wait on the
    workers: each worker is handed its next op as it answers one. Dealt round-robin up
    front, one worker drew the bundled library's two slowest ops and ended 1.5 s after the
    other (5 s on the loaded 2-core machine), which sat idle."""

    def __init__(self, ops: list[OpRequest]) -> None:
        self.ops = ops  # every op, in every worker's request: a handed name is looked up
        self._left = deque(ops)
        self._lock = threading.Lock()

    def take(self) -> OpRequest | None:
        with self._lock:
            return self._left.popleft() if self._left else None

    def rest(self) -> list[OpRequest]:
        """Every op not handed yet, all taken (a worker that cannot go on is blamed for
        them, as it was for its share when the ops were dealt up front)."""
        with self._lock:
            rest = list(self._left)
            self._left.clear()
            return rest

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._left)


def threads_each(workers: int, cores: int | None = None) -> int:
    """Intra-op threads per check worker: the cores shared out among the workers side by
    side. A team of two threads, one on a core another process holds, spin-waits at every
    parallel kernel (the bundled kernels' runs took 1.1 s with two threads against 0.05 s
    with one, on the loaded 2-core machine); they parallelize over rows, so their values
    do not change with the count."""
    return max(1, (cores or os.cpu_count() or 1) // workers)


def _run_worker(pending: list[OpRequest], options: CheckMetaOptions, namespaces: list[str],
                on_done: Callable[[str], None] | None, mode: str, synthesis: dict | None,
                threads: int = 0, deal: _Deal | None = None) -> dict[str, _Checked]:
    """One worker's share of the ops, restarting it past a crash. With a `deal` the share
    is handed one op at a time (`pending`: the op handed and not answered yet)."""
    results: dict[str, _Checked] = {}
    device = options.device

    def blame_all(status: Status, reason: str) -> None:
        for op in pending + (deal.rest() if deal else []):
            results[op.qualname] = _Checked(status, [Finding(reason)])

    def hand(worker: WorkerProcess) -> None:
        """The worker's next op from the deal, or the end of its ops (no name)."""
        if deal is not None:
            op = deal.take()
            pending.extend([op] if op else [])
            worker.hand(op.qualname if op else "")

    def done(op: str) -> None:
        nonlocal pending
        pending = [p for p in pending if p.qualname != op]
        if on_done:
            on_done(op)

    while pending or deal:
        request = WorkerRequest([_lib_arg(s) for s in options.libs],
                                deal.ops if deal else pending, options.strict,
                                list(options.dtypes), device, options.samples_from,
                                options.shapes, namespaces, mode, synthesis or {}, threads,
                                pulled=deal is not None)
        worker = WorkerProcess(request)
        try:
            try:
                ready = worker.next_event(WORKER_START_TIMEOUT_S)
            except TimeoutError:
                ready = None
            if ready is None:
                blame_all(Status.CRASHED, f"check-meta worker failed to start: {worker.death()}")
                return results
            if isinstance(ready, Error):
                raise UsageError(ready.message)
            hand(worker)
            current, step = None, None
            while pending:
                deadline = WORKER_START_TIMEOUT_S if current is None else \
                    min(options.timeout_s, CALL_TIMEOUT_S) if is_call_step(step) else \
                    options.timeout_s
                try:
                    event = worker.next_event(deadline)
                except TimeoutError:
                    if current is None:  # silent between ops, past the start's deadline
                        blame_all(Status.TIMEOUT, f"check-meta worker stopped answering "
                                  f"({WORKER_START_TIMEOUT_S:g} s)")
                        return results
                    # One synthesis call that hangs is skipped like one that crashes.
                    results[current] = _Checked(Status.TIMEOUT, [Finding(
                        f"timed out ({deadline:g} s)")], crashed_in=step,
                        death=f"{HUNG} (no answer in {deadline:g} s)")
                    done(current)
                    break
                if event is None and current is None:  # died between ops: blame them all
                    blame_all(Status.CRASHED, worker.death())
                    return results
                if event is None:
                    op = next(p for p in pending if p.qualname == current)
                    death = worker.death()
                    results[current] = _Checked(*crash_outcome(
                        current, op.meta_kind, op.meta_source, step, death),
                        crashed_in=step, death=death)
                    done(current)
                    break
                if isinstance(event, Start):
                    current, step = event.op, None
                elif isinstance(event, CheckStart):
                    step = event.check
                elif isinstance(event, Result):
                    results[event.op] = _Checked(event.status, event.findings,
                                                 event.sample_count, event.sample_sources,
                                                 event.data_dependent, event.synthesis,
                                                 event.check_s)
                    current = None
                    done(event.op)
                    hand(worker)
        finally:
            worker.close()
    return results


def _untraceable(op: OpInfo) -> str:
    """What torch.compile does at an op with no fake: a torch.library.custom_op fails the
    whole trace ("RuntimeError when making fake tensor call"); any other op breaks it."""
    if custom_op_def(op.dispatcher_name) is not None:
        return "torch.compile's trace fails whole at it (a torch.library.custom_op)"
    return "torch.compile graph-breaks here"


def check_meta(options: CheckMetaOptions, on_start: Callable[[int], None] | None = None,
               on_done: Callable[[str], None] | None = None) -> MetaReport:
    """Load the libraries, list the ops of the namespaces (default: those the libraries and
    model files registered), and check each; ops with samples (declared, or harvested from
    the model files) run in the worker, the others are only inspected. An op whose key
    the result cache holds (options.use_cache) takes its row from there instead."""
    models = [str(Path(m).resolve()) for m in options.samples_from]
    with recording():  # the Python kernels' functions, for the cache's keys
        # the model files first, as in the workers: what their imports load defines the ops
        # a fakes file among the libraries registers on
        added = sorted({ns for model in models for ns in _model_namespaces(model)})
        added = sorted({*added, *load_libraries(options.libs)})
    namespaces = options.namespaces or added
    ops = list_ops(namespaces)
    if not ops:
        known = ", ".join(custom_namespaces()) or "none"
        raise UsageError(f"--namespace {', '.join(namespaces) or '(none)'}: no op is registered "
                         f"there; namespaces with custom ops: {known}")
    checkable = [o for o in ops if o.meta_kind not in (MetaKind.MISSING, MetaKind.NO_TENSOR)
                 and not _runs_nowhere(o, options.device)]
    exercised = checkable if models else [o for o in checkable if o.has_samples]
    options = replace(options, samples_from=models)
    checked, ran = _run_uncached(exercised, options, namespaces, on_start, on_done)
    results = []
    for o in ops:
        if _runs_nowhere(o, options.device):
            outcome = _Checked(Status.NO_KERNEL, [Finding(
                f"no kernel for {options.device} in this build: nothing runs or traces it "
                "here, so its meta is checked where it has a kernel"
                + (" (it has no meta impl either)" if o.meta_kind == MetaKind.MISSING else ""))])
        elif o.meta_kind == MetaKind.MISSING:
            outcome = _Checked(Status.MISSING, [Finding(
                f"no meta impl: {_untraceable(o)}; `--synthesize FILE.py` writes a verified "
                "fake from the kernel's real calls (its samples, or --samples-from MODEL.py), "
                "`--emit-stubs FILE` a register_fake to start from")])
        elif o.meta_kind == MetaKind.NO_TENSOR:
            outcome = _Checked(Status.PASS, [])
        elif o.meta_kind == MetaKind.COMPOSITE_CPP and not _has_samples(o, checked):
            outcome = _Checked(Status.UNVERIFIED, [Finding(
                "C++ composite, not exercised: torch.compile runs its C++ body on fake "
                "tensors, which fails if it reads or writes data; give it samples "
                "(@aclcap.samples) to check it")])
        elif o.meta_kind == MetaKind.AUTOGRAD_CPP and not _has_samples(o, checked):
            outcome = _Checked(Status.UNVERIFIED, [Finding(
                "C++ Autograd kernel, not exercised: torch.compile runs its C++ body on fake "
                "tensors (the ops it calls need metas, it must not read data); give it "
                "samples (@aclcap.samples) to check it")])
        elif not _has_samples(o, checked):
            outcome = _Checked(Status.NOT_EXERCISED, [Finding(
                "no sample inputs: declare them with @aclcap.samples, or pass a model that "
                "calls it with --samples-from MODEL.py")])
        else:
            outcome = checked[o.qualname]
            if not _has_kernel_for(o, options.device):
                outcome.findings.insert(0, Finding(f"no {options.device} kernel: exercised "
                                                   "on cpu", Severity.WARNING))
        if o.meta_kind == MetaKind.PYTHON and (tagged := generated_fake(o.overload())):
            outcome.findings.append(_own_fake_on_tagged(tagged))
        results.append(MetaResult(o.qualname, o.schema, o.kernels, o.meta_source,
                                  outcome.status, outcome.findings, outcome.sample_count,
                                  outcome.sample_sources, outcome.data_dependent,
                                  outcome.check_s, outcome.cached))
    return MetaReport(results, namespaces, ops, worker_count(ran) if ran else 0,
                      options.device, options.strict)


def _own_fake_on_tagged(tagged: str) -> Finding:
    """A register_fake on an op torch makes the fake of: it replaces torch's, which already
    fits the tag's contract; torch itself warns where the op is a torch.library.custom_op."""
    return Finding(f"registers a fake of its own, but torch generates this op's fake "
                   f"({tagged}): the registered one replaces torch's (torch warns it is "
                   "unnecessary on a torch.library.custom_op); drop it", Severity.WARNING)


def _run_uncached(ops: list[OpInfo], options: CheckMetaOptions, namespaces: list[str],
                  on_start: Callable[[int], None] | None,
                  on_done: Callable[[str], None] | None) -> tuple[dict[str, _Checked], int]:
    """Each op's outcome: the cache's where it holds the op's key, else its worker's (then
    kept in the cache); and how many ops the workers checked. No worker, nor the server
    they fork from, starts when the cache answers every op."""
    cache = ResultCache(options)
    keys = {o.qualname: cache.key(o) for o in ops}
    hits = cache.lookup(keys) if options.use_cache else {}
    checked = {op: _Checked(**fields, cached=True) for op, fields in hits.items()}
    to_run = [o for o in ops if o.qualname not in checked]
    if on_start:
        on_start(len(to_run))
    if to_run:
        _forkserver.start()
        fresh = run_checks(to_run, options, namespaces, on_done)
        for o in to_run:
            if o.qualname in fresh:
                cache.store(o, fresh[o.qualname], keys[o.qualname])
        checked.update(fresh)
    cache.finish(spec for spec in options.libs if Path(spec).is_file())
    return checked, len(to_run)
