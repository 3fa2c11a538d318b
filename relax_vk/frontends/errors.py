"""The error every front door raises for a model it cannot read, how a converter names the
ONNX node it refuses, and where an importer lost a tensor's shape."""

from typing import Optional, Tuple

import tvm

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


def refuse_fixed_reshapes(mod, where: str, label: str, hint: str = "") -> None:
    """Raise :class:`UnsupportedError` naming (``label``: "node", "op") the reshape that
    :func:`first_fixed_reshape_of_run_time_size` finds, if any; ``hint`` ends the message."""
    fixed = first_fixed_reshape_of_run_time_size(mod)
    if fixed is not None:
        raise UnsupportedError(f"{where}: {label} {fixed[0]}: reshapes {fixed[1]}, whose size is a run-time size, to the fixed shape {fixed[2]}: "
                               f"right at one size only{hint}")  # fmt: skip


def first_fixed_reshape_of_run_time_size(mod) -> Optional[Tuple[str, str, str]]:
    """``(model op, input shape, output shape)`` of ``main``'s first reshape of a tensor whose size
    is a run-time size to a fixed shape: an export that baked its example's length into a
    ``Reshape`` (``torch.onnx.export`` after a recurrent layer), right at that one size only.
    Built, it would read or leave unwritten elements at every other size; onnxruntime refuses those
    runs. None when there is none."""
    from tvm import relax, tirx

    from ..core.provenance import model_op_names

    main = mod["main"]
    names = model_op_names(main)
    reshape = tvm.ir.Op.get("relax.reshape")
    for block in main.body.blocks:
        for b in block.bindings:
            call = b.value
            if not (isinstance(call, relax.Call) and call.op.same_as(reshape)):
                continue
            src, dst = call.args[0].ty, b.var.ty
            if not (isinstance(src, relax.TensorType) and isinstance(dst, relax.TensorType)) or src.shape is None or dst.shape is None:
                continue
            src_dims, dst_dims = list(getattr(src.shape, "values", None) or []), list(getattr(dst.shape, "values", None) or [])
            if not src_dims or not dst_dims:
                continue
            run_time = any(not isinstance(d, tirx.IntImm) for d in src_dims)
            if run_time and all(isinstance(d, tirx.IntImm) for d in dst_dims):
                shape = lambda dims: "[" + ", ".join(str(int(d)) if isinstance(d, tirx.IntImm) else str(d) for d in dims) + "]"  # noqa: E731
                return names.get(b.var.name, b.var.name), shape(src_dims), shape(dst_dims)
    return None
