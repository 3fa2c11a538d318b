"""The portable ``.rvk`` artifact, between the compiler and the runtime:

* :mod:`.artifact` -- the file format (header, program JSON, source, constants). The complete
  checks of a program before anything runs are the native library's (:func:`relax_vk.runtime.validate`).

Standard library and numpy only, so the runtime loads artifacts without TVM. Why here, between
the two: the format is the runtime's input contract and the compiler's output, so neither side
owns it (ExecuTorch keeps its ``serialization/`` beside its ``runtime/`` for the same reason); it
sits below the runtime, which imports it. The compiler's side, the program read off a lowered
module, needs TVM and the passes: :mod:`relax_vk.codegen.export`. Nothing is imported eagerly.
"""
