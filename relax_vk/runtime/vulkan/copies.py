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

from typing import Optional, Tuple

WORKGROUP = 64
_ELEM = {"float32": "f32", "float16": "f16"}
TEXTURE_FORMATS = {"float32": "rgba32float", "float16": "rgba16float"}  # texel dtype -> WebGPU format


def copy_items(src_image, dst_image, nbytes: int, itemsize: int) -> int:
    """Threads a copy needs: one per texel, or one per 32-bit word between buffers."""
    if not src_image and not dst_image:
        return -(-nbytes // 4)
    return nbytes // (4 * itemsize)


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
    tensor in half texels)."""
    src, dst = ("texture" if src_image else "buffer"), ("texture" if dst_image else "buffer")
    if dtype not in _ELEM and not (src == dst == "buffer"):
        raise ValueError(f"texture copies of {dtype} tensors are not supported (float32 and float16)")
    elem = _ELEM.get(dtype, "u32")
    count = copy_items(src_image, dst_image, nbytes, 2 if dtype == "float16" else 4)
    decls = []
    if src == dst == "buffer":
        decls = ["@group(0) @binding(0) var<storage, read> src: array<u32>;", "@group(0) @binding(1) var<storage, read_write> dst: array<u32>;"]
        body = "dst[i] = src[i];"
    else:
        if src_image:
            w, h, _ = src_image
            decls.append("@group(0) @binding(0) var src: texture_2d_array<f32>;")
            read = f"textureLoad(src, vec2<i32>(i % {w}, (i / {w}) % {h}), i / {w * h}, 0)"
        else:
            decls.append(f"@group(0) @binding(0) var<storage, read> src: array<{elem}>;")
            read = f"vec4<f32>(vec4<{elem}>(src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]))"
        if dst_image:
            w, h, _ = dst_image
            decls.append(f"@group(0) @binding(1) var dst: texture_storage_2d_array<{TEXTURE_FORMATS[texel or dtype]}, write>;")
            body = f"textureStore(dst, vec2<i32>(i % {w}, (i / {w}) % {h}), i / {w * h}, {read});"
        else:
            decls.append(f"@group(0) @binding(1) var<storage, read_write> dst: array<{elem}>;")
            body = f"let t = vec4<{elem}>({read});\n    dst[4 * i] = t.x; dst[4 * i + 1] = t.y; dst[4 * i + 2] = t.z; dst[4 * i + 3] = t.w;"
    enable = ["enable f16;"] if elem == "f16" and not (src == dst == "buffer") else []
    return "\n".join(
        [f"// relax_vk: copy {src} -> {dst}, {count} items of {dtype}", *enable, *decls, "",
         f"@compute @workgroup_size({WORKGROUP}, 1, 1)",
         "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {",
         f"    let i = (i32(wid.y) * {groups_x} + i32(wid.x)) * {WORKGROUP} + i32(lid.x);",
         f"    if (i >= {count}) {{ return; }}",
         f"    {body}",
         "}", ""]
    )  # fmt: skip


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
