"""Each bundled kernel against its plain-PyTorch reference, on random shapes (vector-width
multiples and odd tails) and all three float dtypes."""

from __future__ import annotations

import os

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from aclcap_ops import reference
from aclcap_ops.samples import _paged_attention as paged_attention_samples
from aclcap_ops.samples import cos_sin_cache, paged_kv_cache

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# (tokens, hidden): one token, odd tails, a wide row, many rows over both threads.
SHAPES = ((1, 64), (3, 100), (7, 1), (17, 4096), (257, 33))


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # The kernels and references both compute in float32; they differ only in summation
    # order and one rounding to the output dtype.
    if expected.dtype == torch.float32:
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(actual, expected)


@pytest.fixture(autouse=True)
def _seed_and_threads():
    """The kernels' split over threads (at::parallel_for) is under test too: at least two
    threads, whatever OMP_NUM_THREADS `make test` gives its workers."""
    torch.manual_seed(0)
    before = torch.get_num_threads()
    torch.set_num_threads(max(2, os.cpu_count() or 1))
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm(bundled, dtype, shape):
    x = torch.randn(shape, dtype=dtype)
    w = torch.randn(shape[-1], dtype=dtype)
    assert_close(bundled.rms_norm(x, w, 1e-6), reference.rms_norm(x, w, 1e-6))


def test_rms_norm_non_contiguous_and_3d(bundled):
    x = torch.randn(4, 6, 64).transpose(0, 1)
    w = torch.randn(64)
    out = bundled.rms_norm(x, w, 1e-5)
    assert out.is_contiguous()
    assert_close(out, reference.rms_norm(x, w, 1e-5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_add_rms_norm(bundled, dtype, shape):
    x = torch.randn(shape, dtype=dtype)
    residual = torch.randn(shape, dtype=dtype)
    w = torch.randn(shape[-1], dtype=dtype)
    ref_x, ref_res = x.clone(), residual.clone()
    bundled.fused_add_rms_norm(x, residual, w, 1e-6)
    reference.fused_add_rms_norm(ref_x, ref_res, w, 1e-6)
    assert_close(residual, ref_res)
    assert_close(x, ref_x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", (True, False))
@pytest.mark.parametrize(
    "tokens,q_heads,k_heads,head_size,rot_dim",
    ((1, 4, 4, 64, 64), (9, 8, 2, 128, 128), (5, 3, 1, 80, 32), (33, 2, 2, 16, 16),
     (4, 3, 2, 100, 100)),  # the last: both layouts end each head in a partial vector
)
def test_rotary_embedding(bundled, dtype, is_neox, tokens, q_heads, k_heads, head_size, rot_dim):
    positions = torch.randint(0, 128, (tokens,))
    q = torch.randn(tokens, q_heads * head_size, dtype=dtype)
    k = torch.randn(tokens, k_heads * head_size, dtype=dtype)
    table = cos_sin_cache(128, rot_dim, "cpu", dtype)
    ref_q, ref_k = q.clone(), k.clone()
    bundled.rotary_embedding(positions, q, k, head_size, table, is_neox)
    reference.rotary_embedding(positions, ref_q, ref_k, head_size, table, is_neox)
    assert_close(q, ref_q)
    assert_close(k, ref_k)


def test_rotary_embedding_rejects_out_of_range_position(bundled):
    q = torch.randn(1, 64)
    with pytest.raises(RuntimeError, match="outside cos_sin_cache"):
        bundled.rotary_embedding(torch.tensor([9]), q, q.clone(), 64,
                                 cos_sin_cache(8, 64, "cpu", torch.float32), True)


@pytest.mark.parametrize("bad", (99, -1))
def test_rotary_embedding_bad_position_leaves_query_and_key_alone(bundled, bad):
    # The bad position comes last: rows 0 and 1 would be rotated before a check in the loop.
    q = torch.randn(3, 2 * 64)
    k = torch.randn(3, 64)
    ref_q, ref_k = q.clone(), k.clone()
    message = f"position {bad} is outside cos_sin_cache of 8 positions"
    with pytest.raises(RuntimeError, match=message):
        bundled.rotary_embedding(torch.tensor([1, 2, bad]), q, k, 64,
                                 cos_sin_cache(8, 64, "cpu", torch.float32), True)
    torch.testing.assert_close(q, ref_q, atol=0, rtol=0)
    torch.testing.assert_close(k, ref_k, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ((1, 128), (3, 100), (7, 2), (65, 8192), (2, 5, 66)))
def test_silu_and_mul(bundled, dtype, shape):
    x = torch.randn(shape, dtype=dtype) * 4
    assert_close(bundled.silu_and_mul(x), reference.silu_and_mul(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul_extremes(bundled, dtype):
    # The 16-bit kernels' exp has no range clamp: past float32's exp range (|g| > 88) and at
    # infinities and NaN they must still give torch's answers (x * 0 = NaN for g = -inf).
    special = [0.0, -0.0, 80.0, -80.0, 87.5, -87.5, 89.0, -89.0, 100.0, -100.0, 1e4, -1e4,
               3e38, -3e38, float("inf"), -float("inf"), float("nan")]
    gate = torch.tensor(special + torch.linspace(-95, 95, 47).tolist())
    x = torch.cat((gate, torch.rand(gate.numel()) + 0.5)).to(dtype)[None]
    expected = reference.silu_and_mul(x)
    actual = bundled.silu_and_mul(x)
    if dtype == torch.float32:
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5, equal_nan=True)
    else:
        torch.testing.assert_close(actual, expected, equal_nan=True)


def test_silu_and_mul_meta_rejects_odd_last_dim(bundled):
    # The C++ meta kernel must reject what the CPU kernel rejects, on meta and fake tensors.
    with pytest.raises(RuntimeError, match="last dimension must be even"):
        bundled.silu_and_mul(torch.empty(3, 5, device="meta"))
    with FakeTensorMode(), pytest.raises(RuntimeError, match="last dimension must be even"):
        bundled.silu_and_mul(torch.empty(3, 5))
    assert bundled.silu_and_mul(torch.empty(3, 6, device="meta")).shape == (3, 3)
    with FakeTensorMode():
        assert bundled.silu_and_mul(torch.empty(2, 4, 10)).shape == (2, 4, 5)


def test_silu_and_mul_meta_keeps_sizes_symbolic(bundled):
    gm = make_fx(bundled.silu_and_mul, tracing_mode="symbolic")(torch.randn(4, 6))
    (node,) = (n for n in gm.graph.nodes if n.op == "call_function")
    assert all(isinstance(s, torch.SymInt) for s in node.meta["val"].shape)
    with pytest.raises(RuntimeError, match="last dimension must be even"):
        make_fx(bundled.silu_and_mul, tracing_mode="symbolic")(torch.randn(4, 5))


@pytest.mark.parametrize("index_dtype", (torch.int32, torch.int64))
@pytest.mark.parametrize("tokens", (1, 37, 5000))
def test_get_masked_input_and_mask(bundled, index_dtype, tokens):
    ids = torch.randint(0, 1200, (tokens,), dtype=index_dtype)
    args = (100, 600, 8, 1000, 1100)
    masked, mask = bundled.get_masked_input_and_mask(ids, *args)
    ref_masked, ref_mask = reference.get_masked_input_and_mask(ids, *args)
    assert masked.dtype == index_dtype and mask.dtype == torch.bool
    torch.testing.assert_close(masked, ref_masked)
    torch.testing.assert_close(mask, ref_mask)


def test_get_masked_input_and_mask_known_values(bundled):
    # Original shard [10, 20), 2 padding rows, added shard [30, 35) placed after them.
    ids = torch.tensor([5, 10, 19, 20, 30, 34, 35])
    masked, mask = bundled.get_masked_input_and_mask(ids, 10, 20, 2, 30, 35)
    assert masked.tolist() == [0, 0, 9, 0, 12, 16, 0]
    assert mask.tolist() == [True, False, False, True, False, False, True]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,blocks,block_size,heads,head_size",
                         ((1, 2, 16, 4, 64), (13, 4, 8, 2, 33), (64, 8, 16, 8, 128)))
def test_reshape_and_cache(bundled, dtype, tokens, blocks, block_size, heads, head_size):
    key = torch.randn(tokens, heads, head_size, dtype=dtype)
    value = torch.randn_like(key)
    k_cache = torch.randn(blocks, block_size, heads, head_size, dtype=dtype)
    v_cache = torch.randn_like(k_cache)
    slots = torch.randperm(blocks * block_size)[:tokens]
    slots[::3] = -1  # padded tokens leave the cache alone
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    bundled.reshape_and_cache(key, value, k_cache, v_cache, slots)
    reference.reshape_and_cache(key, value, ref_k, ref_v, slots)
    torch.testing.assert_close(k_cache, ref_k, atol=0, rtol=0)
    torch.testing.assert_close(v_cache, ref_v, atol=0, rtol=0)


def test_reshape_and_cache_rejects_slot_outside_cache(bundled):
    key = torch.randn(1, 1, 8)
    cache = torch.zeros(1, 4, 1, 8)
    with pytest.raises(RuntimeError, match="outside the cache"):
        bundled.reshape_and_cache(key, key, cache, cache.clone(), torch.tensor([4]))


def test_reshape_and_cache_bad_slot_leaves_caches_alone(bundled):
    # 64 tokens, the bad slot last: a check in the loop would throw after the other 63 rows
    # (padded ones aside) were already written.
    key = torch.randn(64, 2, 8)
    value = torch.randn_like(key)
    k_cache = torch.randn(8, 16, 2, 8)  # 128 slots
    v_cache = torch.randn_like(k_cache)
    slots = torch.arange(64)
    slots[5::7] = -1  # padded tokens stay allowed
    slots[-1] = 1000
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    with pytest.raises(RuntimeError, match="slot 1000 is outside the cache of 128 slots"):
        bundled.reshape_and_cache(key, value, k_cache, v_cache, slots)
    torch.testing.assert_close(k_cache, ref_k, atol=0, rtol=0)
    torch.testing.assert_close(v_cache, ref_v, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_attention_samples(bundled, dtype):
    for sample in paged_attention_samples("cpu", dtype):
        assert_close(bundled.paged_attention(*sample.args), reference.paged_attention(*sample.args))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_seqs,heads,kv_heads,head_dim,block_size", (
    (1, 2, 1, 64, 16), (7, 8, 2, 128, 16), (4, 6, 3, 33, 5), (16, 4, 4, 16, 32),
    (3, 32, 4, 64, 1)))
def test_paged_attention_random_gqa(bundled, dtype, num_seqs, heads, kv_heads, head_dim,
                                    block_size):
    seq_lens = torch.randint(1, 6 * block_size, (num_seqs,)).tolist()
    seq_lens[0] = 0  # a padded slot of the batch attends to nothing: zeros
    kc, vc, tables, lens = paged_kv_cache(seq_lens, kv_heads, head_dim, block_size, "cpu", dtype)
    query = torch.randn(num_seqs, heads, head_dim, dtype=dtype)
    out = bundled.paged_attention(query, kc, vc, 0.125, tables, lens)
    assert out.shape == query.shape and out.dtype == dtype and out.is_contiguous()
    assert out[0].abs().max() == 0
    assert_close(out, reference.paged_attention(query, kc, vc, 0.125, tables, lens))


def test_paged_attention_reference_is_sdpa_over_each_sequence(bundled):
    """The reference against torch's own attention over each sequence's tokens, gathered
    into one contiguous run: both paged implementations could share a misreading."""
    seq_lens = [1, 16, 23, 40]
    kc, vc, tables, lens = paged_kv_cache(seq_lens, 2, 32, 8, "cpu", torch.float32)
    query = torch.randn(len(seq_lens), 8, 32)
    out = bundled.paged_attention(query, kc, vc, 32 ** -0.5, tables, lens)
    for s, n in enumerate(seq_lens):
        blocks = tables[s, :-(-n // 8)].long()
        keys, values = (c[blocks].reshape(-1, 2, 32)[:n].transpose(0, 1) for c in (kc, vc))
        want = torch.nn.functional.scaled_dot_product_attention(
            query[s, :, None], keys, values, enable_gqa=True)[:, 0]
        torch.testing.assert_close(out[s], want, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(reference.paged_attention(query, kc, vc, 32 ** -0.5, tables,
                                                             lens)[s], want, atol=1e-5, rtol=1e-5)


def test_paged_attention_is_a_split_point(bundled):
    # vLLM's piecewise runtime splits the graph at ops carrying this tag.
    assert torch.Tag.cudagraph_unsafe in bundled.paged_attention.default.tags


@pytest.mark.parametrize("change,message", (
    (lambda t, n: t.__setitem__((1, 0), 99), r"block_tables\[1\]\[0\] = 99 is outside the cache"),
    (lambda t, n: n.__setitem__(0, 1000), r"seq_lens\[0\] = 1000 is outside \[0, 32\]"),
), ids=("block", "length"))
def test_paged_attention_rejects_reads_outside_the_cache(bundled, change, message):
    kc, vc, tables, lens = paged_kv_cache([5, 20], 1, 16, 8, "cpu", torch.float32)
    change(tables, lens)
    with pytest.raises(RuntimeError, match=message):
        bundled.paged_attention(torch.randn(2, 2, 16), kc, vc, 0.25, tables, lens)


def test_paged_attention_meta_follows_query(bundled):
    kc, vc, tables, lens = paged_kv_cache([5, 20], 1, 16, 8, "cpu", torch.float32)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) for t in (torch.randn(2, 4, 16), kc, vc, tables, lens)]
        out = bundled.paged_attention(fake[0], fake[1], fake[2], 0.25, fake[3], fake[4])
    assert out.shape == (2, 4, 16) and out.dtype == torch.float32
