"""The differential fuzzer: seeded random CNN graphs (:mod:`.graph`), run through both front
doors (torch.export, ONNX) and both backends (OpenCL on pocl, Vulkan on lavapipe), compared with
PyTorch eager and TVM's llvm build (:mod:`.runner`), failures shrunk to minimal reproducers
(:mod:`.shrink`), campaigns over many seeds in worker processes (:mod:`.campaign`).

Command line::

    python -m relax_vk.testing.fuzz --seeds 0:2000 [--jobs 2] [--front-door torch|onnx|both]
        [--backend opencl|vulkan|both] [--limits default|cut] [--no-shrink] [--out failures.jsonl]

prints ``fuzz: N seeds, ok A, miscompile B, crash C, clear-error D, frontend E`` and exits 1 when
any seed miscompiles or crashes.
"""

from .graph import GraphSpec, Node, infer_shapes, random_graph, to_torch
from .runner import STATUSES, Outcome, close_enough, run_spec
from .shrink import shrink

__all__ = ["GraphSpec", "Node", "Outcome", "STATUSES", "close_enough", "infer_shapes", "random_graph", "run_spec", "shrink", "to_torch"]
