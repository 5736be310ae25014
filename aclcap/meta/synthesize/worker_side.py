"""Meta synthesis's part of check-meta's worker: per op, the real calls to learn from
("observe"), or the battery on the held-out calls with the synthesized meta loaded
("verify"; a call whose two eager runs differ is the kernel's fault, not held against the
meta: faults.py). Events go out one op at a time, so a crash or a hang is blamed on that op."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

from aclcap.errors import first_line
from aclcap.meta.checks import check_op
from aclcap.meta.messages import CheckStart, Event, Result, Start, WorkerRequest
from aclcap.meta.observe import BUILD, DECLARED, RecordedCall
from aclcap.meta.registry import MetaKind, resolve_overload
from aclcap.meta.sample_inputs import declared_words
from aclcap.meta.synthesize.faults import without_faults
from aclcap.meta.synthesize.observation import Source, observe_op, samples_by_key, sources
from aclcap.meta.synthesize.verify import battery
from aclcap.status import Finding, Status


def _origins(found: Sequence[Source], dtypes: int) -> list[str]:
    """`3 declared x 2 dtypes`, `3 from model.py:33 (1 build-time)`: where the samples came
    from."""
    declared = sum(s.phase == DECLARED for s in found)
    harvested = [s for s in found if s.phase != DECLARED]
    sites = ", ".join(dict.fromkeys(s.site for s in harvested))
    build = sum(s.phase == BUILD for s in harvested)
    return ([declared_words(declared, dtypes)] if declared else []) + (
        [f"{len(harvested)} from {sites}" + (f" ({build} build-time)" if build else "")]
        if harvested else [])


def synthesis_events(request: WorkerRequest, harvested: list[RecordedCall],
                     emit: Callable[[Event], None]) -> Iterator[Event]:
    """Per op of `request`: Start, then one Result carrying the observation ("observe") or
    the battery's findings on the held-out calls it names ("verify"). In "observe", each
    call's step goes out through `emit` before the call runs (CheckStart), so a kernel that
    crashes is blamed on that call; `synthesis[op]["skip"]` names calls that crashed before."""
    dtypes = [getattr(torch, name) for name in request.dtypes]
    with one_thread():
        yield from _op_events(request, harvested, emit, dtypes)


@contextmanager
def one_thread() -> Iterator[None]:
    """Kernels run on one thread while synthesis observes and verifies them: a kernel that
    races where a varied call makes two rows write one place (vLLM's gated delta rule with
    every state index 0) then gives one result every run, so the calls left to fit, and
    the files written, are the same in every run (issue 49 item 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _op_events(request: WorkerRequest, harvested: list[RecordedCall],
               emit: Callable[[Event], None], dtypes: list[torch.dtype]) -> Iterator[Event]:
    for op_request in request.ops:
        name = op_request.qualname
        yield Start(name)
        try:
            op = resolve_overload(name)
            found = sources(name, op_request.device, dtypes, harvested)
            if request.mode == "observe":
                diff = request.synthesis.get("diff_meta", False) and \
                    op_request.meta_kind not in (MetaKind.MISSING, MetaKind.TRIVIAL)
                asked = request.synthesis.get(name, {})
                seen = observe_op(op, found, diff_meta=diff, skip=set(asked.get("skip", [])),
                                  hung=asked.get("hung", []),
                                  isolate=asked.get("isolate", False),
                                  announce=lambda step, name=name: emit(CheckStart(name, step)))
                yield Result(name, Status.PASS, [], len(found), _origins(found, len(dtypes)),
                             synthesis=seen.to_dict())
            else:
                asked = request.synthesis.get(name, {})
                samples, faults = without_faults(
                    op, samples_by_key(op, found, set(asked.get("keys", []))),
                    isolate=asked.get("isolate", False))
                checks, skipped = battery(op)
                outcome = check_op(op, samples, checks)
                yield Result(name, outcome.status, outcome.findings, outcome.sample_count,
                             _origins(found, len(dtypes)),
                             synthesis={"verified_on": len(samples), "checks": list(checks),
                                        "skipped": skipped, "kernel_findings": faults})
        except Exception as exc:  # this op's synthesis fails, not the run
            yield Result(name, Status.FAIL, [Finding(f"synthesis raised {first_line(exc)}")])
