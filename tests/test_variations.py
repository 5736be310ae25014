"""variations: new calls from one sample, on the bundled kernels (which reject what they
cannot take, so an accepted variation is a real call)."""

from __future__ import annotations

import pytest
import torch

from aclcap.meta.registry import resolve_overload
from aclcap.meta.sample_inputs import SampleInput, samples_for
from aclcap.meta.variations import new_sizes, variations, vary_dim


def _sample(bundled, name: str, index: int = 1, dtype=torch.float32) -> SampleInput:
    return list(samples_for(f"aclcap::{name}")(torch.device("cpu"), dtype))[index]


def _op(name: str):
    return resolve_overload(f"aclcap::{name}.default")


def test_new_sizes_double_increment_and_a_prime_above():
    assert new_sizes(33) == [66, 34, 37]
    assert new_sizes(1) == [2, 3]
    assert new_sizes(64) == [128, 65, 67]


def test_shared_token_dim_changes_in_every_tensor(bundled):
    op = _op("rotary_embedding")
    sample = _sample(bundled, "rotary_embedding")  # 5 tokens
    positions, query, key = sample.args[:3]
    varied = vary_dim(op, sample, "positions", 0, 12)
    assert varied is not None
    assert [varied.args[i].shape[0] for i in range(3)] == [12, 12, 12]
    assert varied.args[1].shape[1] == query.shape[1] and varied.args[2].shape[1] == key.shape[1]
    # tiled: the rows repeat, so every position stays a valid row of the table
    assert torch.equal(varied.args[0], positions.repeat(3)[:12])
    assert torch.equal(varied.args[1][5:10], query)
    op(*varied.args)  # the kernel takes it
    assert positions.shape[0] == 5  # the sample itself is untouched


def test_alone_changes_one_dim_and_the_kernel_rejects_it(bundled):
    op = _op("rotary_embedding")
    sample = _sample(bundled, "rotary_embedding")
    varied = vary_dim(op, sample, "positions", 0, 10, alone=True)
    assert varied.args[0].shape[0] == 10 and varied.args[1].shape[0] == 5
    with pytest.raises(RuntimeError, match="tokens"):
        op(*varied.args)


def test_slot_mapping_stays_valid_into_a_grown_cache(bundled):
    op = _op("reshape_and_cache")
    sample = _sample(bundled, "reshape_and_cache", index=2)  # 33 tokens, a -1 padded slot
    slots = sample.args[4]
    for variation in variations(op, sample):
        if variation.kind == "dim":
            new_slots = variation.sample.args[4]
            assert set(new_slots.tolist()) <= set(slots.tolist())
            op(*variation.sample.args)  # every shared-dim change is a call the kernel takes


def test_int_argument_equal_to_a_dim_moves_with_it(bundled):
    op = _op("rotary_embedding")
    sample = _sample(bundled, "rotary_embedding")  # key [5, 32], head_size 32
    varied = vary_dim(op, sample, "key", 1, 64)
    assert varied.args[3] == 64 and varied.args[2].shape == (5, 64)
    op(*varied.args)


def test_stride_order_is_kept():
    op = torch.ops.aten.mul.Tensor
    x = torch.randn(6, 4).t()  # [4, 6], strides (1, 4)
    varied = vary_dim(op, SampleInput((x, 2.0)), "self", 1, 9)
    t = varied.args[0]
    assert t.shape == (4, 9) and t.stride() == (1, 4)
    assert torch.equal(t[:, :6], x)


def test_impossible_variations_are_none():
    op = torch.ops.aten.mul.Tensor
    assert vary_dim(op, SampleInput((torch.empty(4, 3), 2.0)), "self", 0, 0) is None
    assert vary_dim(op, SampleInput((torch.empty(4, 3), 2.0)), "other", 0, 4) is None
    assert vary_dim(op, SampleInput((torch.empty(4, 3), 2.0)), "self", 2, 4) is None
    huge = SampleInput((torch.empty(1 << 20, 16), 2.0))
    assert vary_dim(op, huge, "self", 1, 1 << 10) is None  # 4 GiB: over the byte cap


def test_an_empty_dim_grows_to_zeros_and_offsets_follow_the_tokens():
    op = torch.ops.aten.mul.Tensor
    grown = vary_dim(op, SampleInput((torch.empty(0, 3), 2.0)), "self", 0, 4)
    assert grown is not None and torch.equal(grown.args[0], torch.zeros(4, 3))
    op = torch.ops.aten.index_select.default  # any op with a 1-D int tensor beside a dim
    x, cu = torch.randn(7, 3), torch.tensor([0, 3, 7])
    varied = vary_dim(op, SampleInput((x, 0, cu)), "self", 0, 14)
    assert varied is not None and varied.args[2].tolist() == [0, 6, 14]
    lengths = vary_dim(op, SampleInput((x, 0, torch.tensor([3, 4]))), "self", 0, 14)
    assert lengths is not None and lengths.args[2].tolist() == [6, 8]
    # the token dim alone, its offsets left behind, is outside the op's contract
    assert vary_dim(op, SampleInput((x, 0, cu)), "self", 0, 14, alone=True) is None


def test_rank_and_layout_variations_keep_shapes_and_values(bundled):
    op = _op("rms_norm")
    sample = _sample(bundled, "rms_norm")
    made = {v.description: v.sample for v in variations(op, sample)
            if v.kind in ("rank", "layout")}
    x = sample.args[0]
    added = next(s for d, s in made.items() if "leading dim of 3 added" in d)
    assert added.args[0].shape == (3, *x.shape) and torch.equal(added.args[0][1], x)
    dropped = next(s for d, s in made.items() if "leading dim dropped" in d)
    assert dropped.args[0].shape == x.shape[1:]
    transposed = made["input: transposed in memory"].args[0]
    assert torch.equal(transposed, x) and transposed.stride() == (1, x.shape[0])
    strided = made["input: strided rows"].args[0]
    assert torch.equal(strided, x) and strided.stride() == (2 * x.shape[1], 1)


def test_variations_are_deterministic_bounded_and_kinded(bundled):
    op = _op("reshape_and_cache")
    sample = _sample(bundled, "reshape_and_cache")
    first = [v.description for v in variations(op, sample)]
    assert first == [v.description for v in variations(op, sample)]
    assert len(first) == len(set(first))
    kinds = [v.kind for v in variations(op, sample)]
    # slot_mapping describes the tokens of key and value: no rank variation drops, merges
    # or adds a leading dim, only one that inserts a dim after it (the rows stay)
    assert {"values", "dim", "dim-alone", "dtype"} <= set(kinds)
    assert [v.description for v in variations(op, sample) if v.kind == "rank"] == [
        "key, value: a dim of 2 inserted after the leading one",
        "every tensor: a leading dim of 2 added"]  # a batch: which rank places the dim
    # kinds take turns, so a limit never leaves a whole kind out
    assert set(kinds[:6]) >= {"dim", "dim-alone", "dtype"}
    # the values redrawn, then each integer tensor alone at its least: a size that follows
    # an index's max moves on purpose, not by luck of the draw
    assert first[:3] == ["key, value, key_cache, value_cache, slot_mapping: values redrawn",
                         "slot_mapping: every value its least",
                         "key dim 0, value dim 0, slot_mapping dim 0: 5 -> 10"]
    assert len(list(variations(op, sample, limit=4))) == 4


def test_int_and_int_list_and_scalar_type_arguments():
    op = torch.ops.aten.new_empty.default
    sample = SampleInput((torch.randn(3, 4), [2, 5]), {"dtype": torch.float16})
    made = {v.description: v for v in variations(op, sample)}
    assert made["size[1]: 5 -> 10"].sample.args[1] == [2, 10]
    assert made["size[0]: 2 -> 3"].kind == "int"
    assert made["dtype: float16 -> bfloat16"].sample.kwargs["dtype"] == torch.bfloat16
    assert made["self: float32 -> bfloat16"].sample.kwargs["dtype"] == torch.float16
    assert sample.args[1] == [2, 5]


def test_int_args_of_the_bundled_op(bundled):
    op = _op("get_masked_input_and_mask")
    sample = _sample(bundled, "get_masked_input_and_mask")
    ints = [v for v in variations(op, sample) if v.kind == "int"]
    assert [v.description for v in ints][:2] == ["org_vocab_start_index: 100 -> 200",
                                                 "org_vocab_start_index: 100 -> 101"]
    accepted = 0
    for v in ints:
        try:
            op(*v.sample.args)
            accepted += 1
        except RuntimeError as exc:
            assert "start <= end" in str(exc)
    assert accepted == len(ints) - 2  # a start doubled past its end, an end halved below


def test_dtype_variation_keeps_other_dtypes():
    op = torch.ops.aten.addcmul.default
    x = torch.randn(4, 3, dtype=torch.bfloat16)
    scale = torch.randn(3, dtype=torch.float32)
    dtypes = [v for v in variations(op, SampleInput((x, x.clone(), scale)))
              if v.kind == "dtype"]
    assert [v.description for v in dtypes] == [
        "self, tensor1: bfloat16 -> float32", "self, tensor1: bfloat16 -> float16",
        "self alone: bfloat16 -> float32", "self alone: bfloat16 -> float16",
        "tensor1 alone: bfloat16 -> float32", "tensor1 alone: bfloat16 -> float16",
        "tensor2 alone: float32 -> bfloat16", "tensor2 alone: float32 -> float16"]
    for v in dtypes[:2]:  # bfloat16 is the main dtype (two tensors); the float32 scale stays
        assert v.sample.args[2].dtype == torch.float32
        assert v.sample.args[0].dtype == v.sample.args[1].dtype != torch.bfloat16
    alone = dtypes[2].sample.args  # then each tensor alone: promotion shows
    assert (alone[0].dtype, alone[1].dtype) == (torch.float32, torch.bfloat16)
    assert x.dtype == torch.bfloat16


def test_values_redrawn_from_their_own(bundled):
    op = _op("reshape_and_cache")
    sample = _sample(bundled, "reshape_and_cache")
    varied = next(variations(op, sample))
    assert varied.kind == "values"
    slots, new_slots = sample.args[4], varied.sample.args[4]
    assert new_slots.shape == slots.shape and set(new_slots.tolist()) <= set(slots.tolist())
    assert not torch.equal(varied.sample.args[0], sample.args[0])
    op(*varied.sample.args)


def test_float_arguments_negated_and_zeroed(bundled):
    op = _op("rms_norm")
    sample = _sample(bundled, "rms_norm")
    floats = [v for v in variations(op, sample) if v.kind == "float"]
    # each with other values too: a regime the float opens shows a size that follows the data
    redrawn = "input, weight: values redrawn"
    assert [v.description for v in floats] == [
        "eps: 1e-06 -> -1e-06", f"eps: 1e-06 -> -1e-06, {redrawn}", "eps: 1e-06 -> 0",
        f"eps: 1e-06 -> 0, {redrawn}"]
    assert floats[2].sample.args[2] == 0.0 and sample.args[2] == 1e-6


def test_dim_and_bool_and_optional_arguments_and_tied_groups_are_varied():
    """Issue 43: a `dim` argument over every dim, `keepdim` flipped, an optional argument
    left out, an index tensor's rank, and dims sharing a size changed in groups."""
    op = torch.ops.aten.sum.dim_IntList
    made = {v.description: v for v in variations(op, SampleInput((torch.randn(3, 4), [1]),
                                                                  {"dtype": torch.float32}))}
    assert made["keepdim: False -> True"].sample.kwargs["keepdim"] is True
    assert made["dtype: given -> None"].sample.kwargs["dtype"] is None
    gather = torch.ops.aten.index_select.default
    made = {v.description: v for v in variations(
        gather, SampleInput((torch.randn(6, 4), 0, torch.tensor([1, 2, 3]))))}
    assert {f"dim: 0 -> {d}" for d in (-2, -1, 1)} <= set(made)
    assert made["index alone: a leading dim of 2 added"].sample.args[2].shape == (2, 3)
    three = SampleInput((torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)))
    made = {v.description: v for v in variations(torch.ops.aten.addcmul.default, three)
            if v.kind == "dim-group"}
    assert sorted(made) == ["self dim 0, tensor1 dim 0 together: 3 -> 6",
                            "self dim 0, tensor2 dim 0 together: 3 -> 6",
                            "self dim 1, tensor1 dim 1 together: 4 -> 8",
                            "self dim 1, tensor2 dim 1 together: 4 -> 8"]
    grouped = made["self dim 0, tensor2 dim 0 together: 3 -> 6"].sample.args
    assert [tuple(t.shape) for t in grouped] == [(6, 4), (3, 4), (6, 4)]


_LIB = torch.library.Library("aclcap_vartest", "DEF")
_LIB.define("sample_points(Tensor x, Tensor ptr, Tensor ratio, Tensor steps) -> Tensor")


def test_tensors_read_as_values_change_alone_on_purpose():
    """A sampler's `ptr` at its least (every segment empty) and its one-element `ratio` and
    `steps` halved: the output count follows each, which a redraw shows only by luck."""
    op = resolve_overload("aclcap_vartest::sample_points.default")
    x, ptr = torch.randn(8, 3), torch.tensor([0, 3, 8])
    sample = SampleInput((x, ptr, torch.tensor([0.5]), torch.tensor(6)))
    made = {v.description: v.sample for v in variations(op, sample) if v.kind == "values"}
    assert torch.equal(made["ptr: every value its least"].args[1], torch.zeros(3, dtype=torch.long))
    assert made["ratio: its value halved"].args[2].tolist() == [0.25]
    assert made["steps: its value halved"].args[3].item() == 3
    assert all(torch.equal(s.args[0], x) for d, s in made.items() if "redrawn" not in d)


def test_a_dim_argument_moves_where_a_leading_dim_is_added():
    """torch-scatter's scatter_max run along the dim a variation added, not the one its
    index indexes, wrote past its `out` (it checks no index) and corrupted the worker's
    heap: later calls there aborted or read as writing `src` (issue 49). The dim moves with
    the dims, so the call is the sample's own, batched."""
    op = torch.ops.aten.scatter_add.default
    self, src = torch.zeros(6, 4), torch.randn(6, 4)
    index = torch.randint(0, 6, (6, 4))
    made = {v.description: v.sample for v in variations(op, SampleInput((self, 0, index, src)))}
    for description in ("self, index, src: a leading dim of 3 added",
                        "every tensor: a leading dim of 2 added"):
        varied = made[description]
        assert varied.args[1] == 1, description
        out = op(*varied.args)
        assert torch.equal(out[-1], op(self, 0, index, src)), description
