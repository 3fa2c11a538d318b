"""relax_vk's legalizers: the packed ops TVM cannot legalize itself, and scope-keeping legalization."""

from .conv2d import conv2d_nchw4c_compute, legalize_conv2d_nchw4c
from .elementwise import MISSING_LEGALIZERS
from .layout_transform import legalize_layout_transform
from .scoped import LegalizeWithScopes, ScopeLostError

#: relax_vk's legalizers: ops TVM cannot legalize itself (NCHW4c conv2d, ops without FLegalize)
#: and ops whose upstream legalization is wrong for textures (layout_transform)
LEGALIZE_MAP = {
    "relax.nn.conv2d": legalize_conv2d_nchw4c,
    "relax.layout_transform": legalize_layout_transform,
    **MISSING_LEGALIZERS,
}

__all__ = ["LEGALIZE_MAP", "legalize_layout_transform", "LegalizeWithScopes", "ScopeLostError", "conv2d_nchw4c_compute", "legalize_conv2d_nchw4c"]
