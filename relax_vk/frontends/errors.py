"""The error every front door raises for a model it cannot read, how a converter names the
ONNX node it refuses, and where an importer lost a tensor's shape."""

from typing import Optional

from ..core.errors import UnsupportedError


class ModelLoadError(UnsupportedError):
    """A model file could not be read, parsed or imported (names the file and why)."""


def onnx_node(attrs: dict, op: str) -> str:
    """``"OP node NAME"`` for a converter's error (``attrs``: what TVM's ONNX importer hands a
    converter, the node's name under ``tvm_custom``), ``"OP"`` when the node has no name."""
    name = attrs.get("tvm_custom", {}).get("name", "")
    return f"{op} node {name}" if name else op


def first_lost_shape(mod) -> Optional[str]:
    """The model op (its recorded name, else the variable's) of ``main``'s first binding whose
    tensor has no known shape: what an importer gives an op whose inputs' run-time sizes it cannot
    prove compatible. No later stage can build such a tensor (and its ops are left unlegalized)."""
    from tvm import relax

    from ..core.provenance import model_op_names

    main = mod["main"]
    names = model_op_names(main)
    for block in main.body.blocks:
        for b in block.bindings:
            ty = b.var.ty
            if isinstance(ty, relax.TensorType) and ty.shape is None:
                return names.get(b.var.name, b.var.name)
    return None
