"""Enumerate the op overloads of a namespace from the dispatcher (never a hand-kept list)
and say, for each, which kernels it has and where its meta impl comes from."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import torch

from aclcap._compat import (
    OpOverload,
    custom_op_def,
    dispatch_dump,
    dispatch_key_names,
    generated_fake_tag,
    has_kernel,
    op_names,
    python_fake,
    trivial_fake_possible,
    user_fake,
)
from aclcap.meta.sample_inputs import samples_for

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_COMPOSITE_KEYS = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
                   "CompositeImplicitAutograd", "CompositeImplicitAutogradNestedTensor")


def _parses(key: str) -> bool:
    """Whether the dispatcher takes `key` by name (QuantizedHIP and the like it does not:
    no kernel can be registered there)."""
    try:
        has_kernel("aten::add.Tensor", key)
    except RuntimeError:
        return False
    return True


def _backend_keys() -> tuple[str, ...]:
    """Every backend dispatch key a kernel can be registered for, in torch's order (CPU,
    CUDA, ..., PrivateUse1 where torch_npu registers, then QuantizedCPU, SparseCPU, ...),
    then the composite keys. Meta keys are the meta impl's column, AutogradCPU and the like
    no backend."""
    names = dispatch_key_names()
    keys = []
    for start, name in enumerate(names):
        if name.startswith("StartOf") and name.endswith("Backends") and "Autograd" not in name:
            end = names.index(name.replace("StartOf", "EndOf"))
            keys += [k for k in names[start + 1:end] if not k.endswith("Meta") and _parses(k)]
    return (*keys, *_COMPOSITE_KEYS)


BACKEND_KEYS = _backend_keys()


class MetaKind(StrEnum):
    """Where an op's meta impl comes from. StrEnum: JSON and stubs read the plain value."""

    PYTHON = "python"  # register_fake (or custom_op's fake)
    PYTHON_META = "python_meta"  # a Python kernel on the Meta key
    CPP = "cpp"  # a C++ Meta kernel
    COMPOSITE = "composite"  # Python CompositeImplicitAutograd: decomposes while tracing
    COMPOSITE_CPP = "composite_cpp"  # C++ m.def(schema, &fn): its body runs on fakes
    AUTOGRAD_CPP = "autograd_cpp"  # a C++ Autograd kernel: its body runs on fakes too
    TRIVIAL = "trivial"  # none; torch generates a trivial fake (mutating op returning ())
    NO_TENSOR = "no_tensor"  # no Tensor in the schema: fake tensors never reach it
    MISSING = "missing"


@dataclass
class OpInfo:
    """One op overload as the dispatcher sees it."""

    qualname: str  # ns::name.overload
    schema: str
    kernels: list[str]
    meta_kind: MetaKind
    meta_source: str  # human readable, with file:line where known
    has_samples: bool

    @property
    def dispatcher_name(self) -> str:
        """The name the dispatcher uses: no suffix for the default overload."""
        return self.qualname.removesuffix(".default")

    def overload(self) -> OpOverload:
        return resolve_overload(self.qualname)


def resolve_overload(qualname: str) -> OpOverload:
    """`ns::name.overload` -> torch.ops.ns.name.overload; `ns::name` is the default overload
    (the form @aclcap.samples and the dispatcher take)."""
    ns, rest = qualname.split("::", 1)
    name, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), name), overload or "default")


def _registered_at(dispatcher_name: str, key: str) -> str:
    """file:line of the kernel registered for `key`, from the dispatcher's own table."""
    dump = dispatch_dump(dispatcher_name)
    found = re.search(rf"^{key}(?:\[alias\])?: registered at (\S+?):(\d+)", dump, re.MULTILINE)
    if found:
        return f"{found.group(1)}:{found.group(2)}"
    # the old C++ API (torch::RegisterOperators().op(...)) records no file, only itself
    by = re.search(rf"^{key}(?:\[alias\])?: registered by (\w+)", dump, re.MULTILINE)
    return f"registered by {by.group(1)}" if by else "unknown location"


def defined_at(qualname: str) -> tuple[str, int] | None:
    """(file, line) where the op's schema was defined (m.def, Library.define), if known."""
    site = _registered_at(resolve_overload(qualname)._schema.name, "debug")
    file, _, line = site.rpartition(":")
    return (file, int(line)) if line.isdigit() else None


def _takes_tensors(op: OpOverload) -> bool:
    schema = op._schema
    return any("Tensor" in str(a.type) for a in (*schema.arguments, *schema.returns))


def _defined_at(fn: Callable, registered: str) -> str:
    """file:line of a fake's own definition: torch records where register_fake was called,
    which for a library registering through a helper is the helper's line for every op.
    torch wraps the fake of an op defined in C++ (_check_pystubs_once's `inner`, without
    functools.wraps): the function it closes over as `func` is the user's."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    while code is not None and code.co_filename.startswith(_TORCH_DIR) \
            and "func" in code.co_freevars and fn.__closure__:
        fn = fn.__closure__[code.co_freevars.index("func")].cell_contents
        code = getattr(inspect.unwrap(fn), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else registered


_GENERATED_RETURNS = {"out": "its out= arguments", "inplace": "its first argument"}


def generated_fake(op: OpOverload) -> str:
    """`torch.Tag.out: returns its out= arguments` where torch generates the op's fake from
    its tag, else "": synthesis leaves such an op to torch, and a fake of one's own on it
    replaces torch's (torch warns where the op is a torch.library.custom_op)."""
    tag = generated_fake_tag(op)
    return f"torch.Tag.{tag}: returns {_GENERATED_RETURNS[tag]}" if tag else ""


def meta_impl(dispatcher_name: str, op: OpOverload) -> tuple[MetaKind, str]:
    """(kind, source) of the op's meta impl, the source named by what it is and where."""
    has = has_kernel
    if not _takes_tensors(op):
        return MetaKind.NO_TENSOR, ("none needed: no Tensor in its schema, fake tensors never "
                                    "reach it")
    # custom_op always installs a placeholder Meta kernel: ask the op definition itself.
    if (definition := custom_op_def(dispatcher_name)) is not None:
        fn = user_fake(definition)
        if fn is not None:
            code = fn.__code__
            return MetaKind.PYTHON, f"register_fake ({code.co_filename}:{code.co_firstlineno})"
    else:
        fake = python_fake(dispatcher_name)
        if fake is not None:
            return MetaKind.PYTHON, f"register_fake ({_defined_at(fake.func, fake.source)})"
        if has(dispatcher_name, "Meta"):
            site = _registered_at(dispatcher_name, "Meta")
            if site.split(":")[0].endswith(".py"):
                return MetaKind.PYTHON_META, f"Python kernel on the Meta key ({site})"
            return MetaKind.CPP, f"C++ Meta kernel ({site})"
    if has(dispatcher_name, "Autograd"):  # it runs before any backend key, tracing too
        site = _registered_at(dispatcher_name, "Autograd")
        if not site.split(":")[0].endswith(".py"):  # Python ones redispatch to the op
            return MetaKind.AUTOGRAD_CPP, (f"C++ Autograd kernel ({site}): tracing runs its "
                                           "C++ body on fake tensors")
    if has(dispatcher_name, "CompositeImplicitAutograd"):
        site = _registered_at(dispatcher_name, "CompositeImplicitAutograd")
        if site.split(":")[0].endswith(".py"):
            return MetaKind.COMPOSITE, f"Python composite ({site}): decomposes while tracing"
        return MetaKind.COMPOSITE_CPP, (f"C++ composite ({site}): tracing runs its C++ body on "
                                        "fake tensors")
    if tagged := generated_fake(op):
        return MetaKind.TRIVIAL, f"none; torch generates its fake ({tagged})"
    if trivial_fake_possible(op):
        return MetaKind.TRIVIAL, "none; torch generates a trivial fake (mutating op returning ())"
    return MetaKind.MISSING, "MISSING"


def list_ops(namespaces: list[str]) -> list[OpInfo]:
    """Every overload registered under the namespaces, sorted by name."""
    wanted = tuple(f"{ns}::" for ns in namespaces)
    names = sorted(n for n in op_names() if n.startswith(wanted))
    ops = []
    for name in names:
        qualname = name if "." in name.split("::", 1)[1] else name + ".default"
        info = OpInfo(qualname, "", [], MetaKind.MISSING, "", samples_for(qualname) is not None)
        op = info.overload()
        info.schema = str(op._schema)
        info.kernels = [k for k in BACKEND_KEYS
                        if has_kernel(name, k)]
        info.meta_kind, info.meta_source = meta_impl(name, op)
        ops.append(info)
    return ops
