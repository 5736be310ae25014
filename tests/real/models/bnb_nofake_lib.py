"""bitsandbytes' CPU ops re-defined in namespace `bnb_nofake` WITHOUT their fakes: the same
schemas, each kernel calling bnb's own (`torch.ops.bitsandbytes`). `check-meta --synthesize`
infers a fake for each from the kernel alone, and the maintainers' fakes in
bitsandbytes/_ops.py are the answer key (tests/real/test_bitsandbytes.py compares them).

Samples are what a model step passes: float32 and bfloat16 activations (the dtype check-meta
asks for), bnb's float32 code tables and absmax, and one shape per op: the synthesis must
find the rule from its own variations of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import bitsandbytes  # noqa: F401  (registers torch.ops.bitsandbytes and its CPU kernels)
import bitsandbytes.functional as F
import torch

from aclcap import SampleInput, samples

NS = "bnb_nofake"
BNB = torch.ops.bitsandbytes
SCHEMAS = {  # bitsandbytes/_ops.py's schemas, verbatim
    "quantize_blockwise": "(Tensor A, Tensor code, int blocksize) -> (Tensor, Tensor)",
    "dequantize_blockwise": "(Tensor A, Tensor absmax, Tensor code, int blocksize, "
                            "ScalarType dtype) -> Tensor",
    "quantize_4bit": "(Tensor A, int blocksize, str quant_type, ScalarType quant_storage) "
                     "-> (Tensor, Tensor)",
    "dequantize_4bit": "(Tensor A, Tensor absmax, int blocksize, str quant_type, int[] shape, "
                       "ScalarType dtype) -> Tensor",
    "int8_vectorwise_quant": "(Tensor A, float threshold=0.0) -> (Tensor, Tensor, Tensor?)",
    "int8_vectorwise_dequant": "(Tensor A, Tensor stats) -> Tensor",
    "int8_linear_matmul": "(Tensor A, Tensor B) -> Tensor",
    "int8_mm_dequant": "(Tensor A, Tensor row_stats, Tensor col_stats, ScalarType? dtype=None, "
                       "Tensor? bias=None) -> Tensor",
    "gemm_4bit": "(Tensor A, Tensor B, int[] shapeB, Tensor absmax, int blocksize, "
                 "str quant_type, Tensor? bias=None, Tensor? absmax_8bit=None, "
                 "Tensor? absmax_code=None, Tensor? absmax_offset=None) -> Tensor",
}

_lib = torch.library.Library(NS, "DEF")


def _forward(name: str) -> Callable:
    """The CPU kernel: bnb's own op (its CPU or default kernel, as bnb dispatches it)."""
    op = getattr(BNB, name).default
    return lambda *args, **kwargs: op(*args, **kwargs)


for _name, _schema in SCHEMAS.items():
    _lib.define(_name + _schema)
    _lib.impl(_name, _forward(_name), "CPU")

CODE = F.create_dynamic_map()  # bnb's 8-bit code table: 256 float32 values


def _x(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype)


@samples(f"{NS}::quantize_blockwise")
def _quantize_blockwise(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    yield SampleInput((_x(dtype, 4, 96), CODE, 64))


@samples(f"{NS}::dequantize_blockwise")
def _dequantize_blockwise(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    q, absmax = BNB.quantize_blockwise(_x(torch.float32, 4, 96), CODE, 64)
    yield SampleInput((q, absmax, CODE, 64, dtype))


@samples(f"{NS}::quantize_4bit")
def _quantize_4bit(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    yield SampleInput((_x(dtype, 32, 64), 64, "nf4", torch.uint8))


@samples(f"{NS}::dequantize_4bit")
def _dequantize_4bit(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    packed, absmax = BNB.quantize_4bit(_x(torch.float32, 32, 64), 64, "nf4", torch.uint8)
    yield SampleInput((packed, absmax, 64, "nf4", [32, 64], dtype))


@samples(f"{NS}::int8_vectorwise_quant")
def _int8_vectorwise_quant(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    yield SampleInput((_x(dtype, 4, 48), 0.0))  # bnb.functional passes the threshold


@samples(f"{NS}::int8_vectorwise_dequant")
def _int8_vectorwise_dequant(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    q, stats, _ = BNB.int8_vectorwise_quant(_x(torch.float32, 4, 48))
    yield SampleInput((q, stats))


@samples(f"{NS}::int8_linear_matmul")
def _int8_linear_matmul(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    a, _, _ = BNB.int8_vectorwise_quant(_x(torch.float32, 4, 48))
    b, _, _ = BNB.int8_vectorwise_quant(_x(torch.float32, 24, 48))
    yield SampleInput((a, b))


@samples(f"{NS}::int8_mm_dequant")
def _int8_mm_dequant(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    acc = torch.randint(-5000, 5000, (4, 24), dtype=torch.int32)
    yield SampleInput((acc, torch.rand(4) * 4, torch.rand(24) * 4, dtype))


@samples(f"{NS}::gemm_4bit")
def _gemm_4bit(device: torch.device, dtype: torch.dtype) -> Iterator[SampleInput]:
    packed, absmax = BNB.quantize_4bit(_x(torch.float32, 32, 64), 64, "nf4", torch.uint8)
    yield SampleInput((_x(dtype, 4, 64), packed, [32, 64], absmax, 64, "nf4"))
