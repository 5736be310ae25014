"""A GNN readout on PyG's torch-scatter 2.1.2 as PyG's pooling layers call it: node
features reduced per graph by CSR offsets (`segment_csr`, every reduction), broadcast back
to the nodes (`gather_csr`), and a per-destination max written into a buffer the caller
owns (`scatter_max(..., out=)`), which the op fills and returns. Built from its sdist as
scatter_gnn_step.py says."""

import torch
import torch_scatter

OP_LIBRARIES = ["torch_scatter"]


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x, ptr, dst, into):
        h = self.lin(x)
        pooled = sum(torch_scatter.segment_csr(h, ptr, reduce=r)
                     for r in ("sum", "mean", "min", "max"))
        back = torch_scatter.gather_csr(pooled, ptr)
        best = torch_scatter.scatter_max(h, dst, dim=0, out=into)[0]
        return back + best


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    nodes = 3 * size
    cuts = torch.sort(torch.randint(0, nodes + 1, (max(size - 1, 0),))).values
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), cuts,
                     torch.full((1,), nodes, dtype=torch.long)]).to(device)
    x = torch.randn(nodes, 16, device=device, dtype=dtype)
    dst = torch.randint(0, nodes, (nodes, 16), device=device)
    return x, ptr, dst, torch.zeros(nodes, 16, device=device, dtype=dtype)
