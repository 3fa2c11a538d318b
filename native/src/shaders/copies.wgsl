//! The WGSL fragments of the scope-copy shaders of the Vulkan backend (native/src/vulkan_session.cpp
//! embeds them at build time). A line "//! NAME" starts fragment NAME (up to
//! the next such line; these leading lines are no fragment); ${KEY} is replaced by a value.
//! A shader is: header, [enable_f16,] the source's declaration, the destination's declaration, main
//! (whose ${body} is words_body, or dst_texture_body / dst_buffer_body with ${read} the source's read).
//! header
// relax_vk: copy ${src} -> ${dst}, ${count} items of ${dtype}
//! enable_f16
enable f16;
//! words_src_decl
@group(0) @binding(0) var<storage, read> src: array<u32>;
//! words_dst_decl
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
//! words_body
dst[i] = src[i];
//! src_texture_decl
@group(0) @binding(0) var src: texture_2d_array<f32>;
//! src_texture_read
textureLoad(src, vec2<i32>(${x0} + i % ${w}, ${y0} + (i / ${w}) % ${h}), i / ${wh}, 0)
//! src_buffer_decl
@group(0) @binding(0) var<storage, read> src: array<${elem}>;
//! src_buffer_read
vec4<f32>(vec4<${elem}>(src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]))
//! dst_texture_decl
@group(0) @binding(1) var dst: texture_storage_2d_array<${format}, write>;
//! dst_texture_body
textureStore(dst, vec2<i32>(${x0} + i % ${w}, ${y0} + (i / ${w}) % ${h}), i / ${wh}, ${read});
//! dst_buffer_decl
@group(0) @binding(1) var<storage, read_write> dst: array<${elem}>;
//! dst_buffer_body
let t = vec4<${elem}>(${read});
    dst[4 * i] = t.x; dst[4 * i + 1] = t.y; dst[4 * i + 2] = t.z; dst[4 * i + 3] = t.w;
//! main

@compute @workgroup_size(${workgroup}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (i32(wid.y) * ${groups_x} + i32(wid.x)) * ${workgroup} + i32(lid.x);
    if (i >= ${count}) { return; }
    ${body}
}
