"""check-meta: list every op of the namespaces and check its meta impl. Real kernels run in
a worker process (worker.py) so that a segfault or a hang costs one op, not the run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aclcap.errors import UsageError
from aclcap.loading.libraries import custom_namespaces, load_libraries, registered_namespaces
from aclcap.meta._process import WorkerProcess
from aclcap.meta.registry import COMPOSITE_CPP, MISSING, NO_TENSOR, OpInfo, list_ops
from aclcap.status import FAILING, Finding, Severity, Status

WORKER_START_TIMEOUT_S = 300.0  # importing torch and loading libraries, on a slow CI box
SUMMARY_ORDER = (Status.PASS, Status.MISSING, Status.FAIL, Status.CRASHED, Status.TIMEOUT,
                 Status.NOT_EXERCISED, Status.UNVERIFIED)


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

    def row(self) -> dict:
        row = asdict(self)
        row["reasons"] = [f.text() for f in self.findings]
        row["findings"] = [{"severity": str(f.severity), "message": f.message}
                           for f in self.findings]
        return row


@dataclass
class MetaReport:
    results: list[MetaResult]
    namespaces: list[str]
    ops: list[OpInfo] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(r.status == status for r in self.results)

    def counts(self) -> dict[str, int]:
        return {str(s): self.count(s) for s in SUMMARY_ORDER}

    def summary(self) -> str:
        broken = sum(self.count(s) for s in (Status.FAIL, Status.CRASHED, Status.TIMEOUT))
        unverified = self.count(Status.UNVERIFIED)
        return (f"{len(self.results)} ops: {self.count(Status.PASS)} pass, "
                f"{self.count(Status.MISSING)} missing meta, {broken} failing, "
                f"{self.count(Status.NOT_EXERCISED)} not exercised"
                + (f", {unverified} unverified C++ composite(s)" if unverified else ""))

    @property
    def exit_code(self) -> int:
        return 1 if any(r.status in FAILING for r in self.results) else 0

    def rows(self) -> list[dict]:
        return [r.row() for r in self.results]


@dataclass
class _Checked:
    status: Status
    findings: list[Finding]
    sample_count: int = 0
    sample_sources: list[str] = field(default_factory=list)


def _lib_arg(spec: str) -> str:
    """Paths travel to the worker absolute, module names as they are."""
    path = Path(spec)
    return str(path.resolve()) if path.is_file() else spec


_DISPATCH_KEY = {"cpu": "CPU", "cuda": "CUDA", "npu": "PrivateUse1"}


def _has_kernel_for(op: OpInfo, device: str) -> bool:
    return _DISPATCH_KEY[device] in op.kernels or bool(
        {"CompositeExplicitAutograd", "CompositeImplicitAutograd"} & set(op.kernels))


def _has_samples(op: OpInfo, checked: dict[str, _Checked]) -> bool:
    got = checked.get(op.qualname)
    return got is not None and (got.sample_count > 0 or got.status != Status.PASS)


def _model_namespaces(path: str) -> set[str]:
    """The op namespaces a model file brings: its OP_LIBRARIES and what its import
    registers (remembered per file, as imports are)."""
    from aclcap.loading.model_file import load_model_file

    added = registered_namespaces(path, lambda: load_model_file(path))
    return added | set(load_libraries(load_model_file(path).op_libraries))


def _from_event(event: dict) -> _Checked:
    findings = [Finding(message, Severity(severity)) for message, severity in event["findings"]]
    return _Checked(Status(event["status"]), findings, event["sample_count"],
                    event["sample_sources"])


def run_checks(
    ops: list[OpInfo],
    libs: list[str],
    device: str,
    timeout_s: float,
    strict: bool,
    dtypes: list[str],
    on_done: Callable[[str], None] | None = None,
    harvest: dict | None = None,
) -> dict[str, _Checked]:
    """qualname -> outcome for each op, restarting the worker past a crash."""
    results: dict[str, _Checked] = {}
    pending = [{"qualname": o.qualname, "meta_kind": o.meta_kind, "meta_source": o.meta_source,
                "device": device if _has_kernel_for(o, device) else "cpu"} for o in ops]

    def blame_all(status: Status, reason: str) -> None:
        for op in pending:
            results[op["qualname"]] = _Checked(status, [Finding(reason)])

    while pending:
        request = {"libs": [_lib_arg(s) for s in libs], "ops": pending, "strict": strict,
                   "dtypes": dtypes, "device": device, "samples_from": [], "shapes": None,
                   "namespaces": [], **(harvest or {})}
        worker = WorkerProcess(request)
        try:
            try:
                ready = worker.next_event(WORKER_START_TIMEOUT_S)
            except TimeoutError:
                ready = None
            if ready is None:
                blame_all(Status.CRASHED, f"check-meta worker failed to start: {worker.death()}")
                return results
            if ready["event"] == "error":
                raise UsageError(ready["message"])
            current = None
            while pending:
                try:
                    event = worker.next_event(timeout_s if current else WORKER_START_TIMEOUT_S)
                except TimeoutError:
                    event = {"event": "timeout"}
                if event is None and current is None:  # died between ops: blame them all
                    blame_all(Status.CRASHED, worker.death())
                    return results
                if event is None or event["event"] == "timeout":
                    status = Status.TIMEOUT if event else Status.CRASHED
                    reason = f"timed out ({timeout_s:g} s)" if event else worker.death()
                    results[current] = _Checked(status, [Finding(reason)])
                    pending = [p for p in pending if p["qualname"] != current]
                    if on_done:
                        on_done(current)
                    break
                if event["event"] == "start":
                    current = event["op"]
                elif event["event"] == "result":
                    results[event["op"]] = _from_event(event)
                    pending = [p for p in pending if p["qualname"] != event["op"]]
                    current = None
                    if on_done:
                        on_done(event["op"])
        finally:
            worker.close()
    return results


def check_meta(
    libs: list[str],
    namespaces: list[str] | None = None,
    device: str = "cpu",
    timeout_s: float = 60.0,
    strict: bool = False,
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[str], None] | None = None,
    samples_from: list[str] | None = None,
    shapes: list[int] | None = None,
) -> MetaReport:
    """Load `libs`, list the ops of `namespaces` (default: those the libraries and model
    files registered), and check each; ops with samples (declared, or harvested from the
    eager steps of `samples_from`) run in the worker, the others are only inspected."""
    added = load_libraries(libs)
    models = [str(Path(m).resolve()) for m in samples_from or []]
    for model in models:
        added = sorted({*added, *_model_namespaces(model)})
    namespaces = namespaces or added
    ops = list_ops(namespaces)
    if not ops:
        known = ", ".join(custom_namespaces()) or "none"
        raise UsageError(f"--namespace {', '.join(namespaces) or '(none)'}: no op is registered "
                         f"there; namespaces with custom ops: {known}")
    checkable = [o for o in ops if o.meta_kind not in (MISSING, NO_TENSOR)]
    exercised = checkable if models else [o for o in checkable if o.has_samples]
    if on_start:
        on_start(len(exercised))
    checked = run_checks(exercised, libs, device, timeout_s, strict, list(dtypes), on_done,
                         {"samples_from": models, "shapes": shapes, "namespaces": namespaces})
    results = []
    for o in ops:
        if o.meta_kind == MISSING:
            outcome = _Checked(Status.MISSING, [Finding(
                "no meta impl: torch.compile graph-breaks here; `aclcap check-meta "
                "--emit-stubs FILE` writes a register_fake to start from")])
        elif o.meta_kind == NO_TENSOR:
            outcome = _Checked(Status.PASS, [])
        elif o.meta_kind == COMPOSITE_CPP and not _has_samples(o, checked):
            outcome = _Checked(Status.UNVERIFIED, [Finding(
                "C++ composite, not exercised: torch.compile runs its C++ body on fake "
                "tensors, which fails if it reads or writes data; give it samples "
                "(@aclcap.samples) to check it")])
        elif not _has_samples(o, checked):
            outcome = _Checked(Status.NOT_EXERCISED, [Finding(
                "no sample inputs: declare them with @aclcap.samples, or pass a model that "
                "calls it with --samples-from MODEL.py")])
        else:
            outcome = checked[o.qualname]
            if not _has_kernel_for(o, device):
                outcome.findings.insert(0, Finding(f"no {device} kernel: exercised on cpu",
                                                   Severity.WARNING))
        results.append(MetaResult(o.qualname, o.schema, o.kernels, o.meta_source,
                                  outcome.status, outcome.findings, outcome.sample_count,
                                  outcome.sample_sources))
    return MetaReport(results, namespaces, ops)
