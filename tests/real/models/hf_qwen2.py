"""A tiny random transformers qwen2 decoder (hf_decoder.py)."""

from hf_decoder import step_for

SHAPES = [1, 2, 4]
LOGITS = True
build_model, make_inputs = step_for("qwen2")
