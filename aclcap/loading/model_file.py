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
    name = "aclcap_model_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "_aclcap_source_sha256", None) == digest:
        return loaded
    try:
        module = import_by_path(name, path.resolve())
    except UsageError:
        raise
    except NotPython as exc:
        raise UsageError(f"model file {path} is not an importable Python file") from exc
    except Exception as exc:
        raise UsageError(f"model file {path} failed to import: {last_line(exc)}") from exc
    module._aclcap_source_sha256 = digest
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
    return ModelSpec(path, module.build_model, module.make_inputs, tolerance, libs,
                     sorted(set(shapes)), hashlib.sha256(source).hexdigest(),
                     bool(getattr(module, "LOGITS", False)), list(replicated),
                     list(splitting))


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

    from aclcap.host_values import is_host_value

    try:
        result = spec.make_inputs(size, torch.device(device), dtype)
    except Exception as exc:
        raise UsageError(f"model file {spec.path}: make_inputs({size}) raised "
                         f"{last_line(exc)}") from exc
    if isinstance(result, torch.Tensor):
        result = (result,)
    if not isinstance(result, (tuple, list)):
        raise UsageError(f"model file {spec.path}: make_inputs must return a tuple of tensors "
                         f"and host values, got {type(result).__name__}")
    for index, value in enumerate(result):
        if not (isinstance(value, torch.Tensor) or is_host_value(value)):
            raise UsageError(f"model file {spec.path}: make_inputs({size}) element {index} is "
                             f"a {type(value).__name__}: return tensors, or host values (int, "
                             "float, bool, or a flat list of them)")
    return tuple(result)


def _grown_dims(path: Path, index: int, a: Any, b: Any) -> list[int]:
    """The dims of one input that follow the size (called at sizes 3 and 5): a tensor's
    dims, or [0] for a host list whose length is the size (`seq_lens`, one per token)."""
    import torch

    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor) or \
            isinstance(a, (list, tuple)) != isinstance(b, (list, tuple)):
        raise UsageError(f"model file {path}: input {index} of make_inputs changes kind "
                         "with size (a tensor at one size, a host value at another)")
    if not isinstance(a, torch.Tensor):
        grows = isinstance(a, (list, tuple)) and len(a) != len(b)
        if grows and (len(a), len(b)) != (3, 5):
            raise UsageError(f"model file {path}: host list {index} of make_inputs grows "
                             "with size but its length is not the size")
        return [0] if grows else []
    if a.dim() != b.dim():
        raise UsageError(f"model file {path}: input {index} of make_inputs changes "
                         "rank with size")
    grow = [d for d in range(a.dim()) if a.shape[d] != b.shape[d]]
    if any((a.shape[d], b.shape[d]) != (3, 5) for d in grow):
        raise UsageError(f"model file {path}: input {index} of make_inputs has a dim "
                         "that grows with size but is not equal to size")
    return grow


def probe_inputs(spec: ModelSpec, device: Any, dtype: Any
                 ) -> tuple[list[list[int]], tuple[int, ...]]:
    """Per input, the dims that equal `size` (found by calling make_inputs at two sizes):
    those are marked dynamic for export and padded by --pad; a host list's [0] is its
    length. And the positions of the host values among the inputs."""
    import torch

    small = make_step_inputs(spec, 3, device, dtype)
    large = make_step_inputs(spec, 5, device, dtype)
    if len(small) != len(large):
        raise UsageError(f"model file {spec.path}: make_inputs returns a different number of "
                         "inputs for different sizes")
    dims = [_grown_dims(spec.path, i, a, b)
            for i, (a, b) in enumerate(zip(small, large, strict=True))]
    return dims, tuple(i for i, a in enumerate(small) if not isinstance(a, torch.Tensor))


def size_dims(spec: ModelSpec, device: Any, dtype: Any) -> list[list[int]]:
    """Per input, the dims that equal `size` (`probe_inputs`)."""
    return probe_inputs(spec, device, dtype)[0]
