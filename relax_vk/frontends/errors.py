"""The error every front door raises for a model it cannot read, and how a converter names the
ONNX node it refuses."""

from ..core.errors import UnsupportedError


class ModelLoadError(UnsupportedError):
    """A model file could not be read, parsed or imported (names the file and why)."""


def onnx_node(attrs: dict, op: str) -> str:
    """``"OP node NAME"`` for a converter's error (``attrs``: what TVM's ONNX importer hands a
    converter, the node's name under ``tvm_custom``), ``"OP"`` when the node has no name."""
    name = attrs.get("tvm_custom", {}).get("name", "")
    return f"{op} node {name}" if name else op
