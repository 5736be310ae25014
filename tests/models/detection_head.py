"""A detection head's step: boxes and scores from features, non-maximum suppression (a
data-dependent output size), box areas ([N, 4] by contract) and a scale whose fake pins a
dim. `check-meta --samples-from` on it must pass the first two and fail the third."""

import torch
from torch import nn

OP_LIBRARIES = ["../fixtures/detops.py"]
SHAPES = [6, 9]


class DetectionHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.boxes = nn.Linear(8, 4)
        self.score = nn.Linear(8, 1)

    def forward(self, features):
        raw = self.boxes(features)
        corner = raw[:, :2] * 4
        boxes = torch.cat([corner, corner + raw[:, 2:].abs() + 1], dim=1)
        scores = self.score(features).squeeze(1).sigmoid()
        keep = torch.ops.aclcap_det.nms(boxes, scores, 0.3)
        areas = torch.ops.aclcap_det.box_area(boxes)
        scaled = torch.ops.aclcap_det.pinned_scale(features, 2.0)
        return scaled[keep] * areas[keep].unsqueeze(1)


def build_model(device, dtype):
    torch.manual_seed(0)
    return DetectionHead().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
