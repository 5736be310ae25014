"""A recommendation model's sparse step on FBGEMM's CPU ops, as torchrec calls them: the
lengths of 2 features x B samples to offsets, the ids permuted feature-major, pooled
embeddings by segment sums, 8-bit and 4-bit rowwise quantized rows dequantized, a jagged
history to a dense block, and an attention-like jagged mat-vec. The ops are the
`fbgemm_nofake` ones (no metas): check-meta harvests its samples here."""

from __future__ import annotations

import torch

OP_LIBRARIES = ["fbgemm_nofake_lib.py"]
I32 = torch.int32


class Step(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(64, 16))
        self.register_buffer("q8", torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(
            torch.randn(64, 16)))

    def forward(self, lengths: torch.Tensor, ids: torch.Tensor, history: torch.Tensor,
                hist_lengths: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        f = torch.ops.fbgemm_nofake
        offsets = f.asynchronous_complete_cumsum(lengths)
        starts = f.asynchronous_exclusive_cumsum(lengths)
        b = lengths.numel() // 2
        perm = torch.arange(2 * b, dtype=I32).view(2, b).t().reshape(-1)
        plen, pids, _ = f.permute_1D_sparse_data(perm, lengths, ids, None, ids.numel())
        pos = f.offsets_range(offsets.long(), ids.numel())
        rows = f.Fused8BitRowwiseQuantizedToFloat(self.q8)[ids] + self.table[pos % 64]
        pooled = torch.stack([f.segment_sum_csr(1, offsets[i:i + 2], rows[:, j].contiguous())
                              for i in range(2) for j in range(2)])
        deq = f.FusedNBitRowwiseQuantizedSBHalfToFloat(
            f.FloatToFusedNBitRowwiseQuantizedSBHalf(rows, 4), 4)
        q8 = f.FloatToFused8BitRowwiseQuantized(deq)
        hist_off = f.asynchronous_complete_cumsum(hist_lengths).long()
        dense = f.jagged_2d_to_dense(history, hist_off, 8)
        packed = f.pack_segments(history, hist_lengths.long(), 8)
        att = f.batched_dense_vec_jagged_2d_mul(query, history, hist_off)
        inner = f.expand_into_jagged_permute(perm, offsets, f.asynchronous_complete_cumsum(plen),
                                             ids.numel())
        return (pooled.sum() + q8.float().sum() + dense.sum() + packed.sum() + att.sum()
                + inner.sum() + pids.sum() + starts.sum())


def build_model(device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    return Step()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple:
    b = 2 * size
    lengths = torch.randint(0, 4, (2 * b,), dtype=I32)
    ids = torch.randint(0, 64, (int(lengths.sum()),))
    hist_lengths = torch.randint(0, 8, (b,), dtype=I32)
    history = torch.randn(int(hist_lengths.sum()), 2 * 4)  # L, heads * dim
    query = torch.randn(b * 2, 3)  # B * heads, N
    return lengths, ids, history, hist_lengths, query
