"""Every private torch name aclcap touches, in one place, with what stands in on the torch
releases aclcap supports (2.11 to 2.15, "Tested with" in docs/devices.md) that lack it.
Private names move between minors (`Library._resolve_op_name` is in 2.13, not in 2.11): a
name used anywhere else in the package is a test failure (tests/test_private_names.py), so a
new one is seen in review and given its fallback here. Names not marked otherwise are the
same on 2.11 to 2.15 (read in their sources, run by scripts/compat_check.sh).

Dynamo, Inductor and the fake-tensor machinery are imported inside the functions that need
them, never at import: a warm aclcap run costs about `import torch`, and most runs never
compile."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["FunctionSchema", "OpOverload", "OpOverloadPacket", "SchemaArgument",
           "TorchDispatchMode", "pytree", "tree_flatten", "tree_map_only"]

FunctionSchema = torch._C.FunctionSchema
SchemaArgument = torch._C.Argument
tree_flatten, tree_map_only = pytree.tree_flatten, pytree.tree_map_only


# The dispatcher's registry.

def op_names() -> list[str]:
    """Every registered op, `ns::name` or `ns::name.overload`."""
    return torch._C._dispatch_get_all_op_names()


def has_kernel(name: str, key: str) -> bool:
    """A kernel registered directly for `key` (not the computed table, which the Meta
    backend fallback makes true for every op)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)


def dispatch_dump(name: str) -> str:
    """The registration table of one op, file:line per key."""
    return torch._C._dispatch_dump(name)


def dispatch_key_names() -> list[str]:
    return list(torch._C.DispatchKey.__members__)


def parse_schema(text: str) -> FunctionSchema:
    return torch._C.parse_schema(text)


def library_op_name(lib: torch.library.Library, op_name: Any) -> str:
    """The name `Library.impl` registers for `op_name` (a string or an OpOverload):
    `Library._resolve_op_name` on torch 2.13 on; the same rule where it is absent (2.11,
    2.12: `impl` resolved the name inline)."""
    resolve = getattr(lib, "_resolve_op_name", None)
    if resolve is not None:
        return resolve(op_name, "impl")
    if isinstance(op_name, OpOverload):
        schema = op_name._schema
        return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    return op_name


# Python registrations (torch.library.custom_op, register_fake).

def custom_op_def(name: str) -> Any | None:
    """The CustomOpDef of an op made with torch.library.custom_op, else None."""
    from torch._library.custom_ops import OPDEFS

    return OPDEFS.get(name)


def user_fake(definition: Any) -> Any | None:
    """The fake a user gave a custom_op (its placeholder Meta kernel is not one)."""
    return definition._abstract_fn


def custom_op_functions(definition: Any) -> list[Any]:
    """Every Python function a custom_op was given: its body, fake, autograd, vmap and
    per-backend kernels."""
    return [definition._init_fn, definition._abstract_fn, definition._setup_context_fn,
            definition._backward_fn, definition._vmap_fn,
            *definition._backend_fns.values(), *definition._torch_dispatch_fns.values()]


def python_fake(name: str) -> Any | None:
    """The kernel `register_fake` registered for `name` (its `func` and `source`, the
    file:line it was registered at), else None."""
    from torch._library.simple_registry import singleton

    return singleton.find(name).fake_impl.kernel  # `get` is 2.13's; `find` is in 2.11 on


def trivial_fake_possible(op: OpOverload) -> bool:
    """A mutating op returning nothing gets a generated fake under FakeTensorMode."""
    from torch._library.utils import can_generate_trivial_fake_impl

    return can_generate_trivial_fake_impl(op)


def generated_fake_tag(op: OpOverload) -> str | None:
    """`out` or `inplace`: the tag (torch.Tag.out, torch.Tag.inplace) for which torch
    generates the op's fake, as 2.13 does; None for an untagged op, and on a torch that
    generates no fake for the tag (or lacks it)."""
    for name in ("out", "inplace"):
        tag = getattr(torch.Tag, name, None)
        if tag is not None and tag in op.tags and trivial_fake_possible(op):
            return name
    return None


# Dynamo.

def dynamo_loaded() -> bool:
    return "torch._dynamo" in sys.modules


def reset_dynamo() -> None:
    """Forget every compiled frame and guard: each run compiles afresh."""
    import torch._dynamo

    torch._dynamo.reset()


def skip_guard_latency_profile() -> None:
    """Dynamo times every new set of guards once, for a compile metric (guard_latency_us)
    nothing of aclcap's reads, after flushing the CPU caches by writing a buffer larger
    than them: 25 to 270 ms a compile on the 2-core CI machine, a fifth to a quarter of
    check-meta's fullgraph check. Only that timing goes (the metric reads 0): the guards
    are still built and checked on the frame. A torch without it (`profile_guard_manager`
    absent) has nothing to skip."""
    import torch._dynamo.guards as guards

    if hasattr(guards, "profile_guard_manager"):
        guards.profile_guard_manager = lambda *_args: 0.0


def mark_dynamic(t: torch.Tensor, dim: int, maybe: bool = False) -> None:
    """Mark a size dim dynamic up front (`maybe`: where a guard may still specialize it)."""
    import torch._dynamo

    (torch._dynamo.maybe_mark_dynamic if maybe else torch._dynamo.mark_dynamic)(t, dim)


def compile_backends() -> list[str]:
    import torch._dynamo

    return torch._dynamo.list_backends(exclude_tags=())


def lookup_backend(name: str) -> Any:
    import torch._dynamo

    return torch._dynamo.lookup_backend(name)


def dynamo_counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def guard_failures() -> Any:
    from torch._dynamo.utils import guard_failures

    return guard_failures


def frame_compiler() -> tuple[Any, Any]:
    """Dynamo's convert_frame module and reset_code, to drop one frame's compiled code."""
    from torch._dynamo import convert_frame, reset_code

    return convert_frame, reset_code


def inductor_compiler(config_patches: dict[str, Any]) -> Any:
    """torch.compile's inductor backend as a callable, with Inductor options patched in (a
    backend given as a callable takes no `options=`)."""
    from torch._inductor.compile_fx import compile_fx

    def compile_inductor(gm: Any, example_inputs: Any) -> Any:
        return compile_fx(gm, example_inputs, config_patches=dict(config_patches))

    return compile_inductor


def set_vllm_forward_context(context: Any) -> None:
    """Set vLLM's forward context as its runner's `set_forward_context` does, for the steps
    that follow (vLLM keeps it in a module global; vllm.forward_context)."""
    import vllm.forward_context

    vllm.forward_context._forward_context = context


def compiling_frame() -> int | None:
    """The id of the frame (code object) Dynamo is compiling now; None outside a compile or
    where torch has no such id."""
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except (ImportError, AttributeError):
        return None
    return getattr(compile_id, "frame_id", None)


def set_logs(**levels: int) -> None:
    """torch's log levels per component (torch._logging.set_logs)."""
    torch._logging.set_logs(**levels)


# Fake tensors, shapes and strides.

def fake_tensor_mode(**kwargs: Any) -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(**kwargs)


def fx_config() -> Any:
    """torch.fx.experimental's config (backed_size_oblivious)."""
    import torch.fx.experimental._config as config

    return config


def export_guards(program: Any) -> Callable[[tuple], bool] | None:
    """A check of an exported program's own guards on `args` (its inputs, flat as export
    took them): those its range constraints cannot say (`s // 2 != 1` leaves the range
    [2, oo]), which AOTInductor's artifact does not check. None where this torch's unlifted
    module has no guard function (`_guards_fn`, torch 2.9 on) or calls it otherwise."""
    guards = getattr(program.module(), "_guards_fn", None)  # unlifted once, checked per size
    if guards is None:
        return None

    def hold(args: tuple) -> bool:
        try:
            guards(*pytree.tree_leaves(args))
        except AssertionError:
            return False
        except TypeError:  # another calling convention: not judged here
            return True
        return True
    return hold


def takes_modulo(size: Any) -> bool:
    """Whether a symbolic size takes the size modulo something (a pad to whole chunks,
    `(c - s % c) % c`). Where torch's sympy functions moved, their printed names serve."""
    expr = size.node.expr
    try:
        from torch.utils._sympy.functions import Mod, ModularIndexing, PythonMod
    except ImportError:
        return any(name in str(expr) for name in ("Mod(", "ModularIndexing("))
    return bool(expr.has(Mod, ModularIndexing, PythonMod))


def int_oo() -> Any:
    """The symbolic infinity of a dim's range."""
    from torch.utils._sympy.numbers import int_oo as infinity

    return infinity


def has_internal_overlap(t: torch.Tensor) -> bool:
    """Whether some elements share memory (an expanded view): such a tensor is no buffer
    a kernel may write."""
    return torch._debug_has_internal_overlap(t) != 0


def flat_codegen(gm: torch.fx.GraphModule) -> None:
    """Give a GraphModule flat positional inputs and outputs, no pytree specs."""
    gm.graph._codegen = torch.fx.graph.CodeGen()


# AOTInductor and distributed.

def aoti_compile_and_package(*args: Any, **kwargs: Any) -> str:
    import torch._inductor

    return torch._inductor.aoti_compile_and_package(*args, **kwargs)


def aoti_package_loader(path: str) -> Any:
    """The artifact's loader, made directly (model "model", no run_single_threaded, one
    model instance, on the current device)."""
    return torch._C._aoti.AOTIModelPackageLoader(path, "model", False, 1, -1)


def is_opaque(value: Any) -> bool:
    """A value ops take as an opaque object, no tensor nor scalar: a torch opaque type's
    (torch 2.11 on, `torch._library.opaque_object`: vLLM's `LayerName`) or a TorchScript
    custom class's. Where the module is absent only ScriptObjects are opaque."""
    if isinstance(value, torch.ScriptObject):
        return True
    try:
        from torch._library.opaque_object import is_opaque_value
    except ImportError:
        return False
    return bool(is_opaque_value(value))


def async_collective_tensor_type() -> type:
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    return AsyncCollectiveTensor


def accelerator_graph() -> Any:
    """torch.accelerator.Graph, the device-generic graph (torch 2.13 on; torch_npu registers
    its NPU graph behind it), or None on torch 2.11 and 2.12: there the device module's own
    class (torch.cuda.CUDAGraph, torch.npu.NPUGraph) captures, with the same capture_begin,
    capture_end, replay and pool."""
    return getattr(getattr(torch, "accelerator", None), "Graph", None)
