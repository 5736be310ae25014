"""cpu: no device graphs exist on a CPU, so the traced step is "captured" as one
AOTInductor artifact (torch.export with the size dim dynamic, then
aoti_compile_and_package): a C++ replay with no Python dispatch per op. One artifact
serves every size, or one per size range where the step branches on its size; each is
cached on disk under a key of everything that changes it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from aclcap import _version
from aclcap._compat import (
    OpOverload,
    aoti_compile_and_package,
    aoti_package_loader,
    is_opaque,
    pytree,
)
from aclcap.build import cache_root
from aclcap.cache_budget import prune, touch
from aclcap.errors import CaptureError, first_line, value_dependent
from aclcap.graph.backends.base import BackendSummary, Captured, StepContext
from aclcap.graph.backends.trace_key import (
    index_path,
    read_index,
    tensor_digest,
    trace_key,
    write_index,
)
from aclcap.graph.backends.weights import (
    NOTE,
    load_weights,
    program_weights,
    record,
    shareable,
    shared_artifact,
)
from aclcap.graph.compiles import CompileLog, compile_over_sizes
from aclcap.graph.distributed import settle
from aclcap.graph.export import SizeRange, export_ranges
from aclcap.graph.options import StepOptions
from aclcap.host_values import tensors_of
from aclcap.loading.libraries import BUILTIN_NAMESPACES, BUNDLED
from aclcap.loading.model_file import ModelSpec


def default_cache_dir() -> Path:
    return cache_root() / "aoti"


def library_fingerprint(spec: ModelSpec) -> str:
    """What the artifact calls into: the op libraries' files (the bundled one's stamp), the
    libraries the model file's import loaded and the fakes loaded after it."""
    parts = []
    for lib in [*spec.op_libraries, *spec.loads, *spec.fakes]:
        path = spec.path.parent / lib
        if path.is_file():
            parts.append(hashlib.sha256(path.read_bytes()).hexdigest())
        elif lib == BUNDLED:
            from aclcap.build import bundled_fingerprint

            parts.append(bundled_fingerprint())
        else:
            parts.append(lib)
    return "|".join(parts)


def _toolchain(factors: dict[str, Any]) -> list[str]:
    """What both cache keys hash beside the step itself: torch's version, aclcap's with its
    sources (`code_fingerprint`), the CPU's vector ISA (an artifact compiled for AVX512 is
    not loaded on an AVX2 machine sharing the cache: see `load_artifact`) and the options'
    `cache_factors()` (StepOptions.CACHE_IGNORED says why the others stay out)."""
    return [torch.__version__, _version.code_fingerprint(),
            torch.backends.cpu.get_cpu_capability(), repr(sorted(factors.items()))]


def _environment(spec: ModelSpec, factors: dict[str, Any]) -> list[str]:
    """The trace key's environment: the toolchain and the op libraries' files, which stand
    in there for the fakes the traced graphs saw (see `_custom_op_calls`)."""
    return [*_toolchain(factors), library_fingerprint(spec)]


def _fake_facts(value: Any) -> str:
    """Shape, strides, offset and dtype of a node's fake value(s), symbols as they print."""
    if isinstance(value, torch.Tensor):
        return f"{value.dtype}{list(value.shape)}{list(value.stride())}+{value.storage_offset()}"
    if isinstance(value, list | tuple):
        return "(" + ",".join(_fake_facts(v) for v in value) + ")"
    return repr(value)


def _custom_op_calls(exported: torch.export.ExportedProgram) -> list[str]:
    """What the artifact takes from the op libraries: each custom op call's schema and the
    fake outputs its meta gave. The artifact calls the kernels through the dispatcher by
    name when it runs, so a rebuilt kernel with the same schema and meta reuses it: a kernel
    author's edit costs an export, not a compile. (A mutating op sits in a functionalizing
    higher-order op: it is among that node's arguments.)"""
    parts = []
    for node in exported.graph_module.graph.nodes:
        for op in (node.target, *node.args):
            if isinstance(op, OpOverload) and op.namespace not in BUILTIN_NAMESPACES:
                parts.append(f"{op._schema} -> {_fake_facts(node.meta.get('val'))}")
    return parts


def program_key(exported: torch.export.ExportedProgram,
                factors: dict[str, Any] | None = None, values: bool = True) -> str:
    """A key of what the artifact is compiled from: the exported graph's code, its input
    and output signature, ranges and input layouts (the artifact assumes its inputs'
    strides: a strided view and a contiguous copy need two artifacts), every weight and
    constant (shape, dtype and values: AOTI bakes them in), its custom op calls and the
    `_toolchain`. Keyed on the model file's text instead, a step that reads an environment
    variable or a config file would reuse the artifact of another graph. `values=False`:
    the structure key, the same for programs that differ only in their weights' values
    (`weights.py`)."""
    h = hashlib.sha256()
    parts = [exported.graph_module.code, str(exported.call_spec.in_spec),
             str(exported.call_spec.out_spec), str(exported.range_constraints),
             *_toolchain(factors or {}), *_custom_op_calls(exported),
             *(_fake_facts(n.meta.get("val")) for n in exported.graph_module.graph.nodes
               if n.op == "placeholder")]
    parts += [f"{name}:{list(v.shape)}:{v.dtype}" + (f":{tensor_digest(v)}" if values else "")
              for name, v in sorted(program_weights(exported).items())]
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


_LIFTED = re.compile(r"fake tensor in the exported program constant's list.*?model "
                     r"attribute:\s*([\w.]+)\.lifted_tensor_\d+", re.S)


def _lifted_source(model: torch.nn.Module, path: str) -> str:
    """Where the module at `path` (a lifted tensor's owner) reaches a tensor through `.data`:
    its class and the line, found in its class's source."""
    import inspect

    try:
        owner = model.get_submodule(path)
    except AttributeError:
        return f"`{path}`"
    for cls in type(owner).__mro__:
        try:
            lines, start = inspect.getsourcelines(cls)
        except (OSError, TypeError):
            continue
        for i, line in enumerate(lines):
            if ".data" in line and not line.lstrip().startswith("#"):
                return (f"`{path}` ({cls.__name__}) at {Path(inspect.getfile(cls)).name}:"
                        f"{start + i} (`{line.strip()}`)")
    return f"`{path}` ({type(owner).__name__})"


def _export_advice(exc: CaptureError, log: CompileLog | None, model_file: Path,
                   model: torch.nn.Module | None = None) -> str:
    """The export failure with the advice its kind needs: a branch on a tensor's values
    needs torch.cond or to leave the step; a branch on the size can be captured by ranges;
    a tensor reached around the module's state (`self.weight.data`) is named with its line."""
    if model is not None and (lifted := _LIFTED.search(str(exc))):
        return (f"torch.export cannot lift a tensor the step reaches through `.data` or "
                f"creates while tracing: {_lifted_source(model, lifted.group(1))}")
    if value_dependent(exc):
        site = re.search(r"([^\s(/]+\.py):(\d+) in ", str(exc.__cause__ or exc))
        where = f" at {model_file.name}:{site.group(2)}" if site and \
            model_file.name == site.group(1) else ""
        return (f"{exc}; the step branches on a tensor's values{where}: make the branch a "
                "torch.cond, or move it out of the step (decide before the step and pass the "
                "result in)")
    if "UnsupportedOperatorException" in str(exc):  # an op with no fake: no guard at all
        return f"{exc}: it has no fake impl"  # capture's rows say how to write the fakes
    guards = log.guards() if log else []
    where = f"; the step guards on its size {guards[0].source()}" \
        if guards and guards[0].file else ""
    return (f"{exc}{where}: make the branch a torch.cond, or capture the sizes on each side in "
            "separate runs")


def process_local(exported: torch.export.ExportedProgram) -> list[str]:
    """Tensors the program bakes in that hold a pointer of this process: an integer
    constant that is no parameter or buffer (an op made it at load time: vLLM's oneDNN
    handles, a raw address in an int64 0-d tensor) with a value past 2**32, where user-space
    addresses lie. Baked into an artifact, another process would call through it."""
    return [name for name, value in exported.constants.items()
            if isinstance(value, torch.Tensor) and value.dtype in (torch.int64, torch.uint64)
            and 0 < value.numel() <= 16 and int(value.abs().max()) >= 2**32]


def opaque_arguments(program: torch.export.ExportedProgram) -> list[str]:
    """The opaque values the program passes to its ops (vLLM's `LayerName`), each once, as
    `LayerName (argument 2 of vllm::unified_kv_cache_update)`: AOTInductor compiles such a
    program, and its C++ runner then refuses to load it ("Unsupported input type
    as_custom_obj for extern kernel"). Read from the graph, so the mechanism is chosen before
    a compile that cannot serve."""
    found: dict[str, str] = {}
    for node in program.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        schema = node.target._schema
        names = [arg.name for arg in schema.arguments]
        # A keyword argument is named by its schema position too, not by where it falls
        # among the call's keywords.
        for where, value in [*enumerate(node.args), *node.kwargs.items()]:
            i = where if isinstance(where, int) else names.index(where)
            kind = type(value).__name__
            if is_opaque(value) and kind not in found:
                found[kind] = f"{kind} (argument {i}, `{names[i]}`, of {schema.name})"
    return list(found.values())


class ExportFailed(CaptureError):
    """torch.export could not take the step (the message has the advice for its cause)."""


class NotCarried(CaptureError):
    """torch.export took the step, but AOTInductor cannot carry the program (an opaque
    value among its ops' arguments, or an artifact its runner refuses to load): Inductor
    on the Dynamo graph serves instead, as vLLM compiles it."""


class AotiBackend:
    mechanism = "aoti"
    compile_log_in_trace = True  # torch.compile only records guards here: no code to reuse

    def __init__(self, options: StepOptions, compile_backend: Any = None,
                 cache_dir: Path | None = None) -> None:
        self.cache_dir = Path(cache_dir or default_cache_dir())
        # Guards come from Dynamo's frontend, so recording recompiles needs no code generation.
        self.compile_backend = compile_backend or "eager"
        self.options = options
        self.facts = BackendSummary()
        self.phases_s: dict[str, float] = {}
        # Artifacts this run has compiled or loaded, by program key: a program met again
        # (the pieces of identical layers) reuses its artifact, even under --no-cache.
        self._compiled: dict[str, Path] = {}
        # The trace key whose index names the artifacts: given by a cached trace (capture's
        # trace cache), else set by the capture that wrote or read the index; None where
        # the artifacts are not indexed.
        self.index_key: str | None = None
        self.instead: Any = None  # the InductorBackend that captured where export failed

    def summary(self) -> BackendSummary:
        if self.instead is not None:
            return self.instead.summary()
        return replace(self.facts, compile_backend=str(self.compile_backend),
                       inductor_configs=self.options.inductor_configs())

    def _inductor_instead(self, step: StepContext, sizes: list[int],
                          on_size: Callable[[int], None] | None, why: CaptureError
                          ) -> list[Captured]:
        """Where torch.export fails on a step Dynamo traced whole (the trace came first), or
        AOTInductor cannot carry what it exported (NotCarried), compile Dynamo's graph with
        Inductor instead, as vLLM does, and say why."""
        from aclcap.graph.backends.inductor import InductorBackend

        self.instead = InductorBackend(self.options, **{
            "export_failed" if isinstance(why, ExportFailed) else "aoti_refused": str(why)})
        self.mechanism = self.instead.mechanism
        export_s = self.phases_s.get("export")
        try:
            captured = self.instead.capture(step, sizes, on_size)
        except CaptureError as exc:
            raise CaptureError(f"{why}; compiled by Inductor instead: {exc}") from exc
        self.phases_s = {**({"export": export_s} if export_s is not None else {}),
                         **self.instead.phases_s}
        return captured

    def artifact(self, exported: torch.export.ExportedProgram, spec: ModelSpec
                 ) -> tuple[Any, Path, dict[str, Any]]:
        """The compiled artifact of one exported program: from the cache, or compiled (the
        slow part); a corrupt cached artifact is rebuilt with a note."""
        key = program_key(exported, self.options.cache_factors())
        artifact = self._compiled.get(key) or self._cached(key, spec.path.stem)
        hit = (self.options.use_cache or key in self._compiled) and artifact.exists()
        facts: dict[str, Any] = {}
        runner = None
        if hit:
            try:
                runner = load_artifact(artifact)
            except Exception as exc:
                hit = False
                facts["cache_note"] = f"cached artifact unreadable ({first_line(exc)}): rebuilt"
        if runner is None:
            runner, artifact, hit = self._compile_once(key, exported, artifact, facts)
        if not facts.get("weights_loaded"):  # a shared artifact holds another's weights
            self._compiled[key] = artifact
        return runner, artifact, {**facts, **_artifact_facts(artifact, hit)}

    def _cached(self, key: str, stem: str) -> Path:
        """The artifact of `key` compiled for any model file (the key is the program's, so a
        copied or renamed model file reuses it), else a new one named for this model."""
        return self._found(key) or self.cache_dir / f"{stem}-{key}.pt2"

    def _found(self, key: str) -> Path | None:
        found = sorted(self.cache_dir.glob(f"*-{key}.pt2"))
        return found[0] if found else None

    def _compile_once(self, key: str, exported: torch.export.ExportedProgram, artifact: Path,
                      facts: dict[str, Any]) -> tuple[Any, Path, bool]:
        """Compile under a lock per program structure: a second run that needs the same
        program (two CI jobs, two test workers), or the same program with other weights
        (an unseeded model's next run), waits for the first and loads its artifact
        instead of compiling it again at the same time; the other weights are loaded in."""
        from filelock import FileLock

        structure = program_key(exported, self.options.cache_factors(), values=False)
        weights = program_weights(exported)
        stamp = artifact.stat().st_mtime_ns if artifact.exists() else None
        locks = self.cache_dir / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with FileLock(locks / f"{structure}.lock"):
            meanwhile = self._found(key)
            if self.options.use_cache and meanwhile and meanwhile.stat().st_mtime_ns != stamp:
                with contextlib.suppress(Exception):  # unreadable too: compile it here
                    runner = load_artifact(meanwhile)
                    facts["cache_note"] = "compiled meanwhile by another run: loaded"
                    return runner, meanwhile, True
            shared = shared_artifact(self.cache_dir, structure) if self.options.use_cache \
                else None
            if shared is not None:  # recorded only where shareable: names match by the key
                with contextlib.suppress(Exception):  # unreadable or refused: compile here
                    runner = load_artifact(shared)
                    load_weights(runner, weights)
                    facts.update(cache_note=NOTE, weights_loaded=True)
                    return runner, shared, True
            self._compile(exported, artifact)
            try:
                runner = load_artifact(artifact)
            except Exception as exc:  # compiled, yet its runner refuses it
                raise NotCarried(f"AOTInductor's artifact does not load: {first_line(exc)}") \
                    from exc
            if shareable(runner, weights):
                record(self.cache_dir, structure, artifact)
            return runner, artifact, False

    def _compile(self, exported: torch.export.ExportedProgram, target: Path) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial.pt2")
        try:
            aoti_compile_and_package(
                exported, package_path=str(partial),
                inductor_configs=self.options.inductor_configs())  # it adds keys to the dict
        except Exception as exc:
            partial.unlink(missing_ok=True)
            # the op's own defect, which Inductor meets the same way (an alias annotation
            # on an output): said once, not retried
            raise CaptureError(f"AOTInductor compile failed: {first_line(exc)}") from exc
        partial.replace(target)  # atomic: a concurrent run never loads half a file
        prune()  # a new artifact: keep the cache within its budget

    def _load(self, step: StepContext, sizes: list[int], log: CompileLog | None
              ) -> list[tuple[SizeRange, Any, Path]]:
        """The artifacts of every size range: where the trace key names ranges exported by
        an earlier run, straight from the cache; else export (seconds), one program per
        guard range of sizes, then an artifact each, cached or compiled."""
        start = time.perf_counter()
        key = self.index_key or (trace_key(log, sizes, _environment(
            step.spec, self.options.cache_factors())) if log is not None else None)
        # A step with host values is exported every run: its artifacts hold the values of
        # this run's example draw (what the frozen-value report compares against), which
        # an artifact indexed by an earlier run's trace would not.
        index = index_path(self.cache_dir, step.spec.path.stem, key) \
            if key and not step.hosts else None
        loaded = self._load_indexed(index) if index and self.options.use_cache else None
        artifacts: list[dict[str, Any]] = []
        if loaded is not None:
            self.phases_s["export"] = 0.0
            artifacts = [_range_facts(size_range, sizes, _artifact_facts(artifact, hit=True))
                         for size_range, _, artifact in loaded]
        else:
            try:
                ranges = export_ranges(step.model, step.inputs, step.dims, sizes, step.hosts)
            except CaptureError as exc:
                raise ExportFailed(_export_advice(exc, log, step.spec.path, step.model)) from exc
            self.phases_s["export"] = round(time.perf_counter() - start, 3)
            held = dict.fromkeys(what for r in ranges for what in opaque_arguments(r.program))
            if held:
                raise NotCarried(f"the step passes an opaque value to its ops ({', '.join(held)})"
                                 ", which AOTInductor's C++ runner cannot pass")
            loaded = []
            for size_range in ranges:
                began = time.perf_counter()
                runner, artifact, facts = self.artifact(size_range.program, step.spec)
                facts["compile_or_load_s"] = round(time.perf_counter() - began, 3)
                artifacts.append(_range_facts(size_range, sizes, facts))
                loaded.append((size_range, runner, artifact))
            local = [name for r in ranges for name in process_local(r.program)]
            if local:  # keyed on their values: another process's artifact never matches
                artifacts[0]["cache_note"] = (
                    f"{', '.join(sorted(set(local))[:3])} hold(s) a pointer this process made "
                    "(a handle an op made at load time): the artifact is keyed on it and "
                    "never reused by another process")
            # An artifact holding another program's weights is no entry for this trace:
            # loading it from the index would skip loading this program's weights in. Nor is
            # one holding a process's pointer: the index would hand it to the next process.
            if index is not None and not local and \
                    not any(a.get("weights_loaded") for a in artifacts):
                write_index(index, [(r, artifact) for r, _, artifact in loaded])
            elif index is not None:
                index = None  # not indexed: no later run finds these artifacts by it
        self.index_key = key if index is not None else None
        notes = [a["cache_note"] for a in artifacts if "cache_note" in a]
        self.phases_s["compile_or_load"] = round(
            time.perf_counter() - start - self.phases_s["export"], 3)
        self.facts = BackendSummary(
            artifact=artifacts[0]["artifact"],
            artifact_bytes=sum(a["artifact_bytes"] for a in artifacts),
            cache_hit=all(a["cache_hit"] for a in artifacts),
            compile_s=round(time.perf_counter() - start, 3), artifacts=artifacts,
            cache_note=notes[0] if notes else None)
        if len(artifacts) > 1 and log and (guards := log.guards()):
            self.facts.guard = f"guard {guards[0].source() or guards[0].guard()}"
        return loaded

    @staticmethod
    def _load_indexed(index: Path) -> list[tuple[SizeRange, Any, Path]] | None:
        """The indexed ranges' artifacts, loaded; None where the index is missing or stale
        or an artifact will not load (then export decides, and rebuilds what is corrupt)."""
        ranges = read_index(index)
        try:
            return [(r, load_artifact(artifact), artifact) for r, artifact in ranges or []] \
                or None
        except Exception:  # an unreadable artifact: the export path rebuilds it with a note
            return None

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None,
                log: CompileLog | None = None) -> list[Captured]:
        """`log`: also compile the step with torch.compile over the sizes (largest first,
        as a device backend would) and record its compiles; the artifacts come from
        torch.export, which has no guards to fail at run time, only size ranges."""
        order = sorted(sizes, reverse=True)
        self.phases_s = {}
        started = time.perf_counter()
        if log is not None and not log.compiles:  # else the trace compiled it already
            compile_over_sizes(step.model, ((s, step.inputs(s)) for s in order), step.dims, log,
                               step.size_suggested)
            self.phases_s["compile_log"] = round(time.perf_counter() - started, 3)
        loaded: list[tuple[SizeRange, Any, Path]] = []
        first_runs = 0.0
        captured = []
        for size in order:
            if on_size:
                on_size(size)
            if not loaded:  # compile (or find in the cache) while the first size is shown
                try:
                    loaded = self._load(step, sizes, log)
                except (ExportFailed, NotCarried) as exc:
                    # a branch on a tensor's values fails Inductor's fullgraph trace too
                    if self.options.cpu_mechanism == "aoti" or value_dependent(exc):
                        raise
                    return self._inductor_instead(step, sizes, on_size, exc)
            size_range, runner, artifact = next(item for item in loaded
                                                if item[0].covers(size))
            static = step.inputs(size)
            settle()
            t0 = time.perf_counter()
            buffers = dict(step.model.named_buffers())
            replay = _replayer(runner, tuple(buffers[name] for name in size_range.lifted))
            try:
                with torch.no_grad():
                    replay(static)  # first run at this size: what "capture" costs once compiled
            except Exception as exc:  # a frozen host value a kernel cannot run with, say
                raise CaptureError(f"size {size}: the artifact's first run failed: "
                                   f"{first_line(exc)}") from exc
            first_runs += time.perf_counter() - t0
            captured.append(Captured(size, (time.perf_counter() - t0) * 1e6,
                                     artifact.stat().st_size, replay, static,
                                     size_range.example))
        self.facts.capture_order = [c.size for c in captured]
        self.phases_s["capture"] = round(first_runs, 3)
        return captured


def _artifact_facts(artifact: Path, hit: bool) -> dict[str, Any]:
    """What the report says of one artifact, however it was found."""
    return {"artifact": str(artifact), "artifact_bytes": artifact.stat().st_size,
            "cache_hit": hit}


def _range_facts(size_range: SizeRange, sizes: list[int], facts: dict[str, Any]
                 ) -> dict[str, Any]:
    """One size range's entry of `artifacts`: its label, the sizes it serves, its artifact."""
    return {"range": size_range.label(), "sizes": [s for s in sizes if size_range.covers(s)],
            **({"why": size_range.why} if size_range.why else {}), **facts}


def load_artifact(path: Path) -> Any:
    """The artifact's loader (AOTIModelPackageLoader), made directly rather
    than by aoti_load_package: that one first asks Inductor which vector ISA this machine
    compiles for, only to warn on a mismatch with the artifact's, and finding out builds
    and dlopens a probe library per ISA in child processes (3.3 s on this loaded 2-core
    machine, the largest part of a warm run's load). The CPU capability is in the cache key
    instead (`program_key`), so a mismatched artifact is never looked up."""
    loader = aoti_package_loader(str(path))
    touch(path)  # used now: the cache's budget removes the least recently used first
    return loader


def _replayer(loader: Any, state: tuple = ()) -> Callable[[tuple], Any]:
    """Replay through the loader's own `run`, the lowest call torch offers from Python:
    AOTICompiledModel.__call__ parses its pytree specs on every call (about 10 of its 14 µs
    per step on a one-layer model here). The output spec is read once, and a leaf or a flat
    tuple of leaves (what steps return) is rebuilt without pytree. No grad mode is set:
    the artifact records no autograd graph either way. `state`: the model's own buffers
    the program takes after the step's inputs (SizeRange.lifted), written in place."""
    spec = pytree.treespec_loads(loader.get_call_spec()[1])
    flat_tuple = spec.type is tuple and all(child.is_leaf() for child in spec.children())

    def unflatten(outputs: list) -> Any:
        if spec.is_leaf():
            return outputs[0]
        return tuple(outputs) if flat_tuple else pytree.tree_unflatten(outputs, spec)

    def replay(args: tuple) -> Any:
        settle()  # with --nproc: no gloo work pending that needs the GIL the run holds
        # Host values are constants of the artifact (frozen at export): only tensors go in.
        return unflatten(loader.run([*tensors_of(args), *state]))

    return replay
