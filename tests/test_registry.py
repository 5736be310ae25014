"""registry: ops come from the dispatcher, and the meta source is told apart correctly."""

from __future__ import annotations

import torch

from aclcap.meta.registry import list_ops


def test_lists_bundled_ops_from_dispatcher(bundled):
    ops = {o.qualname: o for o in list_ops(["aclcap"])}
    assert len(ops) == 9  # seven ops; rms_norm and silu_and_mul also have an out= overload
    assert ops["aclcap::paged_attention.default"].meta_kind == "python"
    assert torch.Tag.cudagraph_unsafe in ops["aclcap::paged_attention.default"].overload().tags
    assert ops["aclcap::rms_norm.out"].meta_kind == "cpp"
    assert ops["aclcap::silu_and_mul.default"].meta_kind == "cpp"
    assert "registration.cpp" in ops["aclcap::silu_and_mul.default"].meta_source
    assert ops["aclcap::rms_norm.default"].meta_kind == "python"
    assert ops["aclcap::rms_norm.default"].schema.startswith("aclcap::rms_norm(Tensor input")
    assert all(o.has_samples for o in ops.values())


def test_custom_op_with_and_without_fake():
    # custom_op always installs a placeholder Meta kernel: that must not count as a meta impl.
    @torch.library.custom_op("aclcap_regtest::plain", mutates_args=())
    def plain(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @torch.library.custom_op("aclcap_regtest::faked", mutates_args=())
    def faked(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @faked.register_fake
    def _(x):
        return torch.empty_like(x)

    ops = {o.qualname: o for o in list_ops(["aclcap_regtest"])}
    assert ops["aclcap_regtest::plain.default"].meta_kind == "missing"
    assert ops["aclcap_regtest::faked.default"].meta_kind == "python"
    assert "test_registry.py" in ops["aclcap_regtest::faked.default"].meta_source


def test_composite_op_needs_no_meta():
    lib = torch.library.Library("aclcap_comptest", "DEF")
    lib.define("double(Tensor x) -> Tensor")
    lib.impl("double", lambda x: x * 2, "CompositeImplicitAutograd")
    (op,) = list_ops(["aclcap_comptest"])
    assert op.meta_kind == "composite"
