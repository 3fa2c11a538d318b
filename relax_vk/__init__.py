"""relax_vk: texture memory scoping for TVM Relax on OpenCL and Vulkan GPUs.

Public API (kept small; see README):

* targets: :func:`relax_vk.target.opencl`, :func:`relax_vk.target.vulkan`
* pipelines: :func:`scope_pipeline` (memory scopes), :func:`get_pipeline` (complete, for
  ``tvm.compile``), :func:`build`; the individual passes in :mod:`relax_vk.passes`
* the registry: :func:`register_op`, :func:`default_registry`, the sets ``ANY_SCOPE``,
  ``BUFFER_ONLY``, ``TEXTURE_ONLY``
* the memory plan: :func:`plan`
"""

from ._compat import check_toolchain as _check_toolchain

_check_toolchain()

from . import target  # noqa: E402
from .options import ScopeOptions  # noqa: E402
from . import tir_pipeline  # noqa: E402,F401  (registers the "relax_vk.texture" TIR pipeline)
from .pipeline import get_pipeline, layout_stage, lowering_stage, scope_pipeline, scope_stage  # noqa: E402
from .build import CompiledModule, UnsupportedTargetError, build  # noqa: E402
from .plan import MemoryPlan, plan  # noqa: E402
from .registry import OpRegistration, OpRegistry, default_registry, register_op  # noqa: E402
from .representation import ANY_SCOPE, BUFFER_ONLY, TEXTURE_ONLY, TensorRepSet  # noqa: E402
from .scope import GLOBAL, TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT, MemoryScope, TextureLimitError, TextureLimits  # noqa: E402
from .scope_rule import Role  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "target",
    "get_pipeline",
    "scope_pipeline",
    "lowering_stage",
    "layout_stage",
    "scope_stage",
    "ScopeOptions",
    "plan",
    "build",
    "CompiledModule",
    "UnsupportedTargetError",
    "MemoryPlan",
    "register_op",
    "default_registry",
    "OpRegistration",
    "OpRegistry",
    "TensorRepSet",
    "ANY_SCOPE",
    "BUFFER_ONLY",
    "TEXTURE_ONLY",
    "MemoryScope",
    "GLOBAL",
    "TEXTURE",
    "TEXTURE_NHWC",
    "TEXTURE_WEIGHT",
    "TextureLimits",
    "TextureLimitError",
    "Role",
]
