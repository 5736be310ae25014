"""Piecewise capture, the default graph mode of vLLM and vllm-ascend: the step traced by
torch.compile is split at its splitting ops (attention, ops tagged cudagraph_unsafe), each
piece between them becomes its own graph per size and the splitting ops run eagerly."""
