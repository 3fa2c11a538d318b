"""What the compiler learns about a module without a device, between the pipeline and the build:

* :mod:`.memory_plan` -- the memory plan of a scoped or lowered module (``relax_vk.plan``): every
  tensor's scope, image extents and bytes, the copies, and storage reuse;
* :mod:`.reference` -- CPU reference execution (TVM llvm): any module, scoped or not, and the
  output of every named model op of a module as imported;
* :mod:`.fp16_range` -- fp16 range calibration: the ops whose values float16 cannot hold, which
  :func:`relax_vk.build` keeps in float32 arithmetic.

The tools (``relax-vk bisect``, ``profile``, ``run --check``) compare device results with
:mod:`.reference`; nothing here imports :mod:`relax_vk.tools`. Nothing is imported eagerly.
"""
