"""Building blocks shared by the zoo's model families (see :mod:`relax_vk.zoo`)."""

from __future__ import annotations

from ..core.extras import require

torch = require("torch", "torch")
nn = torch.nn
F = torch.nn.functional

_ACTIVATIONS = {
    "relu": nn.ReLU,
    "relu6": nn.ReLU6,
    "hardswish": nn.Hardswish,
    "silu": nn.SiLU,
    "gelu": nn.GELU,
}


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a scaled channel count to a multiple of ``divisor``, never below 90% of ``value``
    (the rule MobileNet and EfficientNet use for their width multipliers)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn(cin, cout, k=3, stride=1, groups=1, act="relu", padding=None, dilation=1, eps=1e-5):
    """Conv (no bias) -> BatchNorm -> activation (``None``: none). ``k`` may be a pair; the default
    padding keeps the size at stride 1 ("same" for odd kernels, also when dilated)."""
    kh, kw = (k, k) if isinstance(k, int) else k
    if padding is None:
        padding = (dilation * (kh - 1) // 2, dilation * (kw - 1) // 2)
    layers = [
        nn.Conv2d(cin, cout, (kh, kw), stride, padding, dilation=dilation, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=eps),
    ]
    if act is not None:
        layers.append(_ACTIVATIONS[act]())
    return nn.Sequential(*layers)


class ChannelsFirstLayerNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor, written out with mean/var over dim 1 (as
    ConvNeXt does for its stem and downsampling layers)."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]
