"""The bundled library without its meta impls: `--lib aclcap_ops.nometa`.

Importing this module loads the kernels built without the C++ Meta registrations
(registration.cpp under ACLCAP_NO_META, in build/cpu-nometa/) and registers the samples but
not the Python fakes of meta.py: every op then reads `missing` (or torch's trivial fake), as
in a library that ships none, and `check-meta --synthesize` has them all to regenerate.
"""

from aclcap_ops import load

load(metas=False)
