"""aclcap: check that custom PyTorch ops are ready for graph mode (aclgraph, CUDA graphs, AOTI)."""

from aclcap.samples import SampleInput, samples

__version__ = "0.1.0"

__all__ = ["SampleInput", "__version__", "samples"]
