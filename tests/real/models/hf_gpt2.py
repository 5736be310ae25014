"""A tiny random transformers gpt2 decoder (hf_decoder.py)."""

from hf_decoder import step_for

SHAPES = [1, 2, 4]
LOGITS = True
build_model, make_inputs = step_for("gpt2")
