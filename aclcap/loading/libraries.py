"""Load op libraries named on the command line: a compiled .so, a .py file, or a module."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from aclcap.errors import UsageError, last_line
from aclcap.loading.by_path import NotPython, import_by_path

BUNDLED = "aclcap_ops"  # the bundled library's module; it loads through its load()
# The op namespaces torch itself registers: every other one is a custom library's.
BUILTIN_NAMESPACES = frozenset({
    "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "_native", "_quantized",
    "_test", "aten", "c10d", "c10d_functional", "debug_mode_ops", "debugprims", "export",
    "higher_order", "inductor", "inductor_prims", "mkl", "mkldnn", "mkldnn_prepacked",
    "onednn", "prim", "prims", "profiler", "quantization", "quantized", "rngprims", "sparse",
    "static_runtime", "symm_mem", "streams", "onnx", "onnx_symbolic", "fsdp",
    "quantized_decomposed", "_inductor_test", "cplib", "flex_lib"})


def _import_file(path: Path) -> None:
    """Import a .py op library once per process (a second import would register its ops
    and fakes again, which torch refuses), with its folder on sys.path as a model file's."""
    name = "aclcap_lib_" + path.stem.replace("-", "_")
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return
    try:
        import_by_path(name, path)
    except NotPython as exc:
        raise UsageError(f"cannot import op library {path}: not a Python file") from exc


def _looks_like_path(spec: str) -> bool:
    return Path(spec).suffix in (".so", ".py", ".dylib", ".pyd") or "/" in spec


def check_library_path(spec: str) -> None:
    """A library given as a path must exist, one given as a module must be findable:
    checked before torch is imported (finding a top-level module imports nothing)."""
    if _looks_like_path(spec):
        if not Path(spec).exists():
            raise UsageError(f"op library {spec} not found: pass an existing .so or .py file, "
                             "or an importable module name")
        return
    try:
        found = importlib.util.find_spec(spec) is not None
    except ModuleNotFoundError:  # a missing parent package of a dotted name
        found = False
    if not found:
        raise UsageError(f"op library {spec!r} not found: No module named {spec!r} (pass a .so "
                         "or .py path, or an importable module)")


def load_library(spec: str) -> None:
    """Load one op library; any failure becomes a one-line UsageError naming it."""
    import torch

    path = Path(spec)
    try:
        if _looks_like_path(spec):
            check_library_path(spec)
            if path.suffix == ".py":
                _import_file(path.resolve())
            else:
                torch.ops.load_library(str(path.resolve()))
        else:
            module = importlib.import_module(spec)
            if spec == BUNDLED:  # the bundled library builds and registers on request
                module.load()
    except UsageError:
        raise
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if _looks_like_path(spec) or (missing and not spec.startswith(missing)):
            # the library was found: a module it imports was not
            raise UsageError(f"op library {spec} failed to load: its import of `{missing}` "
                             f"failed ({last_line(exc)})") from exc
        raise UsageError(
            f"op library {spec!r} not found: {exc} "
            "(pass a .so or .py path, or an importable module)"
        ) from exc
    except Exception as exc:  # a library's own import or dlopen error: report, don't crash
        raise UsageError(f"op library {spec} failed to load: {_load_reason(exc)}") from exc


def _load_reason(exc: Exception) -> str:
    """What broke, in one line. torch.ops.load_library's OSError says only "Could not load
    this library"; dlopen's own reason (an undefined symbol, a missing dependency) is its
    cause, and that is what the user needs."""
    cause = exc.__cause__
    if isinstance(exc, OSError) and isinstance(cause, OSError):
        return last_line(cause)
    return last_line(exc)


_NAMESPACES: dict[str, set[str]] = {}  # what was loaded -> the namespaces it registered


def registered_namespaces(key: str, load: Callable[[], object]) -> set[str]:
    """Run `load` once per `key` (a library, a model file) and remember the op namespaces
    it registered, so a second load in the same process answers the same."""
    from aclcap._compat import op_names

    if key not in _NAMESPACES:
        before = set(op_names())
        load()
        added = set(op_names()) - before
        _NAMESPACES[key] = {name.split("::", 1)[0] for name in added}
    return _NAMESPACES[key]


def load_libraries(specs: list[str]) -> list[str]:
    """Load libraries in order; return the op namespaces they registered."""
    found: set[str] = set()
    for spec in specs:
        found |= registered_namespaces(spec, lambda s=spec: load_library(s))
        if spec == BUNDLED:  # it may have been loaded before, by aclcap_ops.load() itself
            found.add("aclcap")
    return sorted(found)


def custom_namespaces() -> list[str]:
    """Every namespace with ops that does not ship with torch, for "did you mean"."""
    from aclcap._compat import op_names

    names = {n.split("::", 1)[0] for n in op_names()}
    return sorted(n for n in names if n not in BUILTIN_NAMESPACES)
