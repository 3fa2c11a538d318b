"""WGSL shaders for the program's scope copies (buffer <-> texture, texture -> texture, buffer -> buffer).

A packed tensor's dense bytes are exactly its image's texels in layer/row/column order for all
three mappings (the same fact the OpenCL runtime's copy commands rely on), so a copy is one
thread per texel: texel ``i`` sits at ``(i % W, (i / W) % H, i / (W * H))`` of a ``W x H x L``
image and at elements ``4i .. 4i+3`` of the buffer. Textures hold float32 (``rgba32float``) or
float16 (``rgba16float``) texels; ``textureLoad`` returns ``vec4<f32>`` for both, so only the
buffer side and the storage format depend on the dtype. Buffer-to-buffer copies move 32-bit words.
Dispatches are 2-D when one dimension would exceed the device's workgroup-count limit.

(WebGPU's own buffer<->texture copies need 256-byte aligned rows, which a 1-wide image is not;
a shader has no such rule.)
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template
from typing import Dict, Optional, Tuple

WORKGROUP = 64
_ELEM = {"float32": "f32", "float16": "f16"}
TEXTURE_FORMATS = {"float32": "rgba32float", "float16": "rgba16float"}  # texel dtype -> WebGPU format


def copy_items(src_image, dst_image, nbytes: int, itemsize: int) -> int:
    """Threads a copy needs: one per texel, or one per 32-bit word between buffers."""
    if not src_image and not dst_image:
        return -(-nbytes // 4)
    return nbytes // (4 * itemsize)


def _fragments(text: str) -> Dict[str, str]:
    """The named fragments of ``copies.wgsl`` (a line ``//! NAME`` starts one)."""
    out: Dict[str, str] = {}
    name = None
    for line in text.splitlines():
        match = re.fullmatch(r"//! (\w+)", line)
        if match:
            name = match.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


#: the WGSL fragments of the copy shaders, shared with the native runtime (which embeds the file)
FRAGMENTS = _fragments((Path(__file__).parent / "copies.wgsl").read_text())


def _fill(name: str, **values) -> str:
    return Template(FRAGMENTS[name]).substitute({k: str(v) for k, v in values.items()})


def copy_shader(
    src_image: Optional[Tuple[int, int, int]],
    dst_image: Optional[Tuple[int, int, int]],
    nbytes: int,
    dtype: str,
    groups_x: int,
    texel: Optional[str] = None,
) -> str:
    """The WGSL of one copy (``*_image`` = ``(W, H, L)`` of a texture side, None for a buffer;
    ``texel``: what a written texture's texels are stored as, when not ``dtype``: a float32
    tensor in half texels), assembled from the fragments of ``copies.wgsl`` (the native runtime's
    ``copy_shader`` assembles the same text the same way)."""
    src, dst = ("texture" if src_image else "buffer"), ("texture" if dst_image else "buffer")
    if dtype not in _ELEM and not (src == dst == "buffer"):
        raise ValueError(f"texture copies of {dtype} tensors are not supported (float32 and float16)")
    elem = _ELEM.get(dtype, "u32")
    count = copy_items(src_image, dst_image, nbytes, 2 if dtype == "float16" else 4)
    parts = [_fill("header", src=src, dst=dst, count=count, dtype=dtype)]
    if src == dst == "buffer":
        parts += [FRAGMENTS["words_src_decl"], FRAGMENTS["words_dst_decl"]]
        body = FRAGMENTS["words_body"]
    else:
        if elem == "f16":
            parts.append(FRAGMENTS["enable_f16"])
        if src_image:
            w, h, _ = src_image
            parts.append(FRAGMENTS["src_texture_decl"])
            read = _fill("src_texture_read", w=w, h=h, wh=w * h)
        else:
            parts.append(_fill("src_buffer_decl", elem=elem))
            read = _fill("src_buffer_read", elem=elem)
        if dst_image:
            w, h, _ = dst_image
            parts.append(_fill("dst_texture_decl", format=TEXTURE_FORMATS[texel or dtype]))
            body = _fill("dst_texture_body", w=w, h=h, wh=w * h, read=read)
        else:
            parts.append(_fill("dst_buffer_decl", elem=elem))
            body = _fill("dst_buffer_body", elem=elem, read=read)
    parts.append(_fill("main", workgroup=WORKGROUP, groups_x=groups_x, count=count, body=body))
    return "\n".join(parts) + "\n"


def copy_bindings(src_image, dst_image, dtype: str, texel: Optional[str] = None) -> list:
    """The binding kinds of a copy shader (as the kernels' ``bindings``)."""
    src = "texture" if src_image else "buffer_read"
    dst = ("storage_texture_f16" if (texel or dtype) == "float16" else "storage_texture") if dst_image else "buffer"
    return [src, dst]


def copy_grid(items: int, max_groups: int) -> Tuple[int, int]:
    """Workgroups ``(x, y)`` covering ``items`` threads with at most ``max_groups`` per dimension."""
    groups = max(1, -(-items // WORKGROUP))
    if groups <= max_groups:
        return groups, 1
    y = -(-groups // max_groups)
    return -(-groups // y), y
