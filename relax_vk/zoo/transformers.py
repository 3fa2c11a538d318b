"""Vision transformers and hybrids for the zoo (plain ``torch.nn``: torchvision and timm cannot
be imported next to the CPU torch here): a Swin-style windowed-attention model and a
MobileViT-style hybrid of convs and attention, small enough for the CPU test devices but with
their real structure (6-D window partitions, cyclic shifts with attention masks, patch merging;
unfold/fold of image patches into token sequences around a transformer)."""

from __future__ import annotations

from ..core.extras import require
from .layers import conv_bn

torch = require("torch", "torch")
nn = torch.nn


class WindowAttention(nn.Module):
    """Multi-head self-attention inside ``window x window`` windows, with a learned per-head bias
    over the window's token pairs (Swin's relative position bias, stored densely) and an optional
    additive mask (shifted windows)."""

    def __init__(self, dim, heads, window):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.bias = nn.Parameter(torch.randn(heads, window * window, window * window) * 0.02)

    def forward(self, x, mask=None):  # x: [windows, tokens, dim]
        w, n, d = x.shape
        q, k, v = self.qkv(x).reshape(w, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q * self.scale) @ k.transpose(-2, -1) + self.bias
        if mask is not None:  # [windows, tokens, tokens], the same for every image of the batch
            attn = attn + mask.unsqueeze(1)
        return self.proj((attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(w, n, d))


def _window_mask(size: int, window: int, shift: int):
    """Swin's mask for a cyclic shift: tokens from different regions of the rolled image must not
    attend to each other (-100 added to their logits)."""
    region = torch.zeros(1, size, size, 1)
    index = 0
    for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
        for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
            region[:, hs, ws, :] = index
            index += 1
    windows = _partition(region, window).squeeze(-1)  # [windows, tokens]
    diff = windows.unsqueeze(1) - windows.unsqueeze(2)
    return torch.where(diff != 0, torch.tensor(-100.0), torch.tensor(0.0))


def _partition(x, window):
    """[B, H, W, C] -> [B * windows, window * window, C] (Swin's 6-D window partition)."""
    b, h, w, c = x.shape
    x = x.reshape(b, h // window, window, w // window, window, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, window * window, c)


def _merge(windows, window, b, h, w):
    """The inverse of :func:`_partition`."""
    c = windows.shape[-1]
    x = windows.reshape(b, h // window, w // window, window, window, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h, w, c)


class SwinBlock(nn.Module):
    def __init__(self, dim, heads, size, window, shift):
        super().__init__()
        self.size, self.window, self.shift = size, window, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, window)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.register_buffer("mask", _window_mask(size, window, shift) if shift else None, persistent=False)

    def forward(self, x):  # x: [B, H*W, C]
        b, _, c = x.shape
        h = self.norm1(x).reshape(b, self.size, self.size, c)
        if self.shift:
            h = torch.roll(h, shifts=(-self.shift, -self.shift), dims=(1, 2))
        h = _merge(self.attn(_partition(h, self.window), self.mask), self.window, b, self.size, self.size)
        if self.shift:
            h = torch.roll(h, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + h.reshape(b, self.size * self.size, c)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    """2x2 neighbouring tokens concatenated (4C) and projected to 2C: the resolution halves."""

    def __init__(self, dim, size):
        super().__init__()
        self.size = size
        self.norm, self.reduce = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        b, _, c = x.shape
        x = x.reshape(b, self.size, self.size, c)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return self.reduce(self.norm(x.reshape(b, (self.size // 2) ** 2, 4 * c)))


class SwinTiny(nn.Module):
    """Swin-style: 4x4 patch embedding (64x64 -> 16x16 tokens, dim 32), two stages of a regular and
    a shifted 4x4-window block (2 and 4 heads, dims 32 and 64), patch merging between them,
    LayerNorm, mean over tokens, Linear head."""

    def __init__(self, image=64, dim=32, window=4, heads=(2, 4), num_classes=10):
        super().__init__()
        size = image // 4
        self.embed, self.embed_norm = nn.Conv2d(3, dim, 4, 4), nn.LayerNorm(dim)
        self.stage1 = nn.Sequential(SwinBlock(dim, heads[0], size, window, 0), SwinBlock(dim, heads[0], size, window, window // 2))
        self.merge = PatchMerging(dim, size)
        self.stage2 = nn.Sequential(SwinBlock(2 * dim, heads[1], size // 2, window, 0),
                                    SwinBlock(2 * dim, heads[1], size // 2, window, window // 2))  # fmt: skip
        self.norm, self.head = nn.LayerNorm(2 * dim), nn.Linear(2 * dim, num_classes)

    def forward(self, x):
        x = self.embed_norm(self.embed(x).flatten(2).transpose(1, 2))
        x = self.stage2(self.merge(self.stage1(x)))
        return self.head(self.norm(x).mean(dim=1))


class TransformerLayer(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class MobileViTBlock(nn.Module):
    """MobileViT: local 3x3 conv and 1x1 projection, the feature map unfolded into 2x2 patches
    (each of the 4 pixel positions a token sequence), transformer layers over them, folded back,
    projected, concatenated with the input and fused by a 3x3 conv."""

    def __init__(self, channels, dim, depth, heads=2, patch=2):
        super().__init__()
        self.patch = patch
        self.local = nn.Sequential(conv_bn(channels, channels, 3, act="silu"), nn.Conv2d(channels, dim, 1, bias=False))
        self.transformer = nn.Sequential(*[TransformerLayer(dim, heads, 2 * dim) for _ in range(depth)], nn.LayerNorm(dim))
        self.project = conv_bn(dim, channels, 1, act="silu")
        self.fuse = conv_bn(2 * channels, channels, 3, act="silu")

    def forward(self, x):
        b, _, h, w = x.shape
        p = self.patch
        y = self.local(x)
        d = y.shape[1]
        # unfold: [B, d, H, W] -> [B * p * p, (H/p) * (W/p), d]
        y = y.reshape(b, d, h // p, p, w // p, p).permute(0, 3, 5, 2, 4, 1).reshape(b * p * p, (h // p) * (w // p), d)
        y = self.transformer(y)
        y = y.reshape(b, p, p, h // p, w // p, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)  # fold
        return self.fuse(torch.cat([x, self.project(y)], dim=1))


class MV2(nn.Module):
    """MobileNetV2's inverted residual with SiLU (MobileViT's convolution blocks)."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.block = nn.Sequential(conv_bn(cin, hidden, 1, act="silu"), conv_bn(hidden, hidden, 3, stride, groups=hidden, act="silu"),
                                   conv_bn(hidden, cout, 1, act=None))  # fmt: skip
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileViTXXS(nn.Module):
    """MobileViT-XXS-style hybrid at quarter scale: conv stem, MobileNetV2 blocks (SiLU), two
    MobileViT blocks (dims 32 and 48) at 16x16 and 8x8, 1x1 conv, global pool, Linear head."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act="silu")
        self.stage1 = nn.Sequential(MV2(16, 16, 1, 2), MV2(16, 24, 2, 2))
        self.stage2 = nn.Sequential(MV2(24, 32, 2, 2), MobileViTBlock(32, 32, 1))
        self.stage3 = nn.Sequential(MV2(32, 48, 2, 2), MobileViTBlock(48, 48, 2))
        self.head = nn.Sequential(conv_bn(48, 96, 1, act="silu"))
        self.classifier = nn.Linear(96, num_classes)

    def forward(self, x):
        x = self.head(self.stage3(self.stage2(self.stage1(self.stem(x)))))
        return self.classifier(x.mean(dim=(2, 3)))
