"""Tools around the pipeline: the ``relax-vk`` command line (:mod:`.cli`), the memory-plan report
(:mod:`.memory_plan`, ``relax_vk.plan``) and its picture (:mod:`.plan_graph`), and the CPU
reference that checks device results (:mod:`.reference`)."""
