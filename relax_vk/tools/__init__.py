"""Tools around the pipeline, the top layer (nothing else in relax_vk imports them): the
``relax-vk`` command line (:mod:`.cli`), the picture of the memory plan (:mod:`.plan_graph`; the
plan itself is :mod:`relax_vk.analysis.memory_plan`), ``profile`` and ``bisect`` on a device
(against the CPU reference, :mod:`relax_vk.analysis.reference`), and the tuner (:mod:`.tune`)."""
