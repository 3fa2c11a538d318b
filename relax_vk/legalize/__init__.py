"""relax_vk's legalizers: the packed ops TVM cannot legalize itself, and scope-keeping legalization."""

from .conv2d import conv2d_nchw4c_compute, legalize_conv2d_nchw4c
from .elementwise import MISSING_LEGALIZERS
from .scoped import LegalizeWithScopes, ScopeLostError

#: legalizers for the ops TVM cannot legalize itself (NCHW4c conv2d, ops without FLegalize)
LEGALIZE_MAP = {"relax.nn.conv2d": legalize_conv2d_nchw4c, **MISSING_LEGALIZERS}

__all__ = ["LEGALIZE_MAP", "LegalizeWithScopes", "ScopeLostError", "conv2d_nchw4c_compute", "legalize_conv2d_nchw4c"]
