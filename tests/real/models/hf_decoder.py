"""Tiny random Hugging Face decoders (no download) as aclcap model files: the step is one
forward over `size` new tokens of one sequence, `model(input_ids, position_ids,
use_cache=False).logits[0]`, as a user's first try at capturing a transformers model is.

Each architecture's model file is two lines: `from hf_decoder import step_for` and
`build_model, make_inputs = step_for("llama")` (a model file's folder is on sys.path)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import transformers

VOCAB = 128
# Two layers, hidden 64, grouped KV heads where the architecture has them: what a real
# config of the family holds, at a size that compiles in seconds.
_COMMON = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 64}
CONFIGS: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", _COMMON),
    "qwen2": ("Qwen2Config", _COMMON),
    "qwen3": ("Qwen3Config", {**_COMMON, "head_dim": 16}),
    "mistral": ("MistralConfig", {**_COMMON, "sliding_window": 32}),
    "gemma": ("GemmaConfig", {**_COMMON, "head_dim": 16}),
    "phi3": ("Phi3Config", {**_COMMON, "pad_token_id": 0}),
    "gpt2": ("GPT2Config", {"vocab_size": VOCAB, "n_embd": 64, "n_layer": 2, "n_head": 4,
                            "n_positions": 64}),
    # hybrid: three gated-delta-rule (linear attention) layers to one full attention, MoE
    # feed-forward with a shared expert; the heaviest step of the corpus to compile
    "qwen3_next": ("Qwen3NextConfig", {**_COMMON, "num_hidden_layers": 4, "head_dim": 16,
                                       "linear_num_value_heads": 4, "linear_num_key_heads": 2,
                                       "linear_key_head_dim": 16, "linear_value_head_dim": 16,
                                       "num_experts": 4, "num_experts_per_tok": 2,
                                       "moe_intermediate_size": 32,
                                       "shared_expert_intermediate_size": 32}),
}


class Step(torch.nn.Module):
    """The logits of one forward over `size` tokens: what a decode step returns."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, position_ids=position_ids,
                          use_cache=False).logits[0]


def step_for(arch: str, attn_implementation: str = "sdpa"
             ) -> tuple[Callable[..., torch.nn.Module], Callable[..., tuple]]:
    """build_model and make_inputs of the model-file contract for one architecture."""
    config_class, fields = CONFIGS[arch]

    def build_model(device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
        torch.manual_seed(0)  # the same random weights in every process that builds it
        config = getattr(transformers, config_class)(**fields,
                                                     attn_implementation=attn_implementation)
        model = transformers.AutoModelForCausalLM.from_config(config)
        return Step(model.to(device=device, dtype=dtype).eval())

    def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple:
        start = int(torch.randint(0, 64 - size, ()))  # fresh positions too, not only tokens
        return (torch.randint(0, VOCAB, (1, size), device=device),
                torch.arange(start, start + size, device=device).unsqueeze(0))

    return build_model, make_inputs
