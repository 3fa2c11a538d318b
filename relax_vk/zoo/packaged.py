"""Real deployed models that ship inside PyPI packages, by name.

The PP-OCR models of ``rapidocr_onnxruntime==1.4.4`` are what mobile OCR apps run: a DBNet text
detector (PP-LCNet backbone with squeeze-excite and hard-swish, transposed convs, resize), an SVTR
recognizer (convs, then attention) and a direction classifier. Their inputs have symbolic
dimensions, so each entry fixes a small input shape (the detector at 64x64 keeps CI fast; any
multiple of 32 works). The files are found inside the installed package without importing it (its
``__init__`` imports OpenCV).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..core.errors import UnsupportedError


@dataclass(frozen=True)
class PackagedModel:
    package: str
    requirement: str
    path: str  # inside the package
    input_shapes: Dict[str, Tuple[int, ...]]
    note: str


PACKAGED: Dict[str, PackagedModel] = {
    "ppocr_det": PackagedModel(
        "rapidocr_onnxruntime", "rapidocr_onnxruntime==1.4.4", "models/ch_PP-OCRv4_det_infer.onnx", {"x": (1, 3, 64, 64)},
        "PP-OCRv4 text detector (DBNet, PP-LCNet backbone: SE, hard-swish, transposed convs, resize), 64x64",
    ),
    "ppocr_rec": PackagedModel(
        "rapidocr_onnxruntime", "rapidocr_onnxruntime==1.4.4", "models/ch_PP-OCRv4_rec_infer.onnx", {"x": (1, 3, 48, 96)},
        "PP-OCRv4 text recognizer (SVTR: convs, then attention), 48x96",
    ),
    "ppocr_cls": PackagedModel(
        "rapidocr_onnxruntime", "rapidocr_onnxruntime==1.4.4", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": (1, 3, 48, 192)},
        "PP-OCR mobile v2.0 text direction classifier, 48x192",
    ),
}


def packaged_model_path(name: str) -> str:
    """The ONNX file of packaged model ``name`` (raises naming the package to install)."""
    entry = PACKAGED[name]
    spec = importlib.util.find_spec(entry.package)
    if spec is None or not spec.submodule_search_locations:
        raise UnsupportedError(f"model {name} ships in the {entry.package} package: pip install '{entry.requirement}'")
    path = os.path.join(list(spec.submodule_search_locations)[0], entry.path)
    if not os.path.exists(path):
        raise UnsupportedError(f"model {name}: {entry.path} is missing from the installed {entry.package} (needs {entry.requirement})")
    return path


def example_input(name: str, seed: int = 0, shape: Optional[Tuple[int, int, int, int]] = None):
    """A realistic input for packaged model ``name``, at its own input shape or ``shape`` (numpy, normalised as the apps do:
    ``(pixel / 255 - 0.5) / 0.5``): dark text-like strokes on a light page with some noise, so the
    detector's output is not all background (random noise gives probabilities below 1e-5)."""
    import numpy as np

    if shape is None:
        (shape,) = PACKAGED[name].input_shapes.values()
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    page = np.full((h, w), 0.92, np.float32) + rng.normal(0, 0.03, (h, w)).astype(np.float32)
    # glyphs sized for a page at most 64 pixels high (a larger page gets more, not bigger, text:
    # the detector at 224x224 sees text lines, not blocks, and its output is not all background)
    gh, gw = min(h, 64), w * min(h, 64) // h
    for row in range(h // 5, h - h // 8, max(gh // 3, 8)):  # text lines of "characters" with gaps
        height = max(2, gh // 9)
        for col in range(w // 10, w - w // 10, max(gw // 12, 4)):
            page[row : row + height, col : col + max(2, gw // 16)] = 0.1
    x = (np.clip(page, 0, 1) - 0.5) / 0.5
    return np.ascontiguousarray(np.broadcast_to(x, (n, c, h, w))).astype(np.float32)
