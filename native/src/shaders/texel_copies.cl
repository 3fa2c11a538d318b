// Scope copies that convert texels (a half-texel image on either side): one work item per texel.
// An image side's texels start at (x0, y0) of its image (a placed texture's origin; else 0, 0).
// native/src/opencl_session.cpp embeds it at build time.
__constant sampler_t rvk_nearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

__kernel void rvk_buffer_to_image(__global const float4* src, __write_only image2d_array_t dst, int n, int w, int h, int x0, int y0) {
    int i = get_global_id(0);
    if (i >= n) return;
    write_imagef(dst, (int4)(x0 + i % w, y0 + (i / w) % h, i / (w * h), 0), src[i]);
}

__kernel void rvk_image_to_buffer(__read_only image2d_array_t src, __global float4* dst, int n, int w, int h, int x0, int y0) {
    int i = get_global_id(0);
    if (i >= n) return;
    dst[i] = read_imagef(src, rvk_nearest, (int4)(x0 + i % w, y0 + (i / w) % h, i / (w * h), 0));
}

__kernel void rvk_image_to_image(__read_only image2d_array_t src, __write_only image2d_array_t dst, int n, int sw, int sh, int dw, int dh,
                                 int sx0, int sy0, int dx0, int dy0) {
    int i = get_global_id(0);
    if (i >= n) return;
    float4 t = read_imagef(src, rvk_nearest, (int4)(sx0 + i % sw, sy0 + (i / sw) % sh, i / (sw * sh), 0));
    write_imagef(dst, (int4)(dx0 + i % dw, dy0 + (i / dw) % dh, i / (dw * dh), 0), t);
}
