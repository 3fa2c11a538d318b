"""Zoo architectures (see :mod:`relax_vk.zoo`)."""

from __future__ import annotations

import inspect

from ..core.extras import require
from .catalog import ZOO

# the family modules' architectures, found by name (ZooEntry.architecture) like the ones below
from .classic import DenseNet, Inception, ResNeXt  # noqa: F401
from .convnext import ConvNeXt  # noqa: F401
from .layers import ChannelsFirstLayerNorm
from .mobile import EfficientNetB0, MobileNetV3Small, ShuffleNetV2, SqueezeNet  # noqa: F401
from .segmentation import DeepLabASPP  # noqa: F401
from .sequence import CRNN, CRNNGRU  # noqa: F401
from .transformers import MobileViTXXS, SwinTiny  # noqa: F401

torch = require("torch", "torch")
nn = torch.nn


def _conv_bn(cin, cout, k=3, stride=1, groups=1, act="relu"):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act == "relu":
        layers.append(nn.ReLU(inplace=False))
    elif act == "relu6":
        layers.append(nn.ReLU6(inplace=False))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = _conv_bn(cin, cout, 3, stride)
        self.conv2 = _conv_bn(cout, cout, 3, 1, act=None)
        self.down = _conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else None
        self.relu = nn.ReLU()

    def forward(self, x):
        skip = x if self.down is None else self.down(x)
        return self.relu(self.conv2(self.conv1(x)) + skip)


class ResNet18(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
            blocks.append(BasicBlock(cin, cout, stride))
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [_conv_bn(cin, hidden, 1, act="relu6")] if expand != 1 else []
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden, act="relu6"), _conv_bn(hidden, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=10, width=0.5):
        super().__init__()
        c = lambda v: max(8, int(v * width + 4) // 8 * 8)  # noqa: E731
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers, cin = [_conv_bn(3, c(32), 3, 2, act="relu6")], c(32)
        for t, ch, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c(ch), s if i == 0 else 1, t))
                cin = c(ch)
        layers.append(_conv_bn(cin, 1280, 1, act="relu6"))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x):
        x = self.features(x).mean(dim=(2, 3))
        return self.classifier(x)


class EncoderBlock(nn.Module):
    """A pre-norm ViT block. ``fused``: attention through ``F.scaled_dot_product_attention``, as
    timm's ``fused_attn`` does (which ``torch.export`` decomposes into PyTorch's math path: q and k
    scaled by sqrt(scale), the guard for fully masked rows); else written out."""

    def __init__(self, dim, heads, eps=1e-5, fused=False):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=eps), nn.LayerNorm(dim, eps=eps)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads, self.fused = heads, fused

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.fused:
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            y = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class SmallViT(nn.Module):
    def __init__(self, image=64, patch=16, dim=192, depth=4, heads=3, num_classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.blocks(x)).mean(dim=1))


class DeiTTiny(nn.Module):
    """DeiT-Tiny as timm builds it, 4 blocks deep: a class token before the patch tokens (17 tokens
    at 64x64, 197 at 224: not multiples of 4), learned position embeddings, fused attention, the
    head on the class token."""

    def __init__(self, image=64, patch=16, dim=192, depth=4, heads=3, num_classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads, eps=1e-6, fused=True) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class SmallUNet(nn.Module):
    def __init__(self, cin=4, base=16, cout=4):
        super().__init__()
        self.enc1 = nn.Sequential(_conv_bn(cin, base), _conv_bn(base, base))
        self.enc2 = nn.Sequential(_conv_bn(base, 2 * base), _conv_bn(2 * base, 2 * base))
        self.mid = nn.Sequential(_conv_bn(2 * base, 4 * base), _conv_bn(4 * base, 4 * base))
        self.dec2 = nn.Sequential(_conv_bn(6 * base, 2 * base), _conv_bn(2 * base, 2 * base))
        self.dec1 = nn.Sequential(_conv_bn(3 * base, base), _conv_bn(base, base))
        self.out = nn.Conv2d(base, cout, 1)
        self.pool, self.up = nn.MaxPool2d(2), nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up(d2), e1], dim=1))
        return self.out(d1)


class RGBStem(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(3, 16, 3, 2), _conv_bn(16, 32, 3, 1), _conv_bn(32, 32, 3, 2), nn.Conv2d(32, 2, 1))

    def forward(self, x):
        return self.body(x)


def _randomize_batchnorm(model, generator):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=generator) * 0.1)


def _randomize_layernorm(model, generator):
    """LayerNorm affine parameters start at 1 and 0, which would hide a LayerNorm that drops them."""
    for m in model.modules():
        if isinstance(m, (nn.LayerNorm, ChannelsFirstLayerNorm)):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=generator) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)


def build_zoo_model(name: str, seed: int = 0, input_shape=None):
    """``(module in eval mode, example input)`` for zoo model ``name``; weights from ``seed``; the
    example input has the catalogue's shape or ``input_shape`` (e.g. ``(1, 3, 224, 224)``; models
    whose structure depends on the image size, the ViT and Swin, are built for it)."""
    if name not in ZOO:
        raise ValueError(f"unknown zoo model {name!r}; the zoo has: {', '.join(sorted(ZOO))}")
    entry = ZOO[name]
    torch.manual_seed(seed)
    architecture = globals()[entry.architecture]
    # transformers whose position embeddings or window masks depend on the image size take it
    sized = input_shape is not None and "image" in inspect.signature(architecture.__init__).parameters
    model = architecture(image=int(input_shape[-1])) if sized else architecture()
    _randomize_batchnorm(model, torch.Generator().manual_seed(seed + 1))
    _randomize_layernorm(model, torch.Generator().manual_seed(seed + 3))
    model.eval()
    example = torch.randn(*(input_shape or entry.input_shape), generator=torch.Generator().manual_seed(seed + 2))
    return model, example
