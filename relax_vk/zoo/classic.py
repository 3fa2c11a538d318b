"""Classic CNN families of the zoo: DenseNet-BC, Inception and ResNeXt, at reduced width (see
:mod:`relax_vk.zoo`)."""

from __future__ import annotations

from .layers import F, conv_bn, nn, torch

# ---------------------------------------------------------------------------------------------
# DenseNet-BC


class DenseLayer(nn.Module):
    """BN -> ReLU -> 1x1 conv (bn_size * growth) -> BN -> ReLU -> 3x3 conv (growth), on the
    concatenation of every earlier feature map of the block."""

    def __init__(self, cin, growth, bn_size=4):
        super().__init__()
        self.norm1, self.relu1 = nn.BatchNorm2d(cin), nn.ReLU()
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2, self.relu2 = nn.BatchNorm2d(bn_size * growth), nn.ReLU()
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features):
        x = self.conv1(self.relu1(self.norm1(torch.cat(features, 1))))
        return self.conv2(self.relu2(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, layers, cin, growth):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth) for i in range(layers))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """BN -> ReLU -> 1x1 conv (compression) -> 2x2 average pool."""

    def __init__(self, cin, cout):
        super().__init__(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, 1, bias=False), nn.AvgPool2d(2, 2))


class DenseNet(nn.Module):
    """DenseNet-BC: growth rate 12, three dense blocks of 4 layers, compression 0.5, the ImageNet
    stem (7x7 stride-2 conv, 3x3 stride-2 max pool)."""

    def __init__(self, num_classes=10, growth=12, blocks=(4, 4, 4)):
        super().__init__()
        c = 2 * growth
        layers = [nn.Conv2d(3, c, 7, 2, 3, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        for i, n in enumerate(blocks):
            layers.append(DenseBlock(n, c, growth))
            c += n * growth
            if i != len(blocks) - 1:
                layers.append(Transition(c, c // 2))
                c //= 2
        layers.append(nn.BatchNorm2d(c))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(F.relu(self.features(x)), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---------------------------------------------------------------------------------------------
# Inception


def _basic(cin, cout, k, stride=1, padding=0):
    """Inception's BasicConv2d: conv (no bias) -> BN (eps 1e-3) -> ReLU."""
    return conv_bn(cin, cout, k, stride, padding=padding, eps=1e-3)


class InceptionA(nn.Module):
    """Inception-v3 "A": 1x1 | 1x1 -> 5x5 | 1x1 -> 3x3 -> 3x3 | 3x3 avg pool -> 1x1."""

    def __init__(self, cin, pool_features):
        super().__init__()
        self.branch1x1 = _basic(cin, 16, 1)
        self.branch5x5 = nn.Sequential(_basic(cin, 12, 1), _basic(12, 16, 5, padding=2))
        self.branch3x3dbl = nn.Sequential(_basic(cin, 16, 1), _basic(16, 24, 3, padding=1), _basic(24, 24, 3, padding=1))
        self.branch_pool = _basic(cin, pool_features, 1)

    def forward(self, x):
        pool = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.branch1x1(x), self.branch5x5(x), self.branch3x3dbl(x), pool], 1)


class InceptionReduction(nn.Module):
    """Inception-v3 grid reduction ("B"): 3x3 stride 2 | 1x1 -> 3x3 -> 3x3 stride 2 | 3x3 stride-2
    max pool."""

    def __init__(self, cin):
        super().__init__()
        self.branch3x3 = _basic(cin, 24, 3, stride=2)
        self.branch3x3dbl = nn.Sequential(_basic(cin, 16, 1), _basic(16, 24, 3, padding=1), _basic(24, 24, 3, stride=2))

    def forward(self, x):
        return torch.cat([self.branch3x3(x), self.branch3x3dbl(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):
    """Inception-v3 "C" with factorised 7x7s: 1x1 | 1x1 -> 1x7 -> 7x1 | 1x1 -> 7x1 -> 1x7 -> 7x1
    -> 1x7 | 3x3 avg pool -> 1x1."""

    def __init__(self, cin, c7, cout=48):
        super().__init__()
        self.branch1x1 = _basic(cin, cout, 1)
        self.branch7x7 = nn.Sequential(_basic(cin, c7, 1), _basic(c7, c7, (1, 7), padding=(0, 3)), _basic(c7, cout, (7, 1), padding=(3, 0)))
        self.branch7x7dbl = nn.Sequential(
            _basic(cin, c7, 1),
            _basic(c7, c7, (7, 1), padding=(3, 0)),
            _basic(c7, c7, (1, 7), padding=(0, 3)),
            _basic(c7, c7, (7, 1), padding=(3, 0)),
            _basic(c7, cout, (1, 7), padding=(0, 3)),
        )
        self.branch_pool = _basic(cin, cout, 1)

    def forward(self, x):
        pool = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.branch1x1(x), self.branch7x7(x), self.branch7x7dbl(x), pool], 1)


class InceptionV1(nn.Module):
    """GoogLeNet's block: 1x1 | 1x1 -> 3x3 | 1x1 -> 5x5 | 3x3 max pool (stride 1, ceil mode) -> 1x1."""

    def __init__(self, cin, c1, c3red, c3, c5red, c5, pool_proj):
        super().__init__()
        self.branch1 = _basic(cin, c1, 1)
        self.branch2 = nn.Sequential(_basic(cin, c3red, 1), _basic(c3red, c3, 3, padding=1))
        self.branch3 = nn.Sequential(_basic(cin, c5red, 1), _basic(c5red, c5, 5, padding=2))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), _basic(cin, pool_proj, 1))

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class Inception(nn.Module):
    """Inception-v3 style at quarter width: a shortened v3 stem (3x3 s2, 3x3, max pool, 1x1, 3x3),
    then "A" (13x13), grid reduction (6x6), "C" with 1x7/7x1 convs, a GoogLeNet block with a
    max-pool branch, global average pool and a linear classifier."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(
            _basic(3, 16, 3, stride=2), _basic(16, 24, 3, padding=1), nn.MaxPool2d(3, 2),
            _basic(24, 32, 1), _basic(32, 48, 3),
        )  # fmt: skip
        self.blocks = nn.Sequential(
            InceptionA(48, 8),  # 64 channels
            InceptionReduction(64),  # 24 + 24 + 64 = 112
            InceptionC(112, 32),  # 4 * 48 = 192
            InceptionV1(192, 32, 24, 32, 8, 16, 16),  # 96
        )
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(96, num_classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.blocks(self.stem(x)), (1, 1))
        return self.fc(self.dropout(torch.flatten(x, 1)))


# ---------------------------------------------------------------------------------------------
# ResNeXt / RegNet


class ResNeXtBlock(nn.Module):
    """Bottleneck with a grouped 3x3: 1x1 -> 3x3 (groups, stride) -> 1x1, projection shortcut
    where the shape changes, residual add, ReLU."""

    def __init__(self, cin, cout, width, groups, stride):
        super().__init__()
        self.conv1 = conv_bn(cin, width, 1)
        self.conv2 = conv_bn(width, width, 3, stride, groups=groups)
        self.conv3 = conv_bn(width, cout, 1, act=None)
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else None
        self.relu = nn.ReLU()

    def forward(self, x):
        skip = x if self.down is None else self.down(x)
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + skip)


class ResNeXt(nn.Module):
    """ResNeXt/RegNet-style: four stages of grouped bottlenecks whose group widths are 4, 6, 5
    and 8 channels (multiples of 4 and not)."""

    # out channels, bottleneck width, groups, stride, blocks
    STAGES = ((32, 16, 4, 1, 1), (64, 24, 4, 2, 2), (96, 40, 8, 2, 1), (128, 64, 8, 2, 1))

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 16
        for cout, width, groups, stride, n in self.STAGES:
            for i in range(n):
                blocks.append(ResNeXtBlock(cin, cout, width, groups, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))
