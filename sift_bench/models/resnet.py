"""CIFAR-style ResNets (He et al. 2016, section 4.2) and a CIFAR-adapted ResNet-18.

ResNet-20/32/56 use three stages of 16/32/64 channels with n basic blocks
each; ResNet-18 is the ImageNet layout with a 3x3 stem and no max-pool, the usual
adaptation for 32x32 inputs.
"""

import torch
from torch import nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            # Projection shortcut (option B): cheap at these widths and trains a little better than zero-padding.
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x), inplace=True)


class CifarResNet(nn.Module):
    def __init__(self, blocks_per_stage: list[int], widths: list[int], num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True))
        layers, in_channels = [], widths[0]
        for stage, (n_blocks, width) in enumerate(zip(blocks_per_stage, widths)):
            for i in range(n_blocks):
                stride = 2 if stage > 0 and i == 0 else 1
                layers.append(BasicBlock(in_channels, width, stride))
                in_channels = width
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(in_channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


ARCHITECTURES = {
    "resnet8": ([1, 1, 1], [16, 32, 64]),
    "resnet20": ([3, 3, 3], [16, 32, 64]),
    "resnet32": ([5, 5, 5], [16, 32, 64]),
    "resnet56": ([9, 9, 9], [16, 32, 64]),
    "resnet18": ([2, 2, 2, 2], [64, 128, 256, 512]),
}


def build_resnet(arch: str, num_classes: int = 10, width_multiplier: float = 1) -> CifarResNet:
    """`arch` with every stage's channels times `width_multiplier`, rounded (at least 1): a fraction gives the
    narrow proxy of sifter=proxy, 0.25 a ResNet-20 of 4/8/16 channels."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"task.model.arch must be one of {sorted(ARCHITECTURES)}, got {arch!r}")
    blocks, widths = ARCHITECTURES[arch]
    return CifarResNet(blocks, [max(1, round(w * width_multiplier)) for w in widths], num_classes)
