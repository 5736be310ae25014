"""Run bnb's maintainers' fakes (`bitsandbytes::op`), the synthesized fakes (`bnb_nofake::op`,
from the file given) and bnb's real kernels on calls no synthesis sample had: other shapes and
ranks, blocksizes, quant types, storage and output dtypes, a threshold with outliers
(fake_compare.py prints the report).

Usage: python bnb_fake_compare.py SYNTHESIZED.py"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import bnb_nofake_lib  # noqa: E402  (beside this file)
from fake_compare import Calls, main  # noqa: E402

BNB, CODE = bnb_nofake_lib.BNB, bnb_nofake_lib.CODE


def _x(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype)


def _int8(*shape: int) -> torch.Tensor:
    return torch.randint(-127, 128, shape, dtype=torch.int8)


def _q8(shape: tuple[int, ...], blocksize: int) -> tuple[torch.Tensor, torch.Tensor]:
    return BNB.quantize_blockwise(_x(torch.float32, *shape), CODE, blocksize)


def _q4(n: int, k: int, blocksize: int, quant_type: str) -> tuple[torch.Tensor, torch.Tensor]:
    return BNB.quantize_4bit(_x(torch.float32, n, k), blocksize, quant_type, torch.uint8)


def _outliers(rows: int, cols: int) -> torch.Tensor:
    x = _x(torch.float32, rows, cols)
    x[:, 3] += 20.0  # one outlier feature, as LLM.int8() meets them
    return x


def calls() -> Calls:
    """Per op, (what is new, the call's arguments); in-contract calls only (bnb's code
    tables and absmax float32, int8 activations 2-D: the kernel is coherent only there)."""
    return {
        "quantize_blockwise": [
            ("3-D float16, blocksize 128", lambda: (_x(torch.float16, 2, 3, 50), CODE, 128)),
            ("bfloat16, blocksize 4096", lambda: (_x(torch.bfloat16, 1000), CODE, 4096)),
        ],
        "dequantize_blockwise": [
            ("to float16, blocksize 128", lambda: (*_q8((3, 200), 128), CODE, 128,
                                                   torch.float16)),
            ("3-D, blocksize 256", lambda: (*_q8((2, 3, 50), 256), CODE, 256, torch.bfloat16)),
        ],
        "quantize_4bit": [
            ("fp4, blocksize 128", lambda: (_x(torch.bfloat16, 16, 128), 128, "fp4",
                                            torch.uint8)),
            ("bfloat16 storage", lambda: (_x(torch.float32, 8, 64), 32, "nf4", torch.bfloat16)),
            ("float32 storage, odd rows", lambda: (_x(torch.float16, 5, 64), 64, "nf4",
                                                   torch.float32)),
        ],
        "dequantize_4bit": [
            ("fp4 to bfloat16", lambda: (*_q4(16, 128, 128, "fp4"), 128, "fp4", [16, 128],
                                         torch.bfloat16)),
            ("blocksize 32 to float16", lambda: (*_q4(8, 64, 32, "nf4"), 32, "nf4", [8, 64],
                                                 torch.float16)),
        ],
        "int8_vectorwise_quant": [
            ("float16 [7, 96]", lambda: (_x(torch.float16, 7, 96), 0.0)),
            ("threshold 6 with outliers", lambda: (_outliers(5, 40), 6.0)),
        ],
        "int8_vectorwise_dequant": [
            ("[7, 96]", lambda: (_int8(7, 96), torch.rand(7) * 4)),
        ],
        "int8_linear_matmul": [
            ("3-D A", lambda: (_int8(2, 5, 40), _int8(24, 40))),
            ("[9, 16] x [3, 16]", lambda: (_int8(9, 16), _int8(3, 16))),
        ],
        "int8_mm_dequant": [
            ("to bfloat16", lambda: (torch.randint(-999, 999, (6, 40), dtype=torch.int32),
                                     torch.rand(6), torch.rand(40), torch.bfloat16)),
            ("dtype None (float16)", lambda: (torch.randint(-999, 999, (6, 40),
                                                            dtype=torch.int32),
                                              torch.rand(6), torch.rand(40), None)),
        ],
        "gemm_4bit": [
            ("3-D bfloat16 A, fp4", lambda: (_x(torch.bfloat16, 2, 3, 128),
                                             *_gemm_weight(48, 128, 128, "fp4"))),
            ("float16 A, blocksize 32", lambda: (_x(torch.float16, 5, 64),
                                                 *_gemm_weight(16, 64, 32, "nf4"))),
        ],
    }


def _gemm_weight(n: int, k: int, blocksize: int, quant_type: str) -> tuple:
    packed, absmax = _q4(n, k, blocksize, quant_type)
    return packed, [n, k], absmax, blocksize, quant_type


if __name__ == "__main__":
    main(bnb_nofake_lib.NS, BNB, calls())
