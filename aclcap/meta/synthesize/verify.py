"""The battery a synthesized meta runs in a fresh worker before any row calls it verified:
check-meta's own checks (meta/checks.py CHECKS) on calls held out of fitting, less the two
that test the schema (writes, unused `!`: reported as schema defects instead). A
data-dependent size (`ctx.new_dynamic_size()`) is handled by the checks themselves (bound
to the kernel's size, never held against the meta device). One adaptation is made where
torch itself can do no more, whatever the meta: an op whose schema returns an alias
(`-> Tensor(a!)`, a view) cannot be functionalized by torch.compile or by opcheck's
test_aot_dispatch_dynamic ("We only support functionalizing operators whose outputs do not
have alias annotations"): those two are left out and the verdict says so."""

from __future__ import annotations

from aclcap._compat import OpOverload

BATTERY = ("fake_vs_real", "meta_device", "dynamic_shapes", "opcheck", "fullgraph_compile")
ALIAS_SKIP_REASON = ("torch.compile and opcheck's test_aot_dispatch_dynamic skipped: torch "
                     "does not functionalize a custom op whose output aliases an input")
# How the emitted comments name the checks a meta passed.
IN_WORDS = {"fake_vs_real": "fake vs real", "meta_device": "meta device",
            "dynamic_shapes": "symbolic sizes", "opcheck": "opcheck",
            "fullgraph_compile": "torch.compile(fullgraph, dynamic)",
            "opcheck_no_aot": "opcheck"}


def battery(op: OpOverload) -> tuple[tuple[str, ...], list[str]]:
    """The checks to run on `op`'s synthesized meta, and what was left out, in words."""
    if not any(r.alias_info is not None for r in op._schema.returns):
        return BATTERY, []
    checks = tuple("opcheck_no_aot" if c == "opcheck" else c for c in BATTERY
                   if c != "fullgraph_compile")
    return checks, [ALIAS_SKIP_REASON]
