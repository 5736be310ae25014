"""aclcap: check that custom PyTorch ops are ready for graph mode (aclgraph, CUDA graphs, AOTI).

The public API is what an op library needs to declare sample inputs for `check-meta`."""

from aclcap._version import VERSION as __version__
from aclcap.meta.sample_inputs import SampleInput, samples

__all__ = ["SampleInput", "__version__", "samples"]
