"""Import a Python file by its path, as Python runs a script: the file's folder first on
sys.path while it runs, so it imports the modules beside it (`from helper import ...`);
sys.path is restored after. Model files and Python op libraries load the same way."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


class NotPython(ImportError):
    """The path is no file Python imports (no `.py` suffix, say)."""


def import_by_path(name: str, path: Path) -> ModuleType:
    """Import `path` as module `name` (kept in sys.modules, removed again if it raises).
    Raises what the file raises; NotPython where `path` is not a Python file."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise NotPython(f"{path} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    saved = list(sys.path)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path[:] = saved
    return module
