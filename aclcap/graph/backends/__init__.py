"""Capture backends behind one interface (`base.py`): device graphs (aclgraph, CUDA graph) in
`device.py`, AOTInductor in `aoti.py`. graph/step.py picks one per run."""
