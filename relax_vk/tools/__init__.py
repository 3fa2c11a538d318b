"""Tools around the pipeline: the ``relax-vk`` command line (:mod:`.cli`), the memory-plan report
(:mod:`.memory_plan`, ``relax_vk.plan``) and its picture (:mod:`.plan_graph`), ``profile`` and
``bisect`` on a device (against the CPU reference, :mod:`relax_vk.analysis.reference`), and the
tuner (:mod:`.tune`)."""
