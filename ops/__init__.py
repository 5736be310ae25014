"""The bundled op library, namespace `aclcap` (installed as the module `aclcap_ops`).

Importing it builds the C++ kernels if they are stale, loads them, and registers the Python
fake impls and the sample inputs, so `--lib aclcap_ops` is all a command needs.
"""

import torch

from aclcap.build import ensure_cpu_library

torch.ops.load_library(str(ensure_cpu_library()))

from aclcap_ops import device_fallback, meta, samples  # noqa: E402,F401  (registrations)

device_fallback.register()
