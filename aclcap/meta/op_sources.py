"""Which files define an op's kernels, meta impl and declared samples: what check-meta's
result cache hashes besides the schema, so that an edit re-checks the ops it can change and
no other. None where some registration's file cannot be found: that op is checked afresh
on every run rather than risk a stale verdict."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sysconfig
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from aclcap._compat import custom_op_def, custom_op_functions, dispatch_dump, python_fake
from aclcap.meta.registrations import recorded
from aclcap.meta.registry import OpInfo
from aclcap.meta.sample_inputs import samples_for

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
# "CPU: registered at /path/file.cpp:12 :: ..." per dispatch key of torch's dispatch dump
_SITE = re.compile(r"^(\w+)(?:\[alias\])?: registered at (\S+?):\d+", re.MULTILINE)


def _yours(path: str) -> bool:
    """A file of the op's library, not torch's or the standard library's (their versions
    are keyed on their own)."""
    return not path.startswith((_TORCH_DIR, _STDLIB))


def functions(fn: Any, depth: int = 3) -> Iterator[types.FunctionType]:
    """The Python functions behind a registered callable: itself unwrapped, a partial's or
    a callable object's; through torch's wrappers (a fake of an op defined in C++, an
    autograd shim), the functions their closures hold."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    if isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType):  # a callable object: its class's __call__
        call = next((vars(c)["__call__"] for c in type(fn).__mro__ if "__call__" in vars(c)),
                    None)
        if isinstance(call, types.FunctionType) and not isinstance(fn, type):
            yield call
        return
    yield fn
    if depth and not _yours(fn.__code__.co_filename):
        for cell in fn.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(held) and not isinstance(held, type):
                yield from functions(held, depth - 1)


def global_names(code: types.CodeType) -> Iterator[str]:
    """Every global name the code (and the functions nested in it) reads."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from global_names(const)


def _file_of(value: Any) -> str | None:
    if isinstance(value, types.ModuleType):
        return getattr(value, "__file__", None)
    if isinstance(value, types.FunctionType):
        return value.__code__.co_filename
    if isinstance(value, type):
        return getattr(inspect.getmodule(value), "__file__", None)
    return None


def code_files(fn: Callable[..., Any]) -> set[str]:
    """The files of a registered callable's functions, and of the functions, classes and
    modules they name (one level down): a fake that calls a shape helper kept in another
    file changes with that file too. Torch's and the standard library's files are left
    out: their versions are keyed."""
    files = set()
    for function in functions(fn):
        files.add(function.__code__.co_filename)
        for name in set(global_names(function.__code__)):
            found = _file_of(function.__globals__.get(name))
            if found:
                files.add(found)
    return {f for f in files if _yours(f)}


def shared_libraries(source: str, libraries: dict[str, bytes]) -> set[str] | None:
    """The loaded .so files (`libraries`: their bytes by path) built from a C++ source:
    the path a TORCH_LIBRARY macro records is compiled into the library that holds it.
    None where none holds it (a library loaded some other way than
    torch.ops.load_library)."""
    needle = source.encode()
    found = {path for path, content in libraries.items() if needle in content}
    return found or None


def op_sources(op: OpInfo, holding: Callable[[str], set[str] | None]) -> set[str] | None:
    """The files whose content decides the op's verdict, beside its schema: each kernel's
    and the meta impl's (the .so holding a C++ registration, the file of a Python one), and
    its declared samples'. `holding(source)`: the loaded .so files built from a C++ source
    (shared_libraries), None if none. None where a registration's file cannot be told."""
    name = op.dispatcher_name
    files: set[str] = set()
    definition = custom_op_def(name)
    for fn in custom_op_functions(definition) if definition is not None else []:
        if fn is not None:
            files |= code_files(fn)
    fake = python_fake(name)
    if fake is not None:
        files |= code_files(fake.func) | {fake.source.rpartition(":")[0]}
    make_samples = samples_for(op.qualname)
    if make_samples is not None:
        files |= code_files(make_samples)
    for key, site in _SITE.findall(dispatch_dump(name)):
        if not site.endswith(".py"):  # C++: the library it is compiled into
            so_files = holding(site)
            if so_files is None:
                return None
            files |= so_files
            continue
        if key == "debug":  # where a Python schema was defined: the schema itself is keyed
            continue
        if definition is not None or (key == "Meta" and fake is not None):
            continue  # custom_op's and register_fake's functions are read above
        kernels = recorded(name, key)
        if not kernels:  # a Python kernel registered out of aclcap's sight
            return None
        for kernel, registered_in in kernels:
            files |= code_files(kernel) | {registered_in, site}
    return {f for f in files if f and _yours(f)}
