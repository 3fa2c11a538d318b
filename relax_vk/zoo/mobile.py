"""Mobile model families of the zoo: MobileNetV3-Small, EfficientNet-B0, ShuffleNetV2 and
SqueezeNet 1.1, at reduced width (see :mod:`relax_vk.zoo`)."""

from __future__ import annotations

import math

from .layers import F, conv_bn, make_divisible, nn, torch


class SqueezeExcite(nn.Module):
    """Squeeze-and-excite: global average pool -> 1x1 conv -> activation -> 1x1 conv -> gate,
    multiplied into the input. MobileNetV3: ReLU and a hard-sigmoid gate; EfficientNet: SiLU and
    a sigmoid gate."""

    def __init__(self, channels, squeeze, act="relu", gate="hardsigmoid"):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.act = nn.ReLU() if act == "relu" else nn.SiLU()
        self.gate = F.hardsigmoid if gate == "hardsigmoid" else torch.sigmoid

    def forward(self, x):
        scale = self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))
        return x * scale


# ---------------------------------------------------------------------------------------------
# MobileNetV3-Small


class MobileNetV3Block(nn.Module):
    """Inverted residual: 1x1 expansion (skipped when it would not widen) -> kxk depthwise ->
    optional squeeze-excite -> 1x1 projection; residual add at stride 1 with equal widths."""

    def __init__(self, cin, k, expanded, cout, use_se, act, stride):
        super().__init__()
        layers = []
        if expanded != cin:
            layers.append(conv_bn(cin, expanded, 1, act=act, eps=1e-3))
        layers.append(conv_bn(expanded, expanded, k, stride, groups=expanded, act=act, eps=1e-3))
        if use_se:
            layers.append(SqueezeExcite(expanded, make_divisible(expanded // 4), "relu", "hardsigmoid"))
        layers.append(conv_bn(expanded, cout, 1, act=None, eps=1e-3))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV3Small(nn.Module):
    # kernel, expanded, out, squeeze-excite, activation, stride (the paper's Table 2)
    CONFIG = (
        (3, 16, 16, True, "relu", 2),
        (3, 72, 24, False, "relu", 2),
        (3, 88, 24, False, "relu", 1),
        (5, 96, 40, True, "hardswish", 2),
        (5, 240, 40, True, "hardswish", 1),
        (5, 240, 40, True, "hardswish", 1),
        (5, 120, 48, True, "hardswish", 1),
        (5, 144, 48, True, "hardswish", 1),
        (5, 288, 96, True, "hardswish", 2),
        (5, 576, 96, True, "hardswish", 1),
        (5, 576, 96, True, "hardswish", 1),
    )

    def __init__(self, num_classes=10, width=0.5):
        super().__init__()
        c = lambda v: make_divisible(v * width)  # noqa: E731
        layers, cin = [conv_bn(3, c(16), 3, 2, act="hardswish", eps=1e-3)], c(16)
        for k, expanded, cout, use_se, act, stride in self.CONFIG:
            layers.append(MobileNetV3Block(cin, k, c(expanded), c(cout), use_se, act, stride))
            cin = c(cout)
        last = 6 * cin
        layers.append(conv_bn(cin, last, 1, act="hardswish", eps=1e-3))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        hidden = c(1024)
        self.classifier = nn.Sequential(
            nn.Linear(last, hidden), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(hidden, num_classes)
        )

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# ---------------------------------------------------------------------------------------------
# EfficientNet-B0


class MBConv(nn.Module):
    """EfficientNet's mobile inverted bottleneck: 1x1 expansion (for ratio > 1) -> kxk depthwise
    -> squeeze-excite (squeeze = input channels / 4, SiLU, sigmoid gate) -> 1x1 projection, SiLU
    everywhere; residual add at stride 1 with equal widths (stochastic depth: identity in eval)."""

    def __init__(self, cin, cout, k, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1, act="silu")] if expand != 1 else []
        layers += [
            conv_bn(hidden, hidden, k, stride, groups=hidden, act="silu"),
            SqueezeExcite(hidden, max(1, cin // 4), "silu", "sigmoid"),
            conv_bn(hidden, cout, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class EfficientNetB0(nn.Module):
    # expand ratio, kernel, stride, out channels, repeats (B0's stages)
    STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))

    def __init__(self, num_classes=10, width=0.25, depth=0.5):
        super().__init__()
        c = lambda v: make_divisible(v * width)  # noqa: E731
        layers, cin = [conv_bn(3, c(32), 3, 2, act="silu")], c(32)
        for expand, k, stride, cout, repeats in self.STAGES:
            for i in range(math.ceil(repeats * depth)):
                layers.append(MBConv(cin, c(cout), k, stride if i == 0 else 1, expand))
                cin = c(cout)
        head = c(1280)
        layers.append(conv_bn(cin, head, 1, act="silu"))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(head, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# ---------------------------------------------------------------------------------------------
# ShuffleNetV2


def channel_shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2 unit. Stride 1: split the channels in two, transform one half (1x1 -> 3x3
    depthwise -> 1x1), concat, shuffle. Stride 2: both branches see the whole input (branch 1:
    3x3 depthwise stride 2 -> 1x1; branch 2 as above with a stride-2 depthwise), concat, shuffle."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(conv_bn(cin, cin, 3, stride, groups=cin, act=None), conv_bn(cin, half, 1))
        branch_in = cin if stride > 1 else half
        self.branch2 = nn.Sequential(
            conv_bn(branch_in, half, 1),
            conv_bn(half, half, 3, stride, groups=half, act=None),
            conv_bn(half, half, 1),
        )

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 0.5x widths (24, 48, 96, 192), fewer units per stage (2, 3, 2 instead of
    4, 8, 4) and a 512-wide conv5 (1024 in the paper)."""

    def __init__(self, num_classes=10, widths=(24, 48, 96, 192), repeats=(2, 3, 2), last=512):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, widths[0], 3, 2), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], widths[0]
        for cout, n in zip(widths[1:], repeats):
            units = [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*units))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.conv5 = conv_bn(cin, last, 1)
        self.fc = nn.Linear(last, num_classes)

    def forward(self, x):
        x = self.conv5(self.stages(self.stem(x)))
        return self.fc(x.mean([2, 3]))


# ---------------------------------------------------------------------------------------------
# SqueezeNet 1.1


class Fire(nn.Module):
    """Fire module: 1x1 squeeze -> ReLU, then 1x1 and 3x3 expands (each -> ReLU) concatenated."""

    def __init__(self, cin, squeeze, expand1, expand3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand1, 1)
        self.expand3 = nn.Conv2d(squeeze, expand3, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.squeeze(x))
        return torch.cat([self.relu(self.expand1(x)), self.relu(self.expand3(x))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1 at quarter width; the max pools use ceil_mode=True (the 60x60 input makes
    the second pool round up: 14 -> 7 where floor would give 6)."""

    def __init__(self, num_classes=10):
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2), nn.ReLU(), pool(),
            Fire(16, 4, 16, 16), Fire(32, 4, 16, 16), pool(),
            Fire(32, 8, 32, 32), Fire(64, 8, 32, 32), pool(),
            Fire(64, 12, 48, 48), Fire(96, 12, 48, 48), Fire(96, 16, 64, 64), Fire(128, 16, 64, 64),
        )  # fmt: skip
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(128, num_classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)
