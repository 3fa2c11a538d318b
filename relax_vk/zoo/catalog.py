"""The zoo's catalogue: names, input shapes and notes (plain data, importable without torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model: the ``torch.nn`` class that builds it (defined in :mod:`relax_vk.zoo.models`
    or a family module beside it, and importable from :mod:`relax_vk.zoo.models`), its example
    input shape and a one-line note."""

    architecture: str
    input_shape: Tuple[int, ...]
    note: str


ZOO: Dict[str, ZooEntry] = {
    "resnet18": ZooEntry("ResNet18", (1, 3, 64, 64), "ResNet-18, 10 classes, input 64x64 (224 in the paper)"),
    "mobilenet_v2": ZooEntry("MobileNetV2", (1, 3, 64, 64), "MobileNetV2 width 0.5, depthwise convs, ReLU6, input 64x64"),
    "vit_small": ZooEntry("SmallViT", (1, 3, 64, 64), "ViT: 16x16 patch conv, 4 blocks, dim 192, 3 heads, input 64x64 (16 tokens)"),
    "deit_tiny": ZooEntry("DeiTTiny", (1, 3, 64, 64), "DeiT-Tiny as timm builds it, 4 blocks: class token (17 tokens; 197 at 224), F.scaled_dot_product_attention, head on the class token"),
    "unet_small": ZooEntry("SmallUNet", (1, 4, 64, 64), "UNet: two down/up levels, concat skips, nearest upsampling, input 64x64"),
    "rgb_stem": ZooEntry("RGBStem", (1, 3, 64, 64), "3-channel stem conv, then convs, 2-channel head, input 64x64"),
    "mobilenet_v3": ZooEntry("MobileNetV3Small", (1, 3, 64, 64), "MobileNetV3-Small width 0.5: SE with hard-sigmoid gate, hardswish, 3x3/5x5 depthwise, input 64x64"),
    "efficientnet": ZooEntry("EfficientNetB0", (1, 3, 64, 64), "EfficientNet-B0 width 0.25, depth 0.5: MBConv, SE (SiLU, sigmoid gate), SiLU, input 64x64"),
    "densenet": ZooEntry("DenseNet", (1, 3, 64, 64), "DenseNet-BC growth 12, blocks 4-4-4: concatenated features, 1x1 conv + avg pool transitions, input 64x64"),
    "inception": ZooEntry("Inception", (1, 3, 64, 64), "Inception-v3 style quarter width: parallel branches, 1x7/7x1 convs, avg/max pool branches, input 64x64"),
    "shufflenet_v2": ZooEntry("ShuffleNetV2", (1, 3, 64, 64), "ShuffleNetV2 0.5x, units 2-3-2: channel split, depthwise, channel shuffle (5-D transpose), input 64x64"),
    "squeezenet": ZooEntry("SqueezeNet", (1, 3, 60, 60), "SqueezeNet 1.1 quarter width: fire modules, ceil-mode max pools (60x60 makes one round up), conv classifier"),
    "resnext": ZooEntry("ResNeXt", (1, 3, 64, 64), "ResNeXt/RegNet-style bottlenecks, grouped 3x3 with group widths 4, 6, 5, 8, input 64x64"),
    "convnext": ZooEntry("ConvNeXt", (1, 3, 64, 64), "ConvNeXt dims 16-64, depths 1-1-2-1: 7x7 depthwise, NHWC LayerNorm + Linear + GELU, layer scale, input 64x64"),
    "swin_tiny": ZooEntry("SwinTiny", (1, 3, 64, 64), "Swin-style: 4x4 patches, 4x4 windows (6-D partition), shifted windows (roll + mask), patch merging, dims 32-64, input 64x64"),
    "mobilevit": ZooEntry("MobileViTXXS", (1, 3, 64, 64), "MobileViT-style hybrid: MV2 blocks (SiLU), 2x2 patch unfold/fold around transformer layers, dims 32/48, input 64x64"),
    "deeplab_aspp": ZooEntry("DeepLabASPP", (1, 3, 64, 64), "DeepLabV3-style: conv backbone, ASPP (dilations 2/4/6, image pooling), bilinear upsample, 5 classes, input 64x64"),
    "crnn": ZooEntry("CRNN", (1, 3, 32, 128), "CRNN text recognizer: conv/BN/ReLU/max-pool backbone to height 1, 2-layer BiLSTM (48) along the width, CTC head (37), input 32x128"),
    "crnn_gru": ZooEntry("CRNNGRU", (1, 3, 32, 128), "the CRNN with a 2-layer bidirectional GRU (48) in place of the LSTM, input 32x128"),
}
