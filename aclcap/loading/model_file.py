"""Load a model file (the README's model-file contract) into a ModelSpec, turning every
contract violation into a one-line UsageError that names the file and the problem."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aclcap.errors import UsageError, last_line
from aclcap.loading.by_path import NotPython, import_by_path
from aclcap.loading.libraries import load_libraries
from aclcap.size_dims import SizeDim

DEFAULT_SHAPES = [1, 2, 4, 8]


@dataclass
class ModelSpec:
    path: Path
    build_model: Callable[..., Any]
    make_inputs: Callable[..., Any]
    tolerance: dict[str, float] | None = None
    op_libraries: list[str] = field(default_factory=list)  # paths resolved, or module names
    shapes: list[int] = field(default_factory=lambda: list(DEFAULT_SHAPES))
    source_sha256: str = ""
    logits: bool = False  # LOGITS = True: output 0 is [tokens, vocab] logits
    replicated_outputs: list[int] = field(default_factory=list)  # --nproc: equal on all ranks
    splitting_ops: list[str] = field(default_factory=list)  # piecewise: SPLITTING_OPS
    # pad_inputs(inputs, size, padded_size): how --pad pads a draw; None: aclcap repeats the
    # last token (graph/padding.py)
    pad_inputs: Callable[..., Any] | None = None
    # The compiled libraries the file's import loaded (torch.ops.load_library, or a plugin
    # package that loads its own): what defines its ops, for the caches' keys and for the
    # header of the fakes synthesized from it.
    loads: list[str] = field(default_factory=list)
    fakes: list[str] = field(default_factory=list)  # --fakes, loaded after the import

    @property
    def name(self) -> str:
        return self.path.name


def parse_shapes(text: str) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]; anything but positive integers is bad input."""
    try:
        shapes = [int(part) for part in text.split(",")]  # an empty item is bad input too
    except ValueError:
        shapes = []
    if not shapes or any(s < 1 for s in shapes):
        raise UsageError(f"--shapes {text!r}: give a comma-separated list of positive integers, "
                         "e.g. --shapes 1,2,4,8")
    return sorted(set(shapes))


def _import_once(path: Path, digest: str) -> Any:
    """Import the file by path; the same text is imported once per process, because a
    model file may register ops at import (torch refuses a second registration)."""
    import torch

    name = "aclcap_model_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "_aclcap_source_sha256", None) == digest:
        return loaded
    before = set(torch.ops.loaded_libraries)
    try:
        module = import_by_path(name, path.resolve())
    except UsageError:
        raise
    except NotPython as exc:
        raise UsageError(f"model file {path} is not an importable Python file") from exc
    except Exception as exc:
        raise UsageError(f"model file {path} failed to import: {last_line(exc)}") from exc
    module._aclcap_source_sha256 = digest
    module._aclcap_loads = sorted(set(torch.ops.loaded_libraries) - before)
    return module


def check_model_file(path: Path) -> None:
    """A model path that is a directory or missing is bad input, named as such."""
    if path.is_dir():
        raise UsageError(f"model file {path} is a directory: pass the path of a Python file "
                         "that defines build_model and make_inputs")
    if not path.is_file():
        raise UsageError(f"model file {path} not found: pass the path of a Python file that "
                         "defines build_model and make_inputs")


def load_model_file(path: str | Path) -> ModelSpec:
    """Import the file by path and check the contract's names and types."""
    path = Path(path)
    check_model_file(path)
    source = path.read_bytes()
    module = _import_once(path, hashlib.sha256(source).hexdigest())
    for fn in ("build_model", "make_inputs"):
        if not callable(getattr(module, fn, None)):
            raise UsageError(f"model file {path} does not define {fn}() "
                             f"(see the model-file contract in docs/contracts.md)")
    # Paths are relative to the model file; anything else is a module name.
    libs = [str(path.parent / lib) if (path.parent / lib).exists() else lib
            for lib in getattr(module, "OP_LIBRARIES", [])]
    load_libraries(libs)
    tolerance = getattr(module, "TOLERANCE", None)
    if tolerance is not None and not (isinstance(tolerance, dict)
                                      and set(tolerance) <= {"atol", "rtol"}):
        raise UsageError(f"model file {path}: TOLERANCE must be a dict with keys atol and rtol")
    shapes = getattr(module, "SHAPES", DEFAULT_SHAPES)
    if not (isinstance(shapes, (list, tuple)) and shapes
            and all(isinstance(s, int) and s > 0 for s in shapes)):
        raise UsageError(f"model file {path}: SHAPES must be a list of positive integers")
    replicated = getattr(module, "REPLICATED_OUTPUTS", [])
    if not (isinstance(replicated, (list, tuple)) and all(isinstance(i, int) and i >= 0
                                                          for i in replicated)):
        raise UsageError(f"model file {path}: REPLICATED_OUTPUTS must be a list of output "
                         "indices, e.g. [0]")
    splitting = getattr(module, "SPLITTING_OPS", [])
    if not (isinstance(splitting, (list, tuple)) and all(isinstance(o, str) and "::" in o
                                                         for o in splitting)):
        raise UsageError(f"model file {path}: SPLITTING_OPS must be a list of op names, "
                         'e.g. ["ns::attention"]')
    pad_inputs = getattr(module, "pad_inputs", None)
    if pad_inputs is not None and not callable(pad_inputs):
        raise UsageError(f"model file {path}: pad_inputs must be a function "
                         "(inputs, size, padded_size) -> inputs")
    return ModelSpec(path, module.build_model, module.make_inputs, tolerance, libs,
                     sorted(set(shapes)), hashlib.sha256(source).hexdigest(),
                     bool(getattr(module, "LOGITS", False)), list(replicated),
                     list(splitting), pad_inputs, list(module._aclcap_loads))


def instantiate_model(spec: ModelSpec, device: Any, dtype: Any) -> Any:
    """Call build_model and check it returned a module."""
    import torch

    try:
        model = spec.build_model(torch.device(device), dtype)
    except Exception as exc:
        raise UsageError(f"model file {spec.path}: build_model raised {last_line(exc)}") from exc
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"model file {spec.path}: build_model returned "
                         f"{type(model).__name__}, not a torch.nn.Module")
    # Inference only: without grads torch.compile traces no backward, and no op is asked
    # for an autograd kernel it does not need.
    return model.requires_grad_(False)


def make_step_inputs(spec: ModelSpec, size: int, device: Any, dtype: Any) -> tuple:
    """Call make_inputs and check it returned a tuple of tensors and host values (ints,
    floats, bools and lists of them: aclcap/host_values.py)."""
    import torch

    from aclcap.draw_state import drawn
    from aclcap.host_values import is_host_value

    def draw() -> tuple:
        try:
            result = spec.make_inputs(size, torch.device(device), dtype)
        except Exception as exc:
            raise UsageError(f"model file {spec.path}: make_inputs({size}) raised "
                             f"{last_line(exc)}") from exc
        if isinstance(result, torch.Tensor):
            result = (result,)
        if not isinstance(result, (tuple, list)):
            raise UsageError(f"model file {spec.path}: make_inputs must return a tuple of "
                             f"tensors and host values, got {type(result).__name__}")
        for index, value in enumerate(result):
            if not (isinstance(value, torch.Tensor) or is_host_value(value)):
                raise UsageError(f"model file {spec.path}: make_inputs({size}) element "
                                 f"{index} is a {type(value).__name__}: return tensors, or "
                                 "host values (int, float, bool, or a flat list of them)")
        return tuple(result)

    # A forward context make_inputs sets is kept with the draw and restored per run.
    return drawn(draw, getattr(spec.make_inputs, "__globals__", {}))


def pad_step_inputs(spec: ModelSpec, args: tuple, size: int, target: int) -> tuple:
    """The model file's pad_inputs(args, size, target), which pads what aclcap cannot see
    (vLLM's attention metadata in its forward context), its state kept with the padded
    draw; a one-line error where it fails or returns something else."""
    from aclcap.draw_state import drawn

    def pad() -> tuple:
        try:
            padded = spec.pad_inputs(args, size, target)
        except Exception as exc:
            raise UsageError(f"model file {spec.path}: pad_inputs(inputs, {size}, {target}) "
                             f"raised {last_line(exc)}") from exc
        if not isinstance(padded, (tuple, list)) or len(padded) != len(args):
            raise UsageError(f"model file {spec.path}: pad_inputs must return as many inputs "
                             f"as it was given ({len(args)})")
        return tuple(padded)

    return drawn(pad, getattr(spec.pad_inputs, "__globals__", {}))


PROBE_SIZES = (3, 4, 5)


def _affine(path: Path, what: str, lengths: list[int], dim: int = 0) -> SizeDim | None:
    """Dim `dim` with the rule `scale * size + offset` its lengths follow over
    PROBE_SIZES, None where they stay the same; any other growth is bad input."""
    if len(set(lengths)) == 1:
        return None
    scale = lengths[1] - lengths[0]
    offset = lengths[0] - scale * PROBE_SIZES[0]
    if scale < 1 or lengths[2] - lengths[1] != scale or scale + offset < 1:
        sizes = ", ".join(map(str, PROBE_SIZES))
        raise UsageError(f"model file {path}: {what} of make_inputs grows with size, but not "
                         f"as a * size + b (lengths {', '.join(map(str, lengths))} at sizes "
                         f"{sizes}): make it the size, or an affine function of it")
    return SizeDim(dim, scale, offset)


def _grown_dims(path: Path, index: int, draws: list[Any]) -> list[SizeDim]:
    """The dims of one input that follow the size (called at PROBE_SIZES), each with its
    rule: a tensor's dims, or [0] for a host list whose length follows the size
    (`seq_lens`, one per token; offsets, one more)."""
    import torch

    if len({isinstance(a, torch.Tensor) for a in draws}) > 1 or \
            len({isinstance(a, (list, tuple)) for a in draws}) > 1:
        raise UsageError(f"model file {path}: input {index} of make_inputs changes kind "
                         "with size (a tensor at one size, a host value at another)")
    if not isinstance(draws[0], torch.Tensor):
        if not isinstance(draws[0], (list, tuple)):
            return []
        rule = _affine(path, f"host list {index}", [len(a) for a in draws])
        return [rule] if rule is not None else []
    if len({a.dim() for a in draws}) > 1:
        raise UsageError(f"model file {path}: input {index} of make_inputs changes "
                         "rank with size")
    rules = (_affine(path, f"input {index} dim {d}", [a.shape[d] for a in draws], d)
             for d in range(draws[0].dim()))
    return [rule for rule in rules if rule is not None]


def probe_inputs(spec: ModelSpec, device: Any, dtype: Any
                 ) -> tuple[list[list[int]], tuple[int, ...]]:
    """Per input, the dims that equal `size` (found by calling make_inputs at two sizes):
    those are marked dynamic for export and padded by --pad; a host list's [0] is its
    length. And the positions of the host values among the inputs."""
    import torch

    draws = [make_step_inputs(spec, size, device, dtype) for size in PROBE_SIZES]
    if len({len(d) for d in draws}) > 1:
        raise UsageError(f"model file {spec.path}: make_inputs returns a different number of "
                         "inputs for different sizes")
    dims = [_grown_dims(spec.path, i, list(values))
            for i, values in enumerate(zip(*draws, strict=True))]
    return dims, tuple(i for i, a in enumerate(draws[0]) if not isinstance(a, torch.Tensor))


def size_dims(spec: ModelSpec, device: Any, dtype: Any) -> list[list[int]]:
    """Per input, the dims that equal `size` (`probe_inputs`)."""
    return probe_inputs(spec, device, dtype)[0]
