"""A GNN message-passing step on PyG's torch-scatter 2.1.2 (an old-API C++ library:
`torch::RegisterOperators`, catch-all composite kernels, schemas with args `_0.._4`), as
PyG layers call it: every scatter along dim 0 with `dim_size` given. torch-scatter 2.1.2's
`scatter_sum` and `scatter_mean` are Python over `scatter_add_`; max, min and mul call its
ops. No wheel exists for torch 2.13: build it from the sdist,
`pip install --no-build-isolation torch-scatter==2.1.2` (about 4.5 min on 2 cores)."""

import torch
import torch_scatter

OP_LIBRARIES = ["torch_scatter"]


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        msg = self.lin(x)[src]
        n = x.shape[0]
        s = torch_scatter.scatter_sum(msg, dst, dim=0, dim_size=n)
        m = torch_scatter.scatter_mean(msg, dst, dim=0, dim_size=n)
        mx = torch_scatter.scatter_max(msg, dst, dim=0, dim_size=n)[0]
        mn = torch_scatter.scatter_min(msg, dst, dim=0, dim_size=n)[0]
        pr = torch_scatter.scatter_mul(msg.sigmoid(), dst, dim=0, dim_size=n)
        return s + m + mx + mn + pr


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    x = torch.randn(size, 16, device=device, dtype=dtype)
    edge_index = torch.randint(0, size, (2, 3 * size), device=device)
    return x, edge_index
