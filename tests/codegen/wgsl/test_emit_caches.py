"""What the WGSL emitter keeps between nodes: the storage of a buffer it has accessed (found again
when the buffer is allocated anew), and the ``enable f16;`` test of the whole source (a half
literal alone enables it; the kernel's name in the first line does not)."""

from tvm import tirx
from tvm.script import tirx as T

from relax_vk.codegen.wgsl import emit_kernel


@T.prim_func(s_tir=True)
def _local_copy_kernel(a_ptr: T.handle("float32", "global")):
    a = T.decl_buffer((4,), data=a_ptr)
    with T.launch_thread("threadIdx.x", 4) as tx:
        t = T.alloc_buffer((1,), "float32", scope="local")
        t[0] = a[tx]
        a[tx] = t[0] * T.float32(2)


def test_a_buffer_allocated_again_is_accessed_in_its_new_storage():
    # the thread block's statements twice: the second AllocBuffer of t declares a new array
    decl, launch = _local_copy_kernel.body.seq
    twice = tirx.SeqStmt(list(launch.body.seq) * 2)
    func = _local_copy_kernel.with_body(tirx.SeqStmt([decl, tirx.AttrStmt(launch.node, launch.attr_key, launch.value, twice)]))
    lines = [line.strip() for line in emit_kernel(func, "twice").source.splitlines()]
    start = lines.index("var t_1: array<f32, 1>;")
    assert lines[start + 1 : start + 3] == ["t_1[0] = a_ptr[tx];", "a_ptr[tx] = (t_1[0] * 2.0f);"]
    assert lines[start - 3 : start] == ["var t: array<f32, 1>;", "t[0] = a_ptr[tx];", "a_ptr[tx] = (t[0] * 2.0f);"]


@T.prim_func(s_tir=True)
def _half_literal_kernel(a_ptr: T.handle("float32", "global")):
    a = T.decl_buffer((4,), data=a_ptr)
    a[0] = T.Cast("float32", T.float16(1.5))


@T.prim_func(s_tir=True)
def _float_kernel(a_ptr: T.handle("float32", "global")):
    a = T.decl_buffer((4,), data=a_ptr)
    a[0] = T.float32(1.5)


def test_f16_is_enabled_by_a_half_literal_and_not_by_the_kernel_name():
    half = emit_kernel(_half_literal_kernel, "k").source
    assert "f32(1.5h)" in half and "f16" not in half.replace("enable f16;", "")
    assert half.splitlines()[1] == "enable f16;"
    assert "enable f16;" not in emit_kernel(_float_kernel, "conv_f16_1h").source
