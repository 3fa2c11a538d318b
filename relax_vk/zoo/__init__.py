"""The model zoo: plain ``torch.nn`` networks with random weights from fixed seeds (torchvision has
no CPU build here, so the architectures are written out). Input sizes are reduced to keep the test
suite fast on a CPU OpenCL device; :data:`ZOO` says which.

Besides ResNet-18, MobileNetV2, a ViT, a UNet and an RGB stem (``models``), the families' modules
write out the building blocks of real mobile models at reduced width: ``mobile`` (MobileNetV3-Small,
EfficientNet-B0, ShuffleNetV2, SqueezeNet), ``classic`` (DenseNet-BC, Inception, ResNeXt),
``convnext``, ``segmentation`` (DeepLab with an ASPP head) and ``sequence`` (CRNN text
recognizers: BiLSTM or BiGRU along the width); ``layers`` holds what they share.
BatchNorm statistics and LayerNorm affine parameters are drawn from the seed too, so a broken
normalisation cannot hide behind identity parameters.

The catalogue (:data:`ZOO`) is plain data; building a model needs the ``torch`` extra:
``pip install 'relax_vk[torch]'``.
"""

from .catalog import ZOO, ZooEntry


def build_zoo_model(name: str, seed: int = 0, input_shape=None):
    """``(module in eval mode, example input)`` for zoo model ``name``; weights from ``seed``; the
    example input has the catalogue's shape or ``input_shape`` (e.g. ``(1, 3, 224, 224)``)."""
    from .models import build_zoo_model as build

    return build(name, seed, input_shape)


__all__ = ["ZOO", "ZooEntry", "build_zoo_model"]
