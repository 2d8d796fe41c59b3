"""A user model for ``--model runtime_user_model:build`` in the runtime checker's tests."""

import torch
from torch import nn


class TwoLayerNet(nn.Module):
    """``(B, 32)`` float32 -> ``(B, 8)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 128)
        self.fc2 = nn.Linear(128, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def build() -> nn.Module:
    return TwoLayerNet()
