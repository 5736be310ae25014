"""vLLM's llama class with the `myacl` op library and its C++ Meta kernels plugged in: once
RMSNorm is the library's (it passes `self.weight`), torch.export takes the step."""

import myacl.meta  # noqa: F401  (the kernels, their Meta kernels, the OOT layers)
from vllm_configs import LOGITS, OP_LIBRARIES, SHAPES, SPLITTING_OPS, step_for  # noqa: F401

build_model, make_inputs, pad_inputs = step_for("llama")
