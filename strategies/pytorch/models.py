"""The models of a row as PyTorch users build them: torchvision's ResNets, and the tiny test
model (models/tiny_cnn.cpp) with the same module names, loaded with ddpbench's initial weights."""
from __future__ import annotations

import torch
from torch import nn


class TinyCnn(nn.Module):
    """ddpbench's `tiny`: two strided convolutions with batch norm and a linear head."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build_model(name: str, num_classes: int) -> nn.Module:
    if name == "tiny":
        return TinyCnn(num_classes)
    import torchvision  # imported here: the tiny model needs none of it

    if name in ("resnet50", "resnet18"):
        return getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    raise ValueError(f"--model {name}: no PyTorch twin (expected resnet50, resnet18 or tiny)")


def load_initial_weights(model: nn.Module, path: str) -> None:
    """ddpbench's initial weights (a dict of tensors with torchvision's names)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
