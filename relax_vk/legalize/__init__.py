"""relax_vk's legalizers: ``LegalizeOps`` entries for the packed ops TVM cannot legalize itself."""

from .conv2d import conv2d_nchw4c_compute, legalize_conv2d_nchw4c

LEGALIZE_MAP = {"relax.nn.conv2d": legalize_conv2d_nchw4c}

__all__ = ["LEGALIZE_MAP", "conv2d_nchw4c_compute", "legalize_conv2d_nchw4c"]
