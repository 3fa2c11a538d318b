"""Options of the scope passes, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

PREFER = ("auto", "texture", "buffer")
PRECISIONS = ("fp32", "fp16")
ARITHMETIC = ("fp32", "fp16")
WINOGRAD = ("auto", "off", "f23", "f43")


@dataclass(frozen=True)
class ScopeOptions:
    """Knobs of scope assignment.

    prefer: which memory kind activations and weights go to.
        ``"texture"``: the RFC's consumer-priority rule (textures wherever every consumer takes
        them); ``"buffer"``: every tensor in a buffer; ``"auto"`` (the default): measured cost
        when the tuning database has the target's device and every conv of the model in both
        kinds (:mod:`relax_vk.passes.scope.choose_memory_kind`), else the RFC's rule.
    textures: when False every tensor stays in a buffer (the same as ``prefer="buffer"``).
    weights_in_texture: when False conv2d weights stay in buffers (what upstream TVM does
        today); the RFC puts them in ``global.texture-weight``.
    precision: ``"fp16"`` stores every texture (activations and weights) as half texels
        (``CL_HALF_FLOAT`` images, ``rgba16float`` textures), half the bytes, while kernels
        compute in float32 (image reads and writes convert, on every device, with no
        extension); ``"fp32"`` (the default) stores float32 texels. Buffers stay float32.
    arithmetic: ``"fp16"``: kernels compute in half (:mod:`relax_vk.passes.lower.half_arithmetic`;
        the device needs Vulkan's ``shader-f16`` or OpenCL's ``cl_khr_fp16``), accumulating in
        ``accumulate`` (``"fp32"``, the default, or ``"fp16"``); ``"fp32"`` (the default): float32
        arithmetic. Independent of ``precision`` (``--fp16-arith`` sets both).
    fp32_ops: kernels that stay float32 under ``arithmetic="fp16"``: model op names (ONNX node
        names, PyTorch module paths), kernel names or the tensors kernels write, ``fnmatch``
        patterns allowed (``"*softmax*"``). Kernels whose values overflow float16 on a
        calibration run are added by :func:`relax_vk.build`.
    winograd: the algorithm of 3x3 stride-1 convs (one group, no dilation;
        :mod:`relax_vk.passes.scope.choose_conv_algorithm`). ``"auto"`` (the default): the tuning
        database's record for the conv where the target's device has one, else direct;
        ``"f23"`` / ``"f43"``: Winograd F(2,3) / F(4,3) for every such conv; ``"off"``: direct.
    """

    textures: bool = True
    weights_in_texture: bool = True
    prefer: str = "auto"
    precision: str = "fp32"
    arithmetic: str = "fp32"
    accumulate: str = "fp32"
    fp32_ops: Tuple[str, ...] = ()
    winograd: str = "auto"

    def __post_init__(self):
        if self.prefer not in PREFER:
            raise ValueError(f"ScopeOptions(prefer={self.prefer!r}): expected one of {', '.join(PREFER)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"ScopeOptions(precision={self.precision!r}): expected one of {', '.join(PRECISIONS)}")
        for name in ("arithmetic", "accumulate"):
            if getattr(self, name) not in ARITHMETIC:
                raise ValueError(f"ScopeOptions({name}={getattr(self, name)!r}): expected one of {', '.join(ARITHMETIC)}")
        if isinstance(self.fp32_ops, str):  # one name, not its characters
            object.__setattr__(self, "fp32_ops", (self.fp32_ops,))
        object.__setattr__(self, "fp32_ops", tuple(str(x) for x in self.fp32_ops))
        if self.winograd not in WINOGRAD:
            raise ValueError(f"ScopeOptions(winograd={self.winograd!r}): expected one of {', '.join(WINOGRAD)}")

    @property
    def texel_dtype(self) -> str:
        """The dtype texture texels are stored in."""
        return "float16" if self.precision == "fp16" else "float32"
