"""The portable ``.rvk`` artifact, between the compiler and the runtime:

* :mod:`.artifact` -- the file format (header, program JSON, source, constants); standard library
  and numpy only, so the runtime loads it without TVM;
* :mod:`.export` -- the program read off a lowered module (tensors, kernel launches with their
  geometry, copies); needs TVM.

Why here, between the two: the format is the runtime's input contract and the compiler's output,
so neither side owns it; export needs TVM and the loaders must not (ExecuTorch keeps its
``serialization/`` beside its ``runtime/`` for the same reason). Nothing is imported eagerly.
"""
