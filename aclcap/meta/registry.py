"""Enumerate the op overloads of a namespace from the dispatcher (never a hand-kept list)
and say, for each, which kernels it has and where its meta impl comes from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

import torch

from aclcap.meta.sample_inputs import samples_for

# Dispatch keys a kernel author cares about; PrivateUse1 is where torch_npu registers.
BACKEND_KEYS = ("CPU", "CUDA", "PrivateUse1", "CompositeExplicitAutograd",
                "CompositeImplicitAutograd")



class MetaKind(StrEnum):
    """Where an op's meta impl comes from. StrEnum: JSON and stubs read the plain value."""

    PYTHON = "python"  # register_fake (or custom_op's fake)
    PYTHON_META = "python_meta"  # a Python kernel on the Meta key
    CPP = "cpp"  # a C++ Meta kernel
    COMPOSITE = "composite"  # Python CompositeImplicitAutograd: decomposes while tracing
    COMPOSITE_CPP = "composite_cpp"  # C++ m.def(schema, &fn): its body runs on fakes
    TRIVIAL = "trivial"  # none; torch generates a trivial fake (mutating op returning ())
    NO_TENSOR = "no_tensor"  # no Tensor in the schema: fake tensors never reach it
    MISSING = "missing"

# Namespaces that ship with torch: everything else is a custom op.
BUILTIN_NAMESPACES = frozenset({
    "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "_native", "_quantized",
    "_test", "aten", "c10d", "c10d_functional", "debug_mode_ops", "debugprims", "export",
    "higher_order", "inductor", "inductor_prims", "mkl", "mkldnn", "mkldnn_prepacked",
    "onednn", "prim", "prims", "profiler", "quantization", "quantized", "rngprims", "sparse",
    "static_runtime", "symm_mem", "streams", "onnx", "onnx_symbolic", "fsdp",
    "quantized_decomposed", "_inductor_test", "cplib", "flex_lib"})


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

    def overload(self) -> torch._ops.OpOverload:
        return resolve_overload(self.qualname)


def resolve_overload(qualname: str) -> torch._ops.OpOverload:
    """`ns::name.overload` -> torch.ops.ns.name.overload."""
    ns, rest = qualname.split("::", 1)
    name, overload = rest.split(".", 1)
    return getattr(getattr(getattr(torch.ops, ns), name), overload)


def _registered_at(dispatcher_name: str, key: str) -> str:
    """file:line of the kernel registered for `key`, from the dispatcher's own table."""
    dump = torch._C._dispatch_dump(dispatcher_name)
    found = re.search(rf"^{key}(?:\[alias\])?: registered at (\S+?):(\d+)", dump, re.MULTILINE)
    return f"{found.group(1)}:{found.group(2)}" if found else "unknown location"


def _takes_tensors(op: torch._ops.OpOverload) -> bool:
    schema = op._schema
    return any("Tensor" in str(a.type) for a in (*schema.arguments, *schema.returns))


def meta_impl(dispatcher_name: str, op: torch._ops.OpOverload) -> tuple[MetaKind, str]:
    """(kind, source) of the op's meta impl, the source named by what it is and where."""
    from torch._library.custom_ops import OPDEFS
    from torch._library.simple_registry import singleton
    from torch._library.utils import can_generate_trivial_fake_impl

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if not _takes_tensors(op):
        return MetaKind.NO_TENSOR, ("none needed: no Tensor in its schema, fake tensors never "
                                    "reach it")
    # custom_op always installs a placeholder Meta kernel: ask the op definition itself.
    if dispatcher_name in OPDEFS:
        fn = OPDEFS[dispatcher_name]._abstract_fn
        if fn is not None:
            code = fn.__code__
            return MetaKind.PYTHON, f"register_fake ({code.co_filename}:{code.co_firstlineno})"
    else:
        fake = singleton.find(dispatcher_name).fake_impl.kernel
        if fake is not None:
            return MetaKind.PYTHON, f"register_fake ({fake.source})"
        if has(dispatcher_name, "Meta"):
            site = _registered_at(dispatcher_name, "Meta")
            if site.split(":")[0].endswith(".py"):
                return MetaKind.PYTHON_META, f"Python kernel on the Meta key ({site})"
            return MetaKind.CPP, f"C++ Meta kernel ({site})"
    if has(dispatcher_name, "CompositeImplicitAutograd"):
        site = _registered_at(dispatcher_name, "CompositeImplicitAutograd")
        if site.split(":")[0].endswith(".py"):
            return MetaKind.COMPOSITE, f"Python composite ({site}): decomposes while tracing"
        return MetaKind.COMPOSITE_CPP, (f"C++ composite ({site}): tracing runs its C++ body on "
                                        "fake tensors")
    if can_generate_trivial_fake_impl(op):
        return MetaKind.TRIVIAL, "none; torch generates a trivial fake (mutating op returning ())"
    return MetaKind.MISSING, "MISSING"


def list_ops(namespaces: list[str]) -> list[OpInfo]:
    """Every overload registered under the namespaces, sorted by name."""
    wanted = tuple(f"{ns}::" for ns in namespaces)
    names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith(wanted))
    ops = []
    for name in names:
        qualname = name if "." in name.split("::", 1)[1] else name + ".default"
        info = OpInfo(qualname, "", [], MetaKind.MISSING, "", samples_for(qualname) is not None)
        op = info.overload()
        info.schema = str(op._schema)
        info.kernels = [k for k in BACKEND_KEYS
                        if torch._C._dispatch_has_kernel_for_dispatch_key(name, k)]
        info.meta_kind, info.meta_source = meta_impl(name, op)
        ops.append(info)
    return ops
