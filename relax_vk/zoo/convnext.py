"""ConvNeXt for the zoo, at reduced width and depth (see :mod:`relax_vk.zoo`)."""

from __future__ import annotations

from .layers import ChannelsFirstLayerNorm, nn, torch


class ConvNeXtBlock(nn.Module):
    """7x7 depthwise conv -> permute to NHWC -> LayerNorm -> Linear (4x) -> GELU -> Linear ->
    layer scale -> permute back -> residual add."""

    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        # layer scale starts at 1e-6 in training; a trained network's is far from it, and 1e-6
        # would make every block an identity that hides errors, so draw it from the seed
        self.gamma = nn.Parameter(torch.rand(dim) * 0.5 + 0.25)

    def forward(self, x):
        residual = x
        x = self.dwconv(x).permute(0, 2, 3, 1)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        x = (self.gamma * x).permute(0, 3, 1, 2)
        return residual + x


class ConvNeXt(nn.Module):
    """ConvNeXt with dims (16, 32, 48, 64) and depths (1, 1, 2, 1) (ConvNeXt-T: 96..768 and
    3, 3, 9, 3): 4x4 stride-4 patchify stem and channels-first LayerNorm, LayerNorm + 2x2
    stride-2 conv between stages, global average pool -> LayerNorm -> Linear."""

    def __init__(self, num_classes=10, dims=(16, 32, 48, 64), depths=(1, 1, 2, 1)):
        super().__init__()
        self.downsample = nn.ModuleList([nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), ChannelsFirstLayerNorm(dims[0]))])
        for i in range(1, len(dims)):
            self.downsample.append(nn.Sequential(ChannelsFirstLayerNorm(dims[i - 1]), nn.Conv2d(dims[i - 1], dims[i], 2, 2)))
        self.stages = nn.ModuleList(nn.Sequential(*[ConvNeXtBlock(d) for _ in range(n)]) for d, n in zip(dims, depths))
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        for down, stage in zip(self.downsample, self.stages):
            x = stage(down(x))
        return self.head(self.norm(x.mean([-2, -1])))
