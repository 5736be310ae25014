"""vLLM layers replaced by the `myacl` ops through `CustomOp.register_oot` (vllm-ascend's
way): vLLM instantiates these wherever a model asks for RMSNorm, SiluAndMul or
RotaryEmbedding. On a CPU platform vLLM dispatches to forward_cpu."""

from __future__ import annotations

import torch
from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.layers.activation import SiluAndMul
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding


@CustomOp.register_oot(name="RMSNorm")
class MyaclRMSNorm(RMSNorm):
    def forward_cpu(self, x: torch.Tensor, residual: torch.Tensor | None = None
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            return torch.ops.myacl.rms_norm(x, self.weight, self.variance_epsilon)
        out = torch.ops.myacl.add_rms_norm(x, residual, self.weight, self.variance_epsilon)
        return out, residual  # residual holds x + residual now


@CustomOp.register_oot(name="SiluAndMul")
class MyaclSiluAndMul(SiluAndMul):
    def forward_cpu(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.myacl.swiglu(x)


@CustomOp.register_oot(name="RotaryEmbedding")
class MyaclRotaryEmbedding(RotaryEmbedding):
    def forward_cpu(self, positions: torch.Tensor, query: torch.Tensor,
                    key: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        torch.ops.myacl.rope(positions, query, key, self.head_size,
                             self._match_cos_sin_cache_dtype(query), self.is_neox_style)
        return query, key
