"""A point-cloud step on PyG's torch-cluster 1.6.3 (a C++ library of data-dependent graph
ops: sampling, neighbourhoods, clustering, walks), as a PointNet++-style layer calls it.
No wheel exists for torch 2.13: `pip install --no-build-isolation torch-cluster==1.6.3`."""

import torch
import torch_cluster

OP_LIBRARIES = ["torch_cluster"]


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 16)

    def forward(self, pos, start):
        idx = torch_cluster.fps(pos, ratio=0.5, random_start=False)
        _, col = torch_cluster.knn(pos, pos[idx], k=4)
        row, nbr = torch_cluster.radius(pos, pos, r=0.5, max_num_neighbors=8)
        cells = torch_cluster.grid_cluster(pos, torch.tensor([0.5, 0.5, 0.5]))
        walks = torch_cluster.random_walk(row, nbr, start, walk_length=3,
                                          num_nodes=pos.shape[0])
        pairs = torch_cluster.graclus_cluster(row, nbr, num_nodes=pos.shape[0])
        h = self.lin(pos)
        return h[idx].sum(0) + h[col].sum(0) + h[walks].sum((0, 1)) + (cells + pairs).sum()


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    n = 8 * size
    return (torch.rand(n, 3, device=device, dtype=dtype),
            torch.randperm(n, device=device)[:size])
