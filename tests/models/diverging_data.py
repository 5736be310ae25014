"""diverging.py with its norm weight passed as `self.weight.data`, as vLLM's RMSNorm passes
it: torch.export refuses the step (it cannot lift that tensor), Dynamo traces it. `--bisect`
must still name the planted subtraction, on the graph Dynamo traced (issue 50)."""

import diverging
from diverging import OP_LIBRARIES, SHAPES, make_inputs  # noqa: F401  (the file's)


class DivergingData(diverging.Diverging):
    def norm_weight(self):
        return self.weight.data  # as vLLM's RMSNorm passes it


def build_model(device, dtype):
    return diverging.build_model(device, dtype, DivergingData)
