"""Kernel code generation, after scheduling:

* :mod:`.tir_pipeline` -- the TIR pipeline for texture kernels (``"relax_vk.texture"``);
* :mod:`.intrinsics` -- OpenCL C names for the math intrinsics TVM lowers to C's ``acosf``-style names;
* :mod:`.texture_stores` -- the repair of texture stores TVM's vectoriser scalarises;
* :mod:`.opencl` -- the OpenCL C TVM generated, read out of the compiled module;
* :mod:`.wgsl` -- relax_vk's WGSL emitter (device TIR -> Vulkan compute shaders);
* :mod:`.export` -- the ``.rvk`` program read off the compiled module (tensors, kernel launches
  with their geometry, copies) into :class:`relax_vk.serialization.artifact.Artifact`.
"""
