"""WGSL shaders for the program's scope copies (buffer <-> texture, texture -> texture).

A packed tensor's dense bytes are exactly its image's texels in layer/row/column order for all
three mappings (the same fact the OpenCL runtime's copy commands rely on), so a copy is one
thread per texel: texel ``i`` sits at ``(i % W, (i / W) % H, i / (W * H))`` of a ``W x H x L``
image and at floats ``4i .. 4i+3`` of the buffer. Dispatches are 2-D when one dimension would
exceed the device's workgroup-count limit.

(WebGPU's own buffer<->texture copies need 256-byte aligned rows, which a 1-wide image is not;
a shader has no such rule.)
"""

from __future__ import annotations

from typing import Optional, Tuple

WORKGROUP = 64


def _header(src: str, dst: str) -> str:
    decls = {
        "buffer_src": "@group(0) @binding(0) var<storage, read_write> src: array<f32>;",
        "texture_src": "@group(0) @binding(0) var src: texture_2d_array<f32>;",
        "buffer_dst": "@group(0) @binding(1) var<storage, read_write> dst: array<f32>;",
        "texture_dst": "@group(0) @binding(1) var dst: texture_storage_2d_array<rgba32float, write>;",
    }
    return decls[f"{src}_src"] + "\n" + decls[f"{dst}_dst"] + "\n"


def copy_shader(src_image: Optional[Tuple[int, int, int]], dst_image: Optional[Tuple[int, int, int]], floats: int, groups_x: int) -> str:
    """The WGSL of one copy (``*_image`` = ``(W, H, L)`` of a texture side, None for a buffer)."""
    src, dst = ("texture" if src_image else "buffer"), ("texture" if dst_image else "buffer")
    if src == dst == "buffer":
        count, body = floats, "dst[i] = src[i];"
    else:
        count = floats // 4
        if src_image:
            w, h, _ = src_image
            read = f"textureLoad(src, vec2<i32>(i % {w}, (i / {w}) % {h}), i / {w * h}, 0)"
        else:
            read = "vec4<f32>(src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3])"
        if dst_image:
            w, h, _ = dst_image
            body = f"textureStore(dst, vec2<i32>(i % {w}, (i / {w}) % {h}), i / {w * h}, {read});"
        else:
            body = f"let t = {read};\n    dst[4 * i] = t.x; dst[4 * i + 1] = t.y; dst[4 * i + 2] = t.z; dst[4 * i + 3] = t.w;"
    return (
        f"// relax_vk: copy {src} -> {dst}, {count} items\n"
        + _header(src, dst)
        + f"\n@compute @workgroup_size({WORKGROUP}, 1, 1)\n"
        + "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {\n"
        + f"    let i = (i32(wid.y) * {groups_x} + i32(wid.x)) * {WORKGROUP} + i32(lid.x);\n"
        + f"    if (i >= {count}) {{ return; }}\n"
        + f"    {body}\n"
        + "}\n"
    )


def copy_items(src_image, dst_image, floats: int) -> int:
    return floats if not src_image and not dst_image else floats // 4


def copy_grid(items: int, max_groups: int) -> Tuple[int, int]:
    """Workgroups ``(x, y)`` covering ``items`` threads with at most ``max_groups`` per dimension."""
    groups = max(1, -(-items // WORKGROUP))
    if groups <= max_groups:
        return groups, 1
    y = -(-groups // max_groups)
    return -(-groups // y), y
