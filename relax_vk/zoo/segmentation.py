"""Segmentation models of the zoo: a small DeepLab with an ASPP head (see :mod:`relax_vk.zoo`)."""

from __future__ import annotations

from .layers import F, conv_bn, nn, torch


class ASPPPooling(nn.Sequential):
    """Image pooling branch: global average pool -> 1x1 conv -> BN -> ReLU -> bilinear upsample
    back to the feature size."""

    def __init__(self, cin, cout):
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    def forward(self, x):
        size = x.shape[-2:]
        for module in self:
            x = module(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: 1x1 conv | three dilated 3x3 convs | image pooling,
    concatenated, then a 1x1 projection (-> BN -> ReLU -> dropout)."""

    def __init__(self, cin, rates, cout):
        super().__init__()
        branches = [conv_bn(cin, cout, 1)]
        branches += [conv_bn(cin, cout, 3, dilation=rate) for rate in rates]
        branches.append(ASPPPooling(cin, cout))
        self.branches = nn.ModuleList(branches)
        self.project = nn.Sequential(conv_bn((len(rates) + 2) * cout, cout, 1), nn.Dropout(0.5))

    def forward(self, x):
        return self.project(torch.cat([branch(x) for branch in self.branches], dim=1))


class DeepLabASPP(nn.Module):
    """DeepLabV3-style: a conv backbone of output stride 8 (its last conv dilated 2), an ASPP head
    with rates 2, 4, 6, a 3x3 conv, 1x1 classifier (5 classes) and a bilinear upsample
    (align_corners=False) to the input resolution."""

    def __init__(self, num_classes=5):
        super().__init__()
        self.backbone = nn.Sequential(
            conv_bn(3, 16, 3, 2), conv_bn(16, 16),
            conv_bn(16, 32, 3, 2), conv_bn(32, 32),
            conv_bn(32, 64, 3, 2), conv_bn(64, 64, 3, dilation=2),
        )  # fmt: skip
        self.head = nn.Sequential(ASPP(64, (2, 4, 6), 32), conv_bn(32, 32, 3), nn.Conv2d(32, num_classes, 1))

    def forward(self, x):
        size = x.shape[-2:]
        x = self.head(self.backbone(x))
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)
