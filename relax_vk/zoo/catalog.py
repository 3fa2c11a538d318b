"""The zoo's catalogue: names, input shapes and notes (plain data, importable without torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: the ``torch.nn`` class that builds it (in :mod:`relax_vk.zoo.models`), its
    example input shape and a one-line note."""

    architecture: str
    input_shape: Tuple[int, ...]
    note: str


ZOO: Dict[str, ZooEntry] = {
    "resnet18": ZooEntry("ResNet18", (1, 3, 64, 64), "ResNet-18, 10 classes, input 64x64 (224 in the paper)"),
    "mobilenet_v2": ZooEntry("MobileNetV2", (1, 3, 64, 64), "MobileNetV2 width 0.5, depthwise convs, ReLU6, input 64x64"),
    "vit_small": ZooEntry("SmallViT", (1, 3, 64, 64), "ViT: 16x16 patch conv, 4 blocks, dim 192, 3 heads, input 64x64 (16 tokens)"),
    "unet_small": ZooEntry("SmallUNet", (1, 4, 64, 64), "UNet: two down/up levels, concat skips, nearest upsampling, input 64x64"),
    "rgb_stem": ZooEntry("RGBStem", (1, 3, 64, 64), "3-channel stem conv, then convs, 2-channel head, input 64x64"),
}
