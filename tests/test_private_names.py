"""Private torch names live in aclcap/_compat.py alone, each with its fallback for the
torch releases that lack it (2.11 lacks `Library._resolve_op_name`, which once broke every
check-meta there). A name used anywhere else fails here; a new one in _compat.py fails
until it is added to the list below, so it is seen in review."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

COMPAT = ROOT / "aclcap" / "_compat.py"
# What _compat.py touches, each checked on 2.11 and the newest torch by
# scripts/compat_check.sh.
EXPECTED = [
    # Attributes of a torch.library.custom_op's definition (CustomOpDef), and the Library
    # method 2.11 and 2.12 lack (library_op_name falls back).
    "_abstract_fn", "_backend_fns", "_backward_fn", "_init_fn", "_resolve_op_name",
    "_setup_context_fn", "_torch_dispatch_fns", "_vmap_fn",
    "_codegen",  # torch.fx.Graph's
    "_guards_fn",  # an exported program's unlifted module's guard check (torch >= 2.9)
    "_forward_context",  # vLLM's forward context global (vllm.forward_context), not torch's
    "torch._guards.CompileContext",  # the frame being compiled (piecewise guards)
    "torch._inductor.compile_fx.compile_fx",  # Inductor as a callable backend with options
    "torch._C.Argument", "torch._C.DispatchKey.__members__", "torch._C.FunctionSchema",
    "torch._C._aoti.AOTIModelPackageLoader", "torch._C._dispatch_dump",
    "torch._C._dispatch_get_all_op_names", "torch._C._dispatch_has_kernel_for_dispatch_key",
    "torch._C.parse_schema", "torch._debug_has_internal_overlap",
    "torch._dynamo", "torch._dynamo.convert_frame", "torch._dynamo.guards",
    "torch._dynamo.list_backends",
    "torch._dynamo.lookup_backend", "torch._dynamo.mark_dynamic",
    "torch._dynamo.maybe_mark_dynamic", "torch._dynamo.reset", "torch._dynamo.reset_code",
    "torch._dynamo.utils.counters", "torch._dynamo.utils.guard_failures",
    "torch._inductor", "torch._inductor.aoti_compile_and_package",
    "torch._library.custom_ops.OPDEFS", "torch._library.opaque_object.is_opaque_value",
    "torch._library.simple_registry.singleton",
    "torch._library.utils.can_generate_trivial_fake_impl", "torch._logging.set_logs",
    "torch._ops.OpOverload", "torch._ops.OpOverloadPacket",
    "torch._subclasses.fake_tensor.FakeTensorMode",
    "torch.distributed._functional_collectives.AsyncCollectiveTensor",
    "torch.fx.experimental._config", "torch.utils._python_dispatch.TorchDispatchMode",
    "torch.utils._pytree", "torch.utils._sympy.numbers.int_oo",
    # the sympy functions of a shape that pads the size (export.py's static programs)
    "torch.utils._sympy.functions.Mod", "torch.utils._sympy.functions.ModularIndexing",
    "torch.utils._sympy.functions.PythonMod",
]
# Attributes of torch's op objects read all over the package: the same since torch 1.x on
# every OpOverload (`_schema`, `_overloadname`) and packet (`_qualified_op_name`), which
# have no public spelling of them; allowed, not wrapped.
OP_ATTRIBUTES = {"_schema", "_overloadname", "_qualified_op_name"}
# Private attributes that are not torch's: sys._getframe, os._exit, atexit's hooks run by
# a forked child before it leaves (crash_guard.py), multiprocessing's fork server
# (_forkserver.py), aclcap's own marker on a model module.
NOT_TORCH = {"_getframe", "_exit", "_run_exitfuncs", "_forkserver", "_forkserver_pid",
             "_aclcap_source_sha256", "_aclcap_loads"}


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _own_selves(tree: ast.AST) -> set[int]:
    """The `self`/`cls` names read inside a method of a class the module defines."""
    return {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
            for f in c.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(f) if isinstance(n, ast.Name) and n.id in ("self", "cls")}


def _names(tree: ast.AST) -> set[str]:
    """Private names a module touches: whole `torch.` chains and torch imports with a
    private part, and `_` attributes read off any object but the `self`/`cls` of a method of
    the module's own classes, by `.` or by getattr with a literal name. (A `self` elsewhere,
    as in a function patched onto torch's `Library`, is torch's object: that `self` once read
    `_resolve_op_name`, which 2.11 lacks.)"""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    own = _own_selves(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            names |= {f"{node.module}.{a.name}" for a in node.names
                      if any(map(_private, f"{node.module}.{a.name}".split(".")))}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names
                      if a.name.startswith("torch") and any(map(_private, a.name.split(".")))}
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                and _private(str(node.args[1].value)):
            names.add(str(node.args[1].value))  # getattr(lib, "_resolve_op_name", None)
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id == "torch":
                if any(map(_private, chain)):
                    names.add(".".join(["torch", *chain]))
            elif id(base) in own:
                continue
            else:
                names |= {part for part in chain if _private(part)}
    return names - OP_ATTRIBUTES - NOT_TORCH


def test_no_module_but_compat_touches_a_private_torch_name():
    found = {}
    for path in sorted([*(ROOT / "aclcap").rglob("*.py"), *(ROOT / "aclcap_ops").rglob("*.py")]):
        if path != COMPAT and (names := _names(ast.parse(path.read_text()))):
            found[str(path.relative_to(ROOT))] = sorted(names)
    assert found == {}, f"private names outside aclcap/_compat.py: {found}"


def test_compat_lists_every_private_torch_name_it_touches():
    assert sorted(_names(ast.parse(COMPAT.read_text()))) == sorted(EXPECTED)
