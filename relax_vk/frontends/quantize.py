"""Quantize a float ONNX model with onnxruntime's own tools, before the ONNX front door imports it.

relax_vk writes no quantizer: calibration and the choice of scales are onnxruntime's
(``onnxruntime.quantization``), the same tools users run themselves. :func:`quantize_onnx` is
what ``relax-vk build model.onnx --quantize MODE [--calibrate DIR]`` calls; its result is an
ordinary quantized ONNX model that :func:`relax_vk.frontends.from_onnx` imports like any other
(:mod:`relax_vk.frontends.onnx_quant`), and that onnxruntime runs as the reference.

Modes (:data:`MODES`):

* ``int8``: ``quantize_static`` in the QDQ format, int8 activations and weights, weights per
  output channel: calibration samples are required (``calibration``);
* ``int8-dynamic``: ``quantize_dynamic``: int8 weights, activations quantized at run time
  (``DynamicQuantizeLinear`` + ``ConvInteger`` / ``MatMulInteger``); no calibration;
* ``int4``: ``MatMulNBitsQuantizer``: weight-only 4-bit blockwise ``MatMul`` weights (block 32,
  symmetric), ``com.microsoft.MatMulNBits``; other ops stay float; no calibration.

Calibration samples come as a folder (:func:`read_calibration`): ``*.npy`` files, one sample each,
for a model with one input, or ``*.npz`` files holding one array per input name. Each sample is
checked against the model's inputs (names, ranks, static dims) before onnxruntime sees it, so a
wrong file is an error naming the file, the input and the dims.

Needs the ``quantize`` extra (``pip install 'relax_vk[quantize]'``: the ``onnx`` extra and onnxruntime).
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..core.errors import UnsupportedError
from ..core.extras import require
from ..core.files import replace_with_file
from .errors import ModelLoadError
from .onnx import graph_inputs

#: ``--quantize`` modes (module docstring)
MODES = ("int8", "int8-dynamic", "int4")

Sample = Dict[str, np.ndarray]


class CalibrationError(UnsupportedError, ValueError):
    """Calibration samples that do not fit the model (names the file, the input and why)."""


def _inputs(model) -> Dict[str, tuple]:
    """``{input name: (numpy dtype, dims)}``; a dim is an int, or None where symbolic."""
    from onnx import helper

    out = {}
    for inp in graph_inputs(model):
        t = inp.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in t.shape.dim)
        out[inp.name] = (np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)), dims)
    return out


def _check_sample(sample: Sample, inputs: Mapping[str, tuple], where: str) -> Sample:
    missing, unknown = sorted(set(inputs) - set(sample)), sorted(set(sample) - set(inputs))
    if missing or unknown:
        raise CalibrationError(f"{where}: the model's inputs are {sorted(inputs)}; "
                               f"{'missing ' + ', '.join(missing) if missing else ''}{'; ' if missing and unknown else ''}"
                               f"{'not inputs: ' + ', '.join(unknown) if unknown else ''}")  # fmt: skip
    checked = {}
    for name, (dtype, dims) in inputs.items():
        array = np.asarray(sample[name])
        if array.ndim != len(dims) or any(d is not None and d != s for d, s in zip(dims, array.shape)):
            want = "x".join("?" if d is None else str(d) for d in dims)
            raise CalibrationError(f"{where}: input {name!r} has shape {'x'.join(map(str, array.shape)) or 'scalar'}, the model takes {want}")
        if array.dtype.kind != dtype.kind:
            raise CalibrationError(f"{where}: input {name!r} is {array.dtype}, the model takes {dtype}")
        checked[name] = np.ascontiguousarray(array.astype(dtype, copy=False))
    return checked


def read_calibration(folder: str, model) -> List[Sample]:
    """The calibration samples of ``folder`` for ``model`` (an ``onnx.ModelProto``), in file-name
    order: ``*.npy`` (one sample of a one-input model) and ``*.npz`` (arrays named by input)."""
    if not os.path.isdir(folder):
        raise CalibrationError(f"--calibrate {folder}: not a folder of .npy / .npz samples")
    inputs = _inputs(model)
    files = sorted(glob.glob(os.path.join(folder, "*.npy")) + glob.glob(os.path.join(folder, "*.npz")))
    if not files:
        raise CalibrationError(f"--calibrate {folder}: no .npy or .npz files (one sample each)")
    samples = []
    for path in files:
        if path.endswith(".npy") and len(inputs) != 1:
            raise CalibrationError(f"{path}: a .npy sample fits a one-input model; this one has {len(inputs)} "
                                   f"({', '.join(inputs)}): give .npz files with an array per input")  # fmt: skip
        try:
            if path.endswith(".npz"):
                with np.load(path) as data:
                    sample = {k: data[k] for k in data.files}
            else:
                sample = {next(iter(inputs)): np.load(path)}
        except (OSError, ValueError) as err:
            raise CalibrationError(f"{path}: not a numpy file ({err})") from None
        samples.append(_check_sample(sample, inputs, path))
    return samples


class _Reader:
    """onnxruntime's ``CalibrationDataReader`` protocol over checked samples."""

    def __init__(self, samples: Sequence[Sample]):
        self._next = iter(samples)

    def get_next(self):
        return next(self._next, None)


def quantize_onnx(model_path: str, output_path: str, mode: str, calibration: Optional[Sequence[Sample]] = None) -> str:
    """Write ``model_path`` quantized by onnxruntime's tools (``mode``: :data:`MODES`) to
    ``output_path`` and return it. ``calibration``: samples (:func:`read_calibration`), required
    by ``int8``. The file is written whole or not at all."""
    onnx = require("onnx", "quantize")
    require("onnxruntime", "quantize")
    from onnxruntime import quantization as q

    if mode not in MODES:
        raise UnsupportedError(f"--quantize {mode}: the modes are {', '.join(MODES)}")
    if not os.path.exists(model_path):
        raise ModelLoadError(f"{model_path}: no such file")
    if mode == "int8" and not calibration:
        raise CalibrationError("--quantize int8 needs calibration samples (--calibrate DIR of .npy / .npz files); "
                               "--quantize int8-dynamic and int4 need none")  # fmt: skip
    if mode != "int8" and calibration:
        raise CalibrationError(f"--quantize {mode} takes no calibration samples (only int8 does)")
    folder = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(folder, exist_ok=True)
    fd, partial = tempfile.mkstemp(suffix=".onnx", dir=folder)
    os.close(fd)
    try:
        with _quiet():  # (onnxruntime's quantizers log INFO lines and advice through the root logger)
            if mode == "int8":
                q.quantize_static(model_path, partial, _Reader(calibration), quant_format=q.QuantFormat.QDQ, per_channel=True,
                                  activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8)  # fmt: skip
            elif mode == "int8-dynamic":
                q.quantize_dynamic(model_path, partial, weight_type=q.QuantType.QInt8)
            else:
                from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

                quantizer = MatMulNBitsQuantizer(onnx.load(model_path), bits=4, block_size=32, is_symmetric=True)
                quantizer.process()
                onnx.save(quantizer.model.model, partial)
        replace_with_file(partial, output_path)
    except Exception as err:
        if isinstance(err, UnsupportedError):
            raise
        raise ModelLoadError(f"{model_path}: onnxruntime's quantization ({mode}) failed: {type(err).__name__}: "
                             f"{str(err).splitlines()[0] if str(err) else ''}") from None  # fmt: skip
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return output_path


@contextlib.contextmanager
def _quiet():
    """Python logging at ERROR and above while onnxruntime's quantizers run, and onnxruntime's own
    log at ERROR (its calibration sessions warn of every initializer they drop); after: Python's
    levels as they were, onnxruntime's at its default (WARNING)."""
    import logging

    import onnxruntime

    loggers = [logging.getLogger(), logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")]
    levels = [logger.level for logger in loggers]
    onnxruntime.set_default_logger_severity(3)
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        onnxruntime.set_default_logger_severity(2)
