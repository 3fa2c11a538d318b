"""relax_vk: texture memory scoping for TVM Relax on OpenCL and Vulkan GPUs.

Public API (kept small; see README):

* targets: :func:`relax_vk.target.opencl`, :func:`relax_vk.target.vulkan`
* pipelines: :func:`scope_pipeline` (memory scopes), :func:`get_pipeline` (complete, for
  ``tvm.compile``), :func:`build` / :func:`export` (compile, write a ``.rvk`` artifact); the
  individual passes in :mod:`relax_vk.passes`
* TVM's runtime: :func:`compile` (a ``tvm.runtime.Executable``), :func:`load_vm` (a Relax VM with
  the right devices); :mod:`relax_vk.tvm_runtime` exports libraries
* the registry: :func:`register_op`, :func:`default_registry`, the sets ``ANY_SCOPE``,
  ``BUFFER_ONLY``, ``TEXTURE_ONLY``
* the memory plan: :func:`plan`
* tools: :func:`profile` (time per op of the model on a device), :func:`bisect` (the first op the
  device gets wrong)
* the runtime: :mod:`relax_vk.runtime` (the native library bound from Python; needs numpy only, not TVM)

The compiler API is imported lazily, so ``relax_vk.runtime`` works on a machine without TVM.
The installed tvm-ffi is checked at import when TVM is installed.
"""

import importlib
import importlib.util

from .core.compat import check_ffi_if_installed as _check_ffi

_check_ffi()

__version__ = "0.1.0"

_API = {
    "get_pipeline": "pipeline",
    "scope_pipeline": "pipeline",
    "layout_stage": "pipeline",
    "scope_stage": "pipeline",
    "lowering_stage": "pipeline",
    "finalize_stage": "pipeline",
    "build": "compiler",
    "export": "compiler",
    "CompiledModule": "compiler",
    "compile": "tvm_runtime",
    "load_vm": "tvm_runtime",
    "UnsupportedTargetError": "compiler",
    "plan": "analysis.memory_plan",
    "profile": "tools.profile",
    "Profile": "tools.profile",
    "bisect": "tools.bisect",
    "Bisection": "tools.bisect",
    "MemoryPlan": "analysis.memory_plan",
    "ScopeOptions": "core.options",
    "register_op": "core.registry",
    "default_registry": "core.registry",
    "rfc_registry": "core.registry",
    "OpRegistration": "core.registry",
    "OpRegistry": "core.registry",
    "TensorRepSet": "core.representation",
    "ANY_SCOPE": "core.representation",
    "BUFFER_ONLY": "core.representation",
    "TEXTURE_ONLY": "core.representation",
    "MemoryScope": "core.scope",
    "GLOBAL": "core.scope",
    "TEXTURE": "core.scope",
    "TEXTURE_NHWC": "core.scope",
    "TEXTURE_WEIGHT": "core.scope",
    "TextureLimits": "core.scope",
    "TextureLimitError": "core.scope",
    "Role": "core.scope_rule",
}

#: public names that are modules living deeper in the tree (``relax_vk.target.opencl()``)
_MODULES = {"target": "core.target"}

__all__ = sorted(_API) + ["target", "passes", "runtime", "frontends"]


def __getattr__(name):
    if name in _API:
        try:
            module = importlib.import_module(f".{_API[name]}", __name__)
        except ImportError as err:
            if "tvm" not in f"{getattr(err, 'name', '')} {err}".lower():
                raise
            raise ImportError(
                f"relax_vk.{name} needs TVM ({err}); install it with "
                "pip install 'apache-tvm==0.27.0.post1' 'apache-tvm-ffi==0.1.14.post1' "
                "(relax_vk.runtime runs .rvk artifacts without it)"
            ) from err
        value = getattr(module, name)
        globals()[name] = value
        return value
    if name in _MODULES:
        value = importlib.import_module(f".{_MODULES[name]}", __name__)
        globals()[name] = value
        return value
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'relax_vk' has no attribute {name!r}")
