"""The differential fuzzer: seeded random CNN graphs (:mod:`.graph`), run through both front
doors (torch.export, ONNX) and both backends (OpenCL on pocl, Vulkan on lavapipe), compared with
PyTorch eager and TVM's llvm build (:mod:`.runner`), failures shrunk to minimal reproducers
(:mod:`.shrink`), campaigns over many seeds in worker processes (:mod:`.campaign`). An exception
is relax_vk's crash or the exporter's / TVM importer's refusal by where it was raised (:mod:`.blame`).

Command line::

    python -m relax_vk.testing.fuzz --seeds 0:2000 [--jobs 2] [--front-door torch|onnx|both]
        [--backend opencl|vulkan|both] [--limits default|cut] [--no-shrink] [--out failures.jsonl]
        [--min-ok-share 0.8] [--run-time-dims]

prints ``fuzz: N seeds, ok A, miscompile B, crash C, clear-error D, frontend E, reference-disagrees F
(ok share S)`` and exits 1 when any seed miscompiles or crashes, or fewer than ``--min-ok-share``
of the seeds run right.
"""

from .graph import GraphSpec, Node, infer_shapes, random_graph, to_torch
from .runner import STATUSES, Outcome, close_enough, run_spec
from .shrink import shrink

__all__ = ["GraphSpec", "Node", "Outcome", "STATUSES", "close_enough", "infer_shapes", "random_graph", "run_spec", "shrink", "to_torch"]
