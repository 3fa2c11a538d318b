"""PyTorch front door: ``torch.export`` and TVM's ``from_exported_program``."""

from __future__ import annotations

from typing import Sequence

import tvm

from ..core.extras import require
from .errors import ModelLoadError


def from_torch(module, example_inputs: Sequence) -> tvm.IRModule:
    """Relax module of ``module`` (put in eval mode) for ``example_inputs``; parameters become
    constants."""
    torch = require("torch", "torch")
    from tvm.relax.frontend.torch import from_exported_program

    module = module.eval()
    with torch.no_grad():
        exported = torch.export.export(module, tuple(example_inputs))
    return from_exported_program(exported, keep_params_as_input=False, unwrap_unit_return_tuple=True)


def load_pt2(path: str) -> tvm.IRModule:
    """Relax module of a ``torch.export.save`` archive."""
    torch = require("torch", "torch")
    from tvm.relax.frontend.torch import from_exported_program

    try:
        exported = torch.export.load(path)
    except Exception as err:
        raise ModelLoadError(f"{path}: not a readable torch.export archive (.pt2): {err}") from None
    return from_exported_program(exported, keep_params_as_input=False, unwrap_unit_return_tuple=True)
