"""OpenCL kernels for scope copies that convert texels (a half-texel image on either side).

The OpenCL runtime copies between buffers and float32 images with the API's own copy commands:
a packed tensor's dense bytes are exactly its image's texels in layer/row/column order. Those
commands move bytes, so a copy into or out of a ``CL_HALF_FLOAT`` image (textures stored as half
texels, ``ScopeOptions(precision="fp16")``) is a kernel instead: one work item per texel, texel
``i`` at ``(i % W, (i / W) % H, i / (W * H))`` of the image and at ``float4`` ``i`` of the buffer,
``read_imagef``/``write_imagef`` converting (core OpenCL: no ``cl_khr_fp16`` needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

SOURCE = (Path(__file__).parent / "texel_copies.cl").read_text()  # shared with the native runtime

GROUP = 64


class TexelCopies:
    """The conversion kernels of one context, built when first needed."""

    def __init__(self, cl, context):
        self.cl, self.context = cl, context
        self._program = None

    def _kernel(self, name: str):
        if self._program is None:
            self._program = self.cl.Program(self.context, SOURCE).build()
        return getattr(self._program, name)

    def enqueue(self, queue, src, dst, src_image: Optional[Tuple[int, int, int]], dst_image: Optional[Tuple[int, int, int]], texels: int):
        """Copy ``texels`` texels from ``src`` to ``dst`` (``*_image``: extents of an image side,
        None for a buffer of float32); returns the event."""
        import numpy as np

        n = np.int32(texels)
        if src_image and dst_image:
            kernel = self._kernel("rvk_image_to_image")
            kernel.set_args(src, dst, n, np.int32(src_image[0]), np.int32(src_image[1]), np.int32(dst_image[0]), np.int32(dst_image[1]))
        elif dst_image:
            kernel = self._kernel("rvk_buffer_to_image")
            kernel.set_args(src, dst, n, np.int32(dst_image[0]), np.int32(dst_image[1]))
        elif src_image:
            kernel = self._kernel("rvk_image_to_buffer")
            kernel.set_args(src, dst, n, np.int32(src_image[0]), np.int32(src_image[1]))
        else:
            raise ValueError("a buffer-to-buffer copy converts nothing")
        return self.cl.enqueue_nd_range_kernel(queue, kernel, (-(-texels // GROUP) * GROUP,), (GROUP,))
