"""Built-in example models (Relax modules in NCHW, before any relax_vk pass)."""

from .examples import EXAMPLES, build_example, conv_chain

__all__ = ["EXAMPLES", "build_example", "conv_chain"]
