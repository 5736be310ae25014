"""vLLM's own gpt2 model class, tiny random config (vllm_configs.py), through aclcap.vllm."""

from vllm_configs import LOGITS, OP_LIBRARIES, SHAPES, SPLITTING_OPS, step_for  # noqa: F401

build_model, make_inputs, pad_inputs = step_for("gpt2")
