"""A step that branches on a size condition no range can say: `tokens // 2 == 1` holds at 2
and 3 only, so torch.export's range for the larger sizes is still [2, oo]. The artifact
exported at 8 must not serve 2 or 3 (AOTInductor does not check the guard): each size is
served where the program's own guards hold."""
import torch


class Step(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] // 2 == 1:  # 2 and 3 only
            return x * 2
        return x + 1


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)


SHAPES = [1, 2, 3, 4, 8]
