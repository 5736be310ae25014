"""diverging.py with its norm weight passed as `self.weight.data`, as vLLM's RMSNorm passes
it: torch.export refuses the step (it cannot lift that tensor), Dynamo traces it. `--bisect`
must still name the planted subtraction, on the graph Dynamo traced (issue 50)."""

import torch
from diverging import OP_LIBRARIES, SHAPES, Diverging, make_inputs  # noqa: F401  (the file's)


class DivergingData(Diverging):
    def forward(self, x):
        h = torch.ops.aclcap.rms_norm(self.proj(x), self.weight.data, 1e-6)  # as vLLM does
        shifted = h + 1024.0
        h = shifted - 1024.0  # the planted divergence
        return self.out(h)


def build_model(device, dtype):
    torch.manual_seed(0)
    return DivergingData().to(device=device, dtype=dtype).eval()
