"""The copy shaders' WGSL comes from one fragments file (copies.wgsl) that the native runtime embeds
too: every fragment the assembly names exists, every placeholder is filled, and the shader of each
mapping has the declarations and the body its bindings say."""

import re

import pytest

from relax_vk.runtime.vulkan import copies


def test_the_fragments_file_parses_into_the_named_fragments():
    names = {"header", "enable_f16", "words_src_decl", "words_dst_decl", "words_body", "src_texture_decl", "src_texture_read",
             "src_buffer_decl", "src_buffer_read", "dst_texture_decl", "dst_texture_body", "dst_buffer_decl", "dst_buffer_body", "main"}  # fmt: skip
    assert set(copies.FRAGMENTS) == names
    assert all(not text.startswith("//!") for text in copies.FRAGMENTS.values())


@pytest.mark.parametrize("src, dst", [(None, (3, 5, 2)), ((3, 5, 2), None), ((3, 5, 2), (7, 1, 4)), (None, None)])
@pytest.mark.parametrize("dtype, texel", [("float32", None), ("float16", None), ("float32", "float16")])
def test_each_mapping_assembles_a_complete_shader(src, dst, dtype, texel):
    source = copies.copy_shader(src, dst, 480, dtype, 9, texel)
    assert "${" not in source and source.endswith("}\n")
    kinds = copies.copy_bindings(src, dst, dtype, texel)
    assert ("texture_2d_array<f32>" in source) == (kinds[0] == "texture")
    assert ("var<storage, read> src" in source) == (kinds[0] == "buffer_read")
    storage = re.search(r"texture_storage_2d_array<(\w+), write>", source)
    assert (storage.group(1) if storage else None) == {"storage_texture": "rgba32float", "storage_texture_f16": "rgba16float"}.get(kinds[1])
    assert ("enable f16;" in source) == (dtype == "float16" and not (src is None and dst is None))
    count = copies.copy_items(src, dst, 480, 2 if dtype == "float16" else 4)
    assert f"if (i >= {count}) {{ return; }}" in source and "* 9 + i32(wid.x)" in source
