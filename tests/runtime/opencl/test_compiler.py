import pytest

from relax_vk.runtime.opencl import OpenCLBuildError, build_program, find_device, kernel_names


def test_kernel_names_dedupes_declarations():
    src = "__kernel void a(__global float* x);\n__kernel void b(int n);\n__kernel void a(__global float* x) {}\n__kernel void b(int n) {}"
    assert kernel_names(src) == ["a", "b"]


def test_a_working_device_with_images_is_found():
    device = find_device()
    assert device.image_support


def test_build_errors_carry_the_log():
    with pytest.raises(OpenCLBuildError) as err:
        build_program("__kernel void broken(__global float* x) { x[0] = undefined_thing; }")
    assert "undefined_thing" in err.value.log


def test_image_kernels_build():
    src = (
        "__kernel void copy(__read_only image2d_array_t a, __write_only image2d_array_t b) {"
        " sampler_t s = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;"
        " int4 p = (int4)(get_global_id(0), get_global_id(1), get_global_id(2), 0);"
        " write_imagef(b, p, read_imagef(a, s, p)); }"
    )
    assert build_program(src) == ["copy"]
