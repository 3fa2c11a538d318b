// Scope copies that convert texels (a half-texel image on either side): one work item per texel.
// native/src/opencl_session.cpp embeds it at build time.
__constant sampler_t rvk_nearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

__kernel void rvk_buffer_to_image(__global const float4* src, __write_only image2d_array_t dst, int n, int w, int h) {
    int i = get_global_id(0);
    if (i >= n) return;
    write_imagef(dst, (int4)(i % w, (i / w) % h, i / (w * h), 0), src[i]);
}

__kernel void rvk_image_to_buffer(__read_only image2d_array_t src, __global float4* dst, int n, int w, int h) {
    int i = get_global_id(0);
    if (i >= n) return;
    dst[i] = read_imagef(src, rvk_nearest, (int4)(i % w, (i / w) % h, i / (w * h), 0));
}

__kernel void rvk_image_to_image(__read_only image2d_array_t src, __write_only image2d_array_t dst, int n, int sw, int sh, int dw, int dh) {
    int i = get_global_id(0);
    if (i >= n) return;
    float4 t = read_imagef(src, rvk_nearest, (int4)(i % sw, (i / sw) % sh, i / (sw * sh), 0));
    write_imagef(dst, (int4)(i % dw, (i / dw) % dh, i / (dw * dh), 0), t);
}
