"""relax_vk's legalizers (op -> TE compute -> ``call_tir``): the packed ops TVM cannot legalize
itself (NCHW4c conv2d for any ``groups``, ``ewise_fma``), the layout transform whose upstream
legalization is wrong for textures, the degenerate resizes upstream divides by zero on, RMS
norms over every axis (upstream mis-indexes them), group and instance norms with the variance in two
passes (upstream's one pass cancels at a large mean), reshapes of run-time dims (upstream's cannot
fuse), broadcasts of a run-time size that is 1 only at run time (upstream's read past it),
integer clips with an open bound (upstream's cast of the infinity crashes), cumulative sums and products, top-k and sorts, ``full``/``ones``/``zeros`` of run-time size (upstream's crash), and adaptive average pools of a run-time size refused by name
(upstream lowers them only outside the pipeline), and the scatters (upstream's serial
kernels fit no GPU schedule). The pass that applies them while keeping every decided scope is
:class:`relax_vk.passes.LegalizeWithScopes`."""

from .adaptive_pool import legalize_adaptive_avg_pool2d
from .broadcast import legalize_broadcast_to
from .clip import legalize_clip
from .conv2d import conv2d_nchw4c_compute, legalize_conv2d_nchw4c
from .create import CREATE_LEGALIZERS
from .elementwise import MISSING_LEGALIZERS
from .layout_transform import legalize_layout_transform
from .norms import legalize_group_norm, legalize_instance_norm
from .resize import legalize_resize2d
from .reshape import legalize_reshape
from .rms_norm import legalize_rms_norm
from .scan import legalize_cumprod, legalize_cumsum
from .scatter import legalize_scatter_elements, legalize_scatter_nd
from .sort import legalize_argsort, legalize_sort, legalize_topk

#: relax_vk's legalizers: ops TVM cannot legalize itself (NCHW4c conv2d, ops without FLegalize: cumsum/cumprod, topk/sort/argsort)
#: and ops whose upstream legalization is wrong (layout_transform for textures, degenerate resizes, rms_norm over every axis,
#: group_norm / instance_norm's one-pass variance)
#: or cannot fuse (reshapes of run-time dims)
LEGALIZE_MAP = {
    "relax.nn.conv2d": legalize_conv2d_nchw4c,
    "relax.layout_transform": legalize_layout_transform,
    "relax.image.resize2d": legalize_resize2d,
    "relax.nn.rms_norm": legalize_rms_norm,
    "relax.nn.group_norm": legalize_group_norm,
    "relax.nn.instance_norm": legalize_instance_norm,
    "relax.nn.adaptive_avg_pool2d": legalize_adaptive_avg_pool2d,
    "relax.reshape": legalize_reshape,
    "relax.broadcast_to": legalize_broadcast_to,
    "relax.clip": legalize_clip,
    "relax.cumsum": legalize_cumsum,
    "relax.cumprod": legalize_cumprod,
    "relax.topk": legalize_topk,
    "relax.sort": legalize_sort,
    "relax.argsort": legalize_argsort,
    "relax.scatter_elements": legalize_scatter_elements,
    "relax.scatter_nd": legalize_scatter_nd,
    **MISSING_LEGALIZERS,
    **CREATE_LEGALIZERS,
}

__all__ = ["LEGALIZE_MAP", "legalize_layout_transform", "legalize_resize2d", "legalize_rms_norm", "legalize_cumsum", "legalize_cumprod", "legalize_topk", "legalize_sort", "legalize_argsort", "conv2d_nchw4c_compute", "legalize_conv2d_nchw4c"]
