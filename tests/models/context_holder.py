"""Another module's global a model file sets per step (weight_data.py), as vLLM's runner
sets `vllm.forward_context._forward_context`: rebound with each draw."""

CONTEXT: dict = {}
