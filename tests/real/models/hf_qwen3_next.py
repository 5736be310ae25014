"""A tiny random transformers Qwen3-Next decoder (hf_decoder.py): linear-attention and MoE
layers, the heaviest step here to trace and compile (docs/measurements.md, capture's cost)."""

from hf_decoder import step_for

SHAPES = [1, 2, 4]
LOGITS = True
build_model, make_inputs = step_for("qwen3_next")
