"""vLLM's llama class with the `myacl` op library plugged in (kernels only: no Meta kernels,
no fakes), as a kernel author meets it first; tests/real/test_vllm_oot.py closes the loop."""

import myacl  # noqa: F401  (loads the library, registers its OOT layers)
from vllm_configs import LOGITS, OP_LIBRARIES, SHAPES, SPLITTING_OPS, step_for  # noqa: F401

build_model, make_inputs, pad_inputs = step_for("llama")
