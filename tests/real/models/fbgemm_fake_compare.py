"""Run fbgemm's own metas (`fbgemm::op`), the synthesized fakes (`fbgemm_nofake::op`, from
the file given) and fbgemm's CPU kernels on calls the recommendation step never made: other
lengths, dims, bit rates (2, 4, 8 and the 3 and 5 the kernel also takes), int64 lengths,
weights given (fake_compare.py prints the report).

Usage: python fbgemm_fake_compare.py SYNTHESIZED.py"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import fbgemm_nofake_lib  # beside this file
from fake_compare import Calls, main

FB = torch.ops.fbgemm
I32 = torch.int32


def _jagged(batch: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Values of `batch` rows of 0-5 entries each, their lengths and offsets."""
    lengths = torch.randint(0, 6, (batch,))
    return torch.randn(int(lengths.sum()), dim), lengths, FB.asynchronous_complete_cumsum(
        lengths)


def _permuted(tables: int, batch: int, dtype: torch.dtype = torch.int64
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lengths = torch.randint(0, 4, (tables * batch,), dtype=I32)
    return torch.randperm(tables * batch).to(I32), lengths, torch.arange(
        int(lengths.sum()), dtype=dtype)


def calls() -> Calls:
    """Per op, (what is new, the call's arguments): in-contract calls only (n-bit rows of
    whole half-float pairs, offsets that match their lengths)."""
    x = torch.randn(3, 40)
    rows = {bits: FB.FloatToFusedNBitRowwiseQuantizedSBHalf(x, bits) for bits in (2, 3, 4, 5, 8)}
    values, lengths, offsets = _jagged(5, 3)
    perm, plen, ids = _permuted(3, 2)
    return {
        "asynchronous_complete_cumsum": [
            ("int64, 33 lengths", lambda: (torch.randint(0, 5, (33,)),)),
            ("one length", lambda: (torch.tensor([3], dtype=I32),))],
        "asynchronous_exclusive_cumsum": [
            ("int64, 7 lengths", lambda: (torch.randint(0, 5, (7,)),))],
        "FloatToFused8BitRowwiseQuantized": [("one row of 40", lambda: (torch.randn(1, 40),))],
        "Fused8BitRowwiseQuantizedToFloat": [
            ("9 rows of 7", lambda: (FB.FloatToFused8BitRowwiseQuantized(torch.randn(9, 7)),))],
        "FloatToFusedNBitRowwiseQuantizedSBHalf": [
            (f"bit rate {bits}", lambda bits=bits: (x, bits)) for bits in (2, 3, 5, 8)],
        "FusedNBitRowwiseQuantizedSBHalfToFloat": [
            (f"bit rate {bits}", lambda bits=bits: (rows[bits], bits)) for bits in (2, 3, 5, 8)],
        "jagged_2d_to_dense": [("5 rows of dim 3, max 9", lambda: (values, offsets, 9))],
        "pack_segments": [("5 segments of dim 3, max 2", lambda: (values, lengths, 2))],
        "offsets_range": [("int64 offsets", lambda: (offsets, int(lengths.sum())))],
        "segment_sum_csr": [
            ("batch 5", lambda: (5, offsets.to(I32), torch.randn(int(lengths.sum()))))],
        "batched_dense_vec_jagged_2d_mul": [
            (f"{heads} heads", lambda heads=heads: (
                torch.randn(5 * heads, 4), torch.randn(int(lengths.sum()), heads * 3), offsets))
            for heads in (1, 3)],
        "permute_1D_sparse_data": [
            ("3 tables", lambda: (perm, plen, ids, None, ids.numel())),
            ("int32 ids", lambda: (perm, plen, ids.to(I32), None, ids.numel())),
            ("weights given", lambda: (perm, plen, ids, torch.randn(ids.numel()), ids.numel()))],
        "expand_into_jagged_permute": [
            ("3 tables", lambda: (perm, FB.asynchronous_complete_cumsum(plen),
                                  FB.asynchronous_complete_cumsum(plen[perm.long()]),
                                  ids.numel()))],
    }


if __name__ == "__main__":
    main(fbgemm_nofake_lib.NS, FB, calls())
