"""What check-meta's parent and worker say to each other: one request on the worker's stdin,
then one JSON line per event on its result pipe (`ready`, `error`, `start`, `check`,
`result`); a pulled worker reads the name of its next op from that pipe.
Typed here once, so runner.py builds them and worker.py reads them by field, not by key."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from aclcap.meta.registry import MetaKind
from aclcap.status import Finding, Severity, Status

CALL_STEP = "call "  # the CheckStart step of one observed call: "call 12: x dim 0: 4 -> 8"


def is_call_step(step: str | None) -> bool:
    """The step is one call synthesis observes: it has a deadline of its own (runner), and
    a crash or hang there costs that call alone."""
    return bool(step) and str(step).startswith(CALL_STEP)


@dataclass(frozen=True)
class OpRequest:
    """One op to check; `device` is where its kernel runs (cpu where it has no kernel for
    the requested one)."""

    qualname: str
    meta_kind: MetaKind
    meta_source: str
    device: str


@dataclass(frozen=True)
class WorkerRequest:
    libs: list[str]
    ops: list[OpRequest]
    strict: bool
    dtypes: list[str]
    device: str
    samples_from: list[str] = field(default_factory=list)  # model files, absolute
    shapes: list[int] | None = None  # sizes to run their steps at (None: their SHAPES)
    namespaces: list[str] = field(default_factory=list)  # whose calls to harvest
    # "check" (the battery), or meta synthesis: "observe" (real calls of each op) and
    # "verify" (the battery on the calls `synthesis[op]["keys"]` names)
    mode: str = "check"
    synthesis: dict = field(default_factory=dict)
    threads: int = 0  # intra-op threads for the kernels (0: torch's own default)
    # "check": the parent hands the ops one name at a time down the pipe, as the worker
    # answers each (runner._Deal), an empty name ending them; `ops` lists every one
    pulled: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerRequest:
        d = json.loads(text)
        ops = [OpRequest(o["qualname"], MetaKind(o["meta_kind"]), o["meta_source"],
                         o["device"]) for o in d.pop("ops")]
        return cls(ops=ops, **d)


@dataclass(frozen=True)
class Ready:
    """Libraries loaded and samples harvested: the ops follow."""


@dataclass(frozen=True)
class Error:
    """Bad input found in the worker (a model file that fails): the run stops, exit 2."""

    message: str


@dataclass(frozen=True)
class Start:
    op: str


@dataclass(frozen=True)
class CheckStart:
    """One step of an op's checks is about to run (`kernel`: the real kernel on the samples,
    else a name in checks.CHECKS): a crash from here on happened in it."""

    op: str
    check: str


@dataclass(frozen=True)
class Result:
    op: str
    status: Status
    findings: list[Finding]
    sample_count: int = 0
    sample_sources: list[str] = field(default_factory=list)  # "3 from model.py:33"
    data_dependent: bool = False  # an output size follows the values
    synthesis: dict | None = None  # mode "observe": Observation.to_dict()
    check_s: float = 0.0  # the op's samples and checks, in the worker


Event = Ready | Error | Start | CheckStart | Result
_NAMES: dict[type, str] = {Ready: "ready", Error: "error", Start: "start",
                           CheckStart: "check", Result: "result"}


def event_line(event: Event) -> str:
    """One line of the result pipe: `{"event": name, ...fields}`, findings as
    [message, severity] pairs."""
    fields = asdict(event)
    if isinstance(event, Result):
        fields["status"] = str(event.status)
        fields["findings"] = [[f.message, str(f.severity)] for f in event.findings]
    return json.dumps({"event": _NAMES[type(event)], **fields})


def parse_event(line: bytes | str) -> Event:
    d = json.loads(line)
    kind = d.pop("event")
    if kind == "result":
        d["status"] = Status(d["status"])
        d["findings"] = [Finding(m, Severity(s)) for m, s in d["findings"]]
    return {v: k for k, v in _NAMES.items()}[kind](**d)
