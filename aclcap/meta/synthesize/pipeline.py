"""check-meta --synthesize / --synthesize-cpp: for each op to synthesize, real calls from a
worker (observation.py), a rule per op (infer.py), source (emit_python.py, emit_cpp.py),
and a fresh worker that loads that source after the op library and runs the battery on
calls held out of fitting (verify). The file is written again with each function's
verification in its comment: a failing check is named there, never passed over. A call whose
two eager runs differ is the kernel's fault, not the fake's: a kernel finding (faults.py)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from aclcap._compat import custom_op_def
from aclcap._isolated import ChildDied, run_isolated
from aclcap.build import BuildError, cache_root
from aclcap.errors import UsageError
from aclcap.loading.model_file import load_model_file
from aclcap.meta.crashes import composite_fix
from aclcap.meta.observe import BUILD, STEP, ObservedCall
from aclcap.meta.options import CheckMetaOptions
from aclcap.meta.registry import MetaKind, OpInfo, generated_fake, resolve_overload
from aclcap.meta.runner import HUNG, MetaReport, run_checks
from aclcap.meta.synthesize.describe import describe_rule
from aclcap.meta.synthesize.emit_cpp import build_meta_library, emit_cpp, library_name
from aclcap.meta.synthesize.emit_python import emit_python
from aclcap.meta.synthesize.infer import (
    SynthesisError,
    contiguous,
    held_out,
    infer,
    regime_of,
)
from aclcap.meta.synthesize.observation import AS_GIVEN, call_key, crashed_call
from aclcap.meta.synthesize.rules import OpRule, Unbacked
from aclcap.meta.synthesize.signatures import probe_signatures
from aclcap.meta.synthesize.verify import IN_WORDS
from aclcap.status import Status

MAX_VERIFY = 4  # held-out calls the battery runs per op (opcheck and a compile each)


@dataclass
class Synthesis:
    """One op's synthesis: the rule, or why there is none; how it was verified."""

    op: str
    rule: OpRule | None = None
    reason: str = ""  # why no rule: no samples, the kernel crashed, an output kind
    observed: int = 0
    tried: int = 0
    rejected: int = 0
    sample_sources: list[str] = field(default_factory=list)
    unseen_keys: list[str] = field(default_factory=list)
    verified: dict[str, str] = field(default_factory=dict)  # "python"/"cpp" -> "" or failure
    skipped: list[str] = field(default_factory=list)  # checks torch cannot run on this op
    checks: list[str] = field(default_factory=list)  # the checks of the battery it passed
    meta_diffs: list[str] = field(default_factory=list)
    meta_compared: int = 0  # calls the op's existing meta ran on (--synthesize-all)
    crashed: list[str] = field(default_factory=list)  # calls that crashed the kernel
    no_samples: bool = False  # nothing to learn from: counted apart, not as a failure of it
    # Calls whose two eager runs differed (faults.py): the kernel's fault, one line per kind
    kernel_findings: list[str] = field(default_factory=list)
    # The same, only on calls aclcap varied (a sample as given agreed with itself): said, and
    # no failure of the run, since such a call may be outside the op's contract
    kernel_warnings: list[str] = field(default_factory=list)
    unverified: str = ""  # why the verifying worker had no call left to judge the fake on

    @property
    def ok(self) -> bool:
        return self.rule is not None and bool(self.verified) and not any(
            self.verified.values()) and not self.rule.unproven and not self.unverified

    def failures(self) -> list[str]:
        """`python: <why>` per language whose verification failed."""
        return [f"{kind}: {why}" for kind, why in self.verified.items() if why]

    def verdict(self) -> str:
        """`synthesized, verified on 4 unseen calls`, or what failed."""
        if self.rule is None:
            return f"not synthesized: {self.reason}"
        if self.failures():
            return "synthesized, verification FAILED (" + "; ".join(self.failures()) + ")"
        if self.rule.unregistered:
            return f"synthesized, not registered: {self.rule.unregistered}"
        if not self.unseen_keys:
            return "synthesized, NOT verified: no call was left unseen to verify it on"
        if self.unverified:
            return f"synthesized, NOT verified: {self.unverified}"
        if self.rule.unproven:
            return (f"synthesized, passed {len(self.unseen_keys)} unseen calls but NOT "
                    "verified, unproven: " + "; ".join(self.rule.unproven))
        return f"synthesized, verified on {len(self.unseen_keys)} unseen calls" + (
            f" ({'; '.join(self.skipped)})" if self.skipped else "")

    def to_dict(self) -> dict:
        """The JSON `synthesis` field of the op's row."""
        rule = self.rule
        return {
            "status": "verified" if self.ok else "not_synthesized" if rule is None else
            "failed" if self.failures() else "not_registered" if rule.unregistered else
            "not_verified" if self.unverified else "unproven" if rule.unproven else "failed",
            "kernel_findings": self.kernel_findings,
            "kernel_warnings": self.kernel_warnings,
            "unproven": rule.unproven if rule else [],
            "verdict": self.verdict(),
            "rule": describe_rule(rule) if rule else [],
            "evidence": rule.evidence if rule else "",
            "notes": rule.notes if rule else [],
            "calls_observed": self.observed, "calls_tried": self.tried,
            "calls_rejected": self.rejected, "fitted_on": rule.fitted_on if rule else 0,
            "unseen_calls": len(self.unseen_keys),
            "verified": {k: not v for k, v in self.verified.items()},
            "failures": {k: v for k, v in self.verified.items() if v},
            "checks": self.checks,
            "checks_skipped": self.skipped,
            "writes": rule.writes if rule else [],
            "defects": [{"message": d.message, "corrected_schema": d.corrected_schema}
                        for d in rule.defects] if rule else [],
            "meta_diffs": self.meta_diffs, "meta_compared": self.meta_compared,
            "sample_sources": self.sample_sources, "crashed_calls": self.crashed,
        }


def targets(ops: list[OpInfo], statuses: dict[str, Status], everything: bool) -> list[OpInfo]:
    """The ops to synthesize: every op with tensors (`everything`), else those whose meta
    is missing or fails, and those left to torch's generated trivial fake (no meta of
    their own: they fail on the meta device). Never an op torch makes the fake of from its
    tag (torch.Tag.out, torch.Tag.inplace): check-meta checks torch's against the kernel."""
    return [o for o in ops if o.meta_kind != MetaKind.NO_TENSOR and (
        everything or o.meta_kind == MetaKind.TRIVIAL
        or statuses.get(o.qualname) in (Status.MISSING, Status.FAIL))
        and not generated_fake(o.overload())]


LAID_OUT = 2  # of the MAX_VERIFY held-out calls, those with an input laid out otherwise


def _spread(keys: list[str], count: int) -> list[str]:
    """`count` of `keys`, spread over them (first and last included)."""
    if len(keys) <= count:
        return keys
    if count == 1:
        return keys[:1]
    step = (len(keys) - 1) / (count - 1)
    return [keys[round(i * step)] for i in range(count)]


def _strided(call: ObservedCall) -> bool:
    """A tensor input laid out otherwise than contiguous (transposed, a strided slice)."""
    return any(a.tensor is not None and not contiguous(a.tensor) for a in call.args)


def _unseen(calls: list[ObservedCall]) -> list[str]:
    """Keys of held-out calls that no fitted call shares, at most MAX_VERIFY, spread over
    them (the held-out calls run from declared samples to the last variations), LAID_OUT
    of them with an input laid out otherwise where any is held out: a fake verified only
    on contiguous calls was wrong on a transposed one (issue 58)."""
    held = set(held_out(len(calls)))
    fitted = {call_key(c) for i, c in enumerate(calls) if i not in held}
    by_key = {call_key(calls[i]): calls[i] for i in sorted(held)}
    unseen = [k for k in by_key if k not in fitted]
    laid = _spread([k for k in unseen if _strided(by_key[k])], LAID_OUT)
    return laid + _spread([k for k in unseen if k not in laid], MAX_VERIFY - len(laid))


MAX_PASSES = 16  # workers one op's observation may take before it stops


def observe(ops: list[OpInfo], options: CheckMetaOptions, namespaces: list[str],
            diff_meta: bool, on_done: Callable[[str], None] | None = None
            ) -> tuple[dict, dict[str, list[tuple[str, str]]]]:
    """Real calls of each op from workers. A kernel that crashes a worker is observed again
    in a fresh one, each call in a child of its own (observe_op's `isolate`): the crash is
    then that call's alone, and so is any heap a kernel corrupted, which in one worker
    made later calls crash in some runs and not others. A change that hung the kernel
    (torch-cluster's random_walk at `p=0`) is not made again, on any sample nor chained
    with another change: each hang costs the deadline. The workers' outcomes per op, and
    per op the calls that crashed or hung: (call, how)."""
    hung: dict[str, list[tuple[int, str, str]]] = {}  # per op: (index, change, how)
    isolated: set[str] = set()
    given: dict[str, str] = {}  # how a sample as given crashed: a broken kernel
    passes: Counter[str] = Counter()
    todo, outcomes = ops, {}
    while todo:
        asked = {op: {"skip": [i for i, _, _ in hung.get(op, [])],
                      "hung": [what for _, what, _ in hung.get(op, [])],
                      "isolate": op in isolated} for op in {*hung, *isolated}}
        got = run_checks(todo, options, namespaces, on_done if todo is ops else None,
                         mode="observe", synthesis={"diff_meta": diff_meta, **asked})
        outcomes.update(got)
        again = []
        for o in todo:
            checked = got.get(o.qualname)
            crash = crashed_call(checked.crashed_in) if checked is not None else None
            if crash is None:
                continue
            index, what = crash
            how = checked.death or "crashed"
            passes[o.qualname] += 1
            if what == AS_GIVEN:  # no call outside the op's contract: the op ends
                given[o.qualname] = how
                continue
            if how.startswith(HUNG):
                hung.setdefault(o.qualname, []).append((index, what, how))
            else:  # in a worker that ran other calls before: observed again, isolated
                isolated.add(o.qualname)
            if passes[o.qualname] < MAX_PASSES:
                again.append(o)
        todo = again
    crashes = {}
    for o in ops:
        outcome = outcomes.get(o.qualname)
        seen = outcome.synthesis or {} if outcome is not None else {}
        crashes[o.qualname] = [*((what, how) for _, what, how in hung.get(o.qualname, [])),
                               *(tuple(c) for c in seen.get("crashed", [])),
                               *([(AS_GIVEN, given[o.qualname])] if o.qualname in given else [])]
    return outcomes, crashes


def observe_and_infer(ops: list[OpInfo], options: CheckMetaOptions, namespaces: list[str],
                      diff_meta: bool, on_done: Callable[[str], None] | None = None
                      ) -> list[Synthesis]:
    """Real calls of each op from a worker, and the rule they give."""
    observed, crashes = observe(ops, options, namespaces, diff_meta, on_done)
    made = []
    for o in ops:
        got = observed.get(o.qualname)
        crashed = crashes.get(o.qualname, [])
        result = Synthesis(o.qualname, crashed=[f"{what}: {how}" for what, how in crashed])
        made.append(result)
        broken = next((how for what, how in crashed if what == AS_GIVEN), None)
        if got is None or got.synthesis is None or broken:
            result.reason = "; ".join(f.message for f in got.findings) if got else \
                "the worker never reached it"
            if crashed:
                what, how = crashed[-1]
                result.reason = f"{how} on {'a sample as given' if what == AS_GIVEN else what}"
            if broken:  # a child of an isolated worker: the kernel broken as callers call it
                result.reason = f"{broken} on a sample as given"
            continue
        seen = got.synthesis
        result.sample_sources = got.sample_sources
        result.observed, result.tried = len(seen["calls"]), seen["tried"]
        result.rejected, result.meta_diffs = seen["rejected_count"], seen["meta_diffs"]
        result.meta_compared = seen["meta_compared"]
        result.kernel_findings = list(seen.get("kernel_findings", []))
        result.kernel_warnings = list(seen.get("kernel_warnings", []))
        if got.sample_count == 0:
            result.no_samples = True
            result.reason = ("no samples: synthesis needs real calls; declare them with "
                             "@aclcap.samples or pass --samples-from MODEL.py (--emit-stubs "
                             "writes a stub meanwhile)")
            continue
        calls = [ObservedCall.from_dict(c) for c in seen["calls"]]
        if not calls and (result.kernel_findings or result.kernel_warnings):
            result.reason = "no call whose two eager runs agree was left to learn from"
            continue
        if not calls:
            result.reason = (f"the kernel rejected all {result.tried} calls tried, e.g. "
                             + (seen["rejected"][0] if seen["rejected"] else "?"))
            continue
        try:
            result.rule = infer(resolve_overload(o.qualname), calls, rejected=[
                *seen.get("rejected_changes", []), *(what for what, _ in crashed)])
        except SynthesisError as exc:
            result.reason = str(exc)
            continue
        if _step_data_dependent(result.rule, calls):
            result.rule.notes.append(
                "the step calls it with a data-dependent output size: a device graph cannot "
                "hold it, so the step breaks there " + (
                    "(its C++ composite body runs while tracing and stops the trace before "
                    "any graph: call it through a torch.library.custom_op carrying this fake, "
                    "then list that op in SPLITTING_OPS)" if o.meta_kind ==
                    MetaKind.COMPOSITE_CPP else "(list it in SPLITTING_OPS to run it eagerly "
                    "between captured pieces)"))
        if result.crashed:
            # The file names a crash without its signal: memory a kernel corrupts ends it
            # by SIGSEGV in one run and SIGABRT in the next (torch-cluster's fps), and the
            # same command must write the same file. crashed_calls keeps the signal.
            counts = Counter(f"{what}: {'crashed' if how.startswith('crashed') else how}"
                             for what, how in crashed)
            result.rule.notes.append(
                f"{len(result.crashed)} call(s) crashed or hung the kernel and were "
                "skipped: " + "; ".join(what + (f" ({n} calls)" if n > 1 else "")
                                        for what, n in counts.items()))
        guard = result.rule.rank_guard
        if guard is not None:  # the fake refuses other ranks: no call of them verifies it
            calls = [c for c in calls if len(c.arg(guard.arg).tensor.shape) in guard.ranks]
        result.unseen_keys = _unseen(calls)
    return made


def verify(done: list[Synthesis], ops: list[OpInfo], options: CheckMetaOptions,
           namespaces: list[str], library: str, kind: str,
           on_done: Callable[[str], None] | None = None) -> None:
    """Load `library` (the emitted .py, or the .so built from the emitted .cpp) after the
    op libraries in a fresh worker and run the battery on each op's unseen calls; record
    "" (passed) or the failing checks under `kind`. A call whose two eager runs differ is
    the kernel's fault (faults.py): kept as a kernel finding, never held against the fake."""
    todo = {s.op: s for s in done if s.rule is not None and s.unseen_keys}
    if not todo:
        return
    try:
        checked = run_checks([o for o in ops if o.qualname in todo],
                             replace(options, libs=[*options.libs, library]), namespaces,
                             on_done, mode="verify", synthesis={
                                 op: {"keys": s.unseen_keys, "isolate": bool(s.crashed)}
                                 for op, s in todo.items()})
    except UsageError as exc:  # the emitted file itself fails to load: every op fails
        for s in todo.values():
            s.verified[kind] = f"the emitted file fails to load: {exc}"
        return
    for op, s in todo.items():
        got = checked.get(op)
        # held-out calls are mostly aclcap's variations: a fault first seen there warns
        faults = (got.synthesis or {}).get("kernel_findings", []) if got is not None else []
        s.kernel_warnings += [f for f in faults if f not in s.kernel_findings + s.kernel_warnings]
        if got is None:
            s.verified[kind] = "the verifying worker never reached it"
        elif got.status != Status.PASS:
            s.verified[kind] = "; ".join(f.message for f in got.findings) or str(got.status)
        elif not (got.synthesis or {}).get("verified_on") and faults:
            s.unverified = ("no held-out call was left whose two eager runs agree (see the "
                            "kernel finding)")
        elif not (got.synthesis or {}).get("verified_on"):
            s.verified[kind] = "the verifying worker could not make the held-out calls again"
        else:
            s.verified[kind] = ""
            s.skipped = got.synthesis.get("skipped", [])
            s.checks = got.synthesis.get("checks", [])


def set_verdicts(done: list[Synthesis]) -> None:
    """Each rule's `verified` text, which the emitted comments print."""
    for s in done:
        if s.rule is not None:
            s.rule.verified = s.verdict().removeprefix("synthesized, ")
            if s.ok:
                kinds = " and ".join(f"the {k} meta" for k in s.verified)
                s.rule.verified += (f" with {kinds}: " + ", ".join(
                    dict.fromkeys(IN_WORDS[c] for c in s.checks)))
            s.rule.verified += "".join(f"; KERNEL FINDING: {k}" for k in s.kernel_findings)
            s.rule.verified += "".join(f"; kernel warning: {k}" for k in s.kernel_warnings)


# An absolute path; it ends where a compiler's quotes (curly ones too), a colon or a bracket begin.
_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:'\"\u2018\u2019()\[\],]+/)+"
                   r"([^\s/:'\"\u2018\u2019()\[\],]+)")


def file_names(text: str) -> str:
    """`text` with each absolute path cut to its file name: what synthesis reports and
    writes into the emitted files names no folder of this machine (the build folder, the
    home, site-packages), only the file a reader looks for."""
    return _PATH.sub(r"\1", text)


def first_error(message: str) -> str:
    """The compiler's first error line of a failed build's message, paths cut to file names:
    one line says what broke; the command ninja ran (absolute paths, every flag) is left out."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    causes = [ln for ln in lines if not ln.startswith("Error building extension")] or lines
    line = next((ln for ln in lines if re.search(r"\berror:", ln)), causes[0] if causes else "")
    return file_names(line.split(": [1/", 1)[0])  # "Error building extension 'x': [1/2] c++ .."


def _compile_in_child(source: Path, build_dir: Path) -> Path:
    """Build the emitted C++ and load it, in a child process: a Meta kernel the dispatcher
    refuses aborts the process that loads it. BuildError with the compiler's first error
    line (first_error) otherwise."""
    try:
        return run_isolated(build_meta_library, source, build_dir)
    except ChildDied as exc:
        mismatch = "Mismatch in kernel C++ signatures"
        if mismatch in exc.output:
            operator = exc.output.split("operator: ", 1)[-1].split("\n", 1)[0]
            raise BuildError(f"{mismatch} of {operator} (the library's kernel takes other "
                             "parameter types)") from None
        raise BuildError(first_error(str(exc).removeprefix("BuildError: "))) from None


def _build_cpp(rules: list[OpRule], probing: Future, header: str, cpp_out: Path) -> Path:
    """Emit the C++ in the library's own signatures (`probing`'s result), build and load
    it in a child; the library's path."""
    cpp_out.write_text(emit_cpp(rules, header=header, signatures=probing.result()))
    return _compile_in_child(cpp_out, cache_root() / "synthesized" / library_name(cpp_out))


def _cpp_cannot_serve(done: list[Synthesis], ops: list[OpInfo]) -> None:
    """Ops no C++ Meta kernel can serve, whatever the rule: torch asks a
    torch.library.custom_op's own fake slot, and a library's Python fake takes precedence
    over a C++ Meta kernel. Their rules stay Python's, said once in the C++ file; verifying
    such a kernel would only fail, and hold the right Python fake back with it."""
    kinds = {o.qualname: o for o in ops}
    for s in done:
        info = kinds.get(s.op)
        if s.rule is None or info is None:
            continue
        if custom_op_def(s.op.removesuffix(".default")) is not None:
            s.rule.no_cpp = ("a torch.library.custom_op: torch asks its own fake slot "
                             "(register_fake), never a C++ Meta kernel")
        elif info.meta_kind in (MetaKind.PYTHON, MetaKind.PYTHON_META):
            s.rule.no_cpp = (f"the library's own fake, {file_names(info.meta_source)}, takes "
                             "precedence over a C++ Meta kernel for fake tensors")


def _not_registered(done: list[Synthesis], ops: list[OpInfo]) -> None:
    """An op whose C++ body runs on fake tensors while tracing (a C++ composite, a C++
    Autograd kernel) takes no fake: torch refuses register_fake on a composite, and either
    body runs before any fake is reached. Its rule is written, unregistered, with the fix."""
    kinds = {o.qualname: o for o in ops}
    for s in done:
        info = kinds.get(s.op)
        if s.rule is None or info is None:
            continue
        where = info.meta_source.split("(", 1)[-1].split(")", 1)[0]
        if info.meta_kind == MetaKind.COMPOSITE_CPP:
            how = "torch::RegisterOperators" if "RegisterOperators" in where else \
                "m.def with its function"
            s.rule.unregistered = (
                f"`{s.op}` is a C++ composite ({how}, {where}): tracing runs that body on fake "
                f"tensors and never reaches a fake. To use this meta, "
                f"{composite_fix(s.op.split('.', 1)[0])}")
        elif info.meta_kind == MetaKind.AUTOGRAD_CPP:
            s.rule.unregistered = (
                f"`{s.op}` has a C++ Autograd kernel ({where}) whose body runs on fake tensors "
                "while tracing, before any fake: make it redispatch to the op below Autograd "
                "(at::AutoDispatchBelowADInplaceOrView, then the op itself), then register "
                "this meta")


def synthesize(ops: list[OpInfo], options: CheckMetaOptions, namespaces: list[str],
               python_out: Path | None, cpp_out: Path | None, diff_meta: bool = False,
               on_done: Callable[[str], None] | None = None, header: str = ""
               ) -> tuple[list[Synthesis], Path | None, str]:
    """Observe, infer, emit, verify, and emit again with the verdicts in the comments. Each
    language is judged alone: a fake that failed is written, not registered, in its own
    file, the reason above it; the other language's fake stands or falls by itself, and a
    C++ file that does not build leaves the Python verdicts as they are. The ops'
    syntheses, the library built from the C++ file (None if none was), and the compiler's
    first error line where it did not build ("" otherwise)."""
    library, not_built = None, ""
    done = observe_and_infer(ops, options, namespaces, diff_meta, on_done)
    _not_registered(done, ops)
    _cpp_cannot_serve(done, ops)
    rules = [s.rule for s in done if s.rule is not None]
    registered = [s for s in done if s.rule is not None and not s.rule.unregistered]
    with ThreadPoolExecutor(1) as pool:  # the compiler runs beside the Python verification
        if cpp_out is not None:
            probing = pool.submit(probe_signatures, options.libs, [r.op for r in rules],
                                  cache_root() / "probe")
            building = pool.submit(_build_cpp, rules, probing, header, cpp_out)
        if python_out is not None:
            python_out.write_text(emit_python(rules, header=header))
            verify(registered, ops, options, namespaces, str(python_out.resolve()), "python",
                   on_done)
        if cpp_out is not None:
            try:
                library = building.result()
            except BuildError as exc:  # said once, for the run: no op's fake is at fault
                not_built = file_names(str(exc))
                if python_out is None:  # no other language verified them: none stands
                    for s in registered:
                        s.verified["cpp"] = ("not built: the emitted C++ does not build (the "
                                             "run's C++ build error says why)")
            else:
                cpp_ops = [s for s in registered if not s.rule.python_only()]
                verify(cpp_ops, ops, options, namespaces, str(library), "cpp", on_done)
                if python_out is None:  # the C++ file has none for these (emit_cpp says why)
                    for s in registered:
                        if s.rule.python_only():
                            s.verified["cpp"] = (f"no C++ Meta kernel: {s.rule.python_only()}"
                                                 "; --synthesize FILE.py writes its Python "
                                                 "fake")
    for s in done:  # the reasons name files, never this machine's folders
        s.verified = {kind: file_names(why) for kind, why in s.verified.items()}
        if s.rule is not None:
            s.rule.notes = [file_names(note) for note in s.rule.notes]
            s.rule.unregistered = file_names(s.rule.unregistered)
    set_verdicts(done)
    # Each file holds back the fakes that failed in its own language only: a C++ kernel
    # that failed never holds back the Python fake that passed, nor the reverse.
    if python_out is not None:
        _hold_back(registered, "python")
        python_out.write_text(emit_python(rules, header=header))
    if cpp_out is not None:
        _hold_back(registered, "cpp")
        cpp_out.write_text(emit_cpp(rules, header=header, signatures=probing.result(),
                                    not_built=not_built))
    for s in registered:  # the report's word: what failed, in either language
        if s.failures():
            s.rule.unregistered = "verification failed (" + "; ".join(s.failures()) + ")"
    return done, library, not_built


def _hold_back(registered: list[Synthesis], kind: str) -> None:
    """Mark unregistered, for the file of language `kind`, each fake that failed there; a
    rule that language never verified (its file did not build) takes the other's verdict,
    for the same rule."""
    for s in registered:
        assert s.rule is not None
        if kind in s.verified:
            why = f"{kind}: {s.verified[kind]}" if s.verified[kind] else ""
        else:
            why = "; ".join(s.failures())
        s.rule.unregistered = f"verification failed ({why})" if why else ""


def _step_data_dependent(rule: OpRule, calls: list[ObservedCall]) -> bool:
    """A model step's own call of the op gets an output size the data decides, in the
    regime the step calls it in (a scatter the step gives `dim_size` holds no such size),
    for an output it returns (bnb's outlier columns are None at threshold 0)."""
    return any(isinstance(e, Unbacked) and e.data_dependent
               for c in calls if c.phase in (STEP, BUILD)
               for i, o in enumerate(rule.outputs) if c.outputs and c.outputs[i] is not None
               for e in regime_of(o, c).sizes())


@dataclass
class SynthesisRun:
    """What `check-meta --synthesize` did: per op its synthesis, the files, the time."""

    done: list[Synthesis]
    files: list[Path]
    seconds: float
    library: Path | None = None  # built from the emitted C++
    cpp_build_error: str = ""  # the compiler's first error line where it did not build
    left_to_torch: list[str] = field(default_factory=list)  # tagged ops: torch's own fake

    def summary(self) -> dict:
        """The JSON document's `synthesis`: files, the C++ library or why it did not build,
        the time."""
        return {"files": [str(f) for f in self.files],
                "cpp_library": str(self.library) if self.library else None,
                "cpp_build_error": self.cpp_build_error or None,
                "seconds": round(self.seconds, 1), "ops": len(self.done),
                "synthesized": sum(s.rule is not None for s in self.done),
                "verified": sum(s.ok for s in self.done),
                "kernel_findings": sum(bool(s.kernel_findings) for s in self.done),
                "left_to_torch": self.left_to_torch}

    @property
    def by_op(self) -> dict[str, Synthesis]:
        return {s.op: s for s in self.done}

    @property
    def ok(self) -> bool:
        """Every op synthesized and verified, the C++ built, and no kernel finding (the
        kernel is broken, whatever its fake): else the run exits 1."""
        return all(s.ok and not s.kernel_findings for s in self.done) \
            and not self.cpp_build_error


def load_first(libs: list[str], models: list[str], python_out: Path | None) -> str:
    """The written file's paragraph on what defines the ops it registers on, and how to load
    it after that: the --lib libraries, and what each model file's import loads (the .so
    files it loaded, its OP_LIBRARIES), found when it was imported, not declared."""
    defined = [Path(lib).name if Path(lib).is_file() else lib for lib in libs]
    for model in models:
        spec = load_model_file(model)
        loads = [Path(so).name for so in spec.loads] + [
            Path(lib).name if Path(lib).is_file() else lib for lib in spec.op_libraries]
        defined.append(f"what {spec.path.name} loads when imported ({', '.join(loads)})"
                       if loads else f"{spec.path.name}'s import")
    if not defined:
        return ""
    this = python_out.name if python_out is not None else "THIS_FILE"
    how = [f"`aclcap capture {Path(m).name} --fakes {this}`" for m in models]
    how += [f"`aclcap check-meta {' '.join(f'--samples-from {Path(m).name}' for m in models)}"
            f"{''.join(f' --lib {lib}' for lib in defined[:len(libs)])} --lib {this}`"]
    return (f"The ops are defined by {'; '.join(defined)}. Load this file after that: "
            f"{', '.join(how)}, or import it where your code has loaded the library.")


def run_synthesis(report: MetaReport, options: CheckMetaOptions, python_out: Path | None,
                  cpp_out: Path | None, everything: bool,
                  on_done: Callable[[str], None] | None = None) -> SynthesisRun:
    """Synthesize for the ops of a check-meta report: those whose meta is missing or fails
    (every op with tensors with `everything`, which also diffs the metas there)."""
    start = time.monotonic()
    statuses = {r.op: r.status for r in report.results}
    ops = targets(report.ops, statuses, everything)
    models = [str(Path(m).resolve()) for m in options.samples_from]
    header = load_first(options.libs, options.samples_from, python_out)
    # What the model files load (their OP_LIBRARIES, the .so files their imports load) is
    # what the C++ signature probe needs; the workers load it by importing the model files.
    libs = [*options.libs, *(lib for m in models for lib in (
        load_model_file(m).op_libraries + load_model_file(m).loads))]
    options = replace(options, samples_from=models, libs=list(dict.fromkeys(libs)))
    done, library, not_built = synthesize(ops, options, report.namespaces, python_out, cpp_out,
                                          everything, on_done, header) if ops else ([], None, "")
    files = [p for p in (python_out, cpp_out) if p is not None and ops]
    return SynthesisRun(done, files, time.monotonic() - start, library, not_built,
                        left_to_torch=[o.qualname for o in report.ops
                                       if generated_fake(o.overload())])
