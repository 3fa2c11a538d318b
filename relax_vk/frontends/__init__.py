"""Front doors: PyTorch (``torch.export``) and ONNX models into Relax, and model-name resolution
for the command line.

* :func:`from_torch` -- a ``torch.nn.Module`` and example inputs, through ``torch.export`` and TVM's
  ``from_exported_program`` (parameters become constants); :func:`load_pt2` -- a
  ``torch.export.save`` archive; quantized graphs (pt2e, torchao weight-only) through
  :mod:`.torch_quant`;
* :func:`from_onnx` -- a path or ``onnx.ModelProto`` through TVM's ONNX frontend, with the import
  fix-up :class:`RaisePrebuiltBinary`;
* :func:`load_model` -- a built-in example name, a zoo name, a ``.onnx`` file or a ``.pt2`` file.

Extras: ``torch`` and ``onnx`` (``pip install 'relax_vk[torch,onnx]'``); a missing one raises
:class:`relax_vk.core.extras.MissingExtra` naming it. A file that cannot be read or parsed raises
:class:`ModelLoadError` (a ``ValueError``) naming the file.
"""

from .errors import ModelLoadError
from .loader import load_model
from .onnx import from_onnx
from .raise_prebuilt_binary import RaisePrebuiltBinary
from .torch import from_torch, load_pt2

__all__ = ["ModelLoadError", "RaisePrebuiltBinary", "from_onnx", "from_torch", "load_model", "load_pt2"]
