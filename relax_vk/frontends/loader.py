"""Model-name resolution for the command line and tools: a built-in example, a zoo name, a
``.onnx`` file or a ``.pt2`` file."""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence, Tuple

import tvm

from ..core.errors import UnsupportedError
from .errors import ModelLoadError


def is_checkpoint(spec: str) -> bool:
    """Whether ``spec`` is a Hugging Face checkpoint directory (a decoder: ``config.json`` in it)."""
    return os.path.isdir(spec) and os.path.exists(os.path.join(spec, "config.json"))


def load_model(spec: str, input_shapes: Optional[Mapping[str, Sequence["int | str"]]] = None,
               dims: Optional[Mapping[str, Tuple[int, int]]] = None, dtype: Optional[str] = None,
               quantize: Optional[str] = None, logits: Optional[str] = None) -> Tuple[tvm.IRModule, dict]:  # fmt: skip
    """``(Relax module, source description)`` for a model name or file; the description (e.g.
    ``{"zoo": "resnet18"}``, ``{"onnx": path, "input_shapes": {...}, "dims": {...}}``) lets a runtime
    rebuild a CPU reference for it. ``input_shapes`` fixes an ONNX model's symbolic input dimensions
    (or names run-time dims), ``dims`` gives the run-time dims' ranges. ``dtype`` ("float16"): a decoder
    checkpoint's weights, activations and cache in that dtype (the other models' precision is
    :class:`~relax_vk.core.options.ScopeOptions`'). ``quantize`` ("int4"): a decoder checkpoint's
    weights as 4-bit blocks (:func:`~relax_vk.frontends.hf_decoder.build_decoder`; ONNX models are
    quantized with onnxruntime's tools instead, :mod:`relax_vk.frontends.quantize`). ``logits``
    ("all", the default, or "last"): which tokens' logits a decoder returns."""
    from ..zoo.packaged import PACKAGED, packaged_model_path

    if is_checkpoint(spec):
        return _from_checkpoint(spec, input_shapes, dims, dtype or "float32", quantize, logits or "all")
    if quantize or logits:
        raise UnsupportedError(f"{spec}: quantize and logits apply to decoder checkpoints (ONNX models are quantized by relax_vk.frontends.quantize)")
    if (input_shapes or dims) and not (spec.endswith(".onnx") or spec in PACKAGED):
        raise UnsupportedError(f"{spec}: --input-shape and --dim apply to ONNX models (the others have static shapes)")
    from ..models import EXAMPLES, build_example
    from ..zoo import ZOO

    if spec in EXAMPLES:
        return build_example(spec), {"example": spec}
    if spec.endswith(".onnx"):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        return _from_onnx(spec, {"onnx": os.path.abspath(spec)}, input_shapes, dims)
    if spec.endswith(".pt2"):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        from .torch import load_pt2

        return load_pt2(spec), {"pt2": os.path.abspath(spec)}
    if spec in PACKAGED:
        shapes = dict(PACKAGED[spec].input_shapes)
        shapes.update(input_shapes or {})
        return _from_onnx(str(packaged_model_path(spec)), {"packaged": spec}, shapes, dims)
    if spec in ZOO:
        from ..zoo import build_zoo_model
        from .torch import from_torch

        model, example = build_zoo_model(spec)
        return from_torch(model, (example,)), {"zoo": spec}
    raise UnsupportedError(
        f"unknown model {spec!r}; use a built-in example ({', '.join(sorted(EXAMPLES))}), "
        f"a zoo model ({', '.join(ZOO)}), a packaged model ({', '.join(PACKAGED)}), a .onnx / .pt2 file, or a Hugging Face "
        "checkpoint directory (config.json and safetensors)"
    )


def _from_onnx(path: str, source: dict, input_shapes, dims) -> Tuple[tvm.IRModule, dict]:
    """An ONNX model through :func:`~relax_vk.frontends.onnx.from_onnx`, its shapes and dims added
    to ``source`` (what a runtime needs to import it again for a CPU reference)."""
    from .onnx import from_onnx

    if input_shapes:
        source["input_shapes"] = {name: [d if isinstance(d, str) else int(d) for d in shape] for name, shape in input_shapes.items()}
    if dims:
        source["dims"] = {name: [int(v) for v in bounds] for name, bounds in dims.items()}  # (min, max[, step])
    return from_onnx(path, input_shapes, dims), source


#: a decoder checkpoint's run-time dims when --dim does not give them: the cache's tokens (T, at most the
#: model's max_position_embeddings) and a call's (S, at most T)
DECODER_DIMS = {"T": (1, 512), "S": (1, 128)}


def _from_checkpoint(path: str, input_shapes, dims, dtype: str, quantize: Optional[str] = None, logits: str = "all") -> Tuple[tvm.IRModule, dict]:
    """A Hugging Face decoder checkpoint (:mod:`~relax_vk.frontends.hf_decoder`): ``dims`` may bound
    ``T`` (the cache's tokens) and ``S`` (one call's tokens), each ``(1, max)``."""
    from .hf_decoder import DecoderConfig, build_decoder, eos_token_ids, read_weights

    if input_shapes:
        raise UnsupportedError(f"{path}: a decoder's input shapes are its dims T and S (--dim T=1:512 --dim S=1:128), not --input-shape")
    ranges = dict(DECODER_DIMS)
    config = DecoderConfig.from_dir(path)
    ranges["T"] = (1, min(ranges["T"][1], config.position_bound))
    for name, bounds in (dims or {}).items():
        lo, hi = bounds[0], bounds[1]
        if name not in ranges or int(lo) != 1 or len(bounds) > 2 and int(bounds[2]) != 1:
            raise UnsupportedError(f"{path}: a decoder has the dims T (cache tokens) and S (tokens per call), each 1:MAX; "
                                   f"not {name}={':'.join(str(int(v)) for v in bounds)}")  # fmt: skip
        ranges[name] = (1, int(hi))
    if "S" not in (dims or {}):
        ranges["S"] = (1, min(ranges["S"][1], ranges["T"][1]))
    program = build_decoder(config, read_weights(path), ranges["T"][1], ranges["S"][1], where=path, dtype=dtype, quantize=quantize,
                            logits=logits)  # (config.json read once)
    source = {"hf_decoder": os.path.abspath(path), "dims": {k: list(v) for k, v in ranges.items()}, "dtype": dtype,
              "eos_token_ids": eos_token_ids(path)}  # (what `relax-vk generate --stop-at-eos` stops at)
    source.update({k: v for k, v in (("quantize", quantize), ("logits", logits)) if v not in (None, "all")})
    return program.module, source
