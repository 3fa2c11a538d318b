"""Read the text of an image with PP-OCRv4: the detector finds the lines, the recognizer reads each
line at its own width. Two artifacts with run-time dims do it all: the detector's height and width
(multiples of 32 up to ``--max-side``) and the recognizer's width (up to ``--max-width``), so no
line is padded or squeezed to a fixed width (padding changes what SVTR recognizers read) and nothing
is compiled at a new size.

    python examples/ocr/ocr.py                        # builds det.rvk and rec.rvk, reads a rendered demo page
    python examples/ocr/ocr.py page.png --api vulkan --device lavapipe
    python examples/ocr/ocr.py page.png --engine onnxruntime   # the same pipeline on onnxruntime, to compare

Needs numpy and relax_vk; ``rapidocr_onnxruntime==1.4.4`` for the models; Pillow to read image
files and to render the demo page. The pre- and post-processing follow PP-OCR's (DB post-processing
for horizontal lines, CTC greedy decoding with the character list stored in the recognizer's ONNX
file), written with numpy only.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable, List, Sequence, Tuple

import numpy as np

Run = Callable[[np.ndarray], np.ndarray]  # a model's one input -> its first output
Box = Tuple[int, int, int, int]  # x0, y0, x1, y1 in the image's pixels (x1, y1 exclusive)

HEIGHT = 48  # the recognizer's input height
THRESH, BOX_THRESH, UNCLIP = 0.3, 0.5, 1.6  # PP-OCR's DB post-processing defaults


def build(folder: str, api: str = "opencl", max_side: int = 960, max_width: int = 1280) -> Tuple[str, str]:
    """``det.rvk`` and ``rec.rvk`` in ``folder``, each one artifact for every size in its range."""
    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.zoo.packaged import packaged_model_path

    os.makedirs(folder, exist_ok=True)
    det = from_onnx(packaged_model_path("ppocr_det"), {"x": (1, 3, "H", "W")}, dims={"H": (32, max_side, 32), "W": (32, max_side, 32)})
    rec = from_onnx(packaged_model_path("ppocr_rec"), {"x": (1, 3, HEIGHT, "W")}, dims={"W": (8, max_width)})
    paths = os.path.join(folder, "det.rvk"), os.path.join(folder, "rec.rvk")
    for mod, path in zip((det, rec), paths):
        relax_vk.build(mod, api).artifact().write(path)
    return paths


def characters() -> List[str]:
    """The recognizer's classes: CTC's blank, the characters its ONNX file lists, a space."""
    import onnx

    from relax_vk.zoo.packaged import packaged_model_path

    model = onnx.load(packaged_model_path("ppocr_rec"), load_external_data=False)
    listed = next(p.value for p in model.metadata_props if p.key == "character").splitlines()
    return ["blank", *listed, " "]


def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of an ``[H, W, C]`` float image (pixel centres aligned, as OpenCV's)."""
    h, w = image.shape[:2]
    ys = np.clip((np.arange(height) + 0.5) * h / height - 0.5, 0, h - 1)
    xs = np.clip((np.arange(width) + 0.5) * w / width - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = image[y0][:, x0] * (1 - fx) + image[y0][:, x1] * fx
    bottom = image[y1][:, x0] * (1 - fx) + image[y1][:, x1] * fx
    return top * (1 - fy) + bottom * fy


def normalize(image: np.ndarray) -> np.ndarray:
    """``[H, W, 3]`` pixels 0..255 -> ``[1, 3, H, W]`` in -1..1, as PP-OCR's models take them."""
    return ((image.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()


def _components(mask: np.ndarray) -> List[np.ndarray]:
    """The 8-connected components of a boolean map, each as an array of ``(row, col)``."""
    seen = np.zeros_like(mask, dtype=bool)
    found = []
    h, w = mask.shape
    for start in zip(*np.nonzero(mask)):
        if seen[start]:
            continue
        seen[start] = True
        stack, pixels = [start], []
        while stack:
            r, c = stack.pop()
            pixels.append((r, c))
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    rr, cc = r + dr, c + dc
                    if 0 <= rr < h and 0 <= cc < w and mask[rr, cc] and not seen[rr, cc]:
                        seen[rr, cc] = True
                        stack.append((rr, cc))
        found.append(np.array(pixels))
    return found


def detect(run_det: Run, image: np.ndarray, max_side: int = 960) -> List[Box]:
    """Boxes of the text lines in ``image`` (``[H, W, 3]`` uint8), top to bottom, left to right. The
    image is scaled to sides that are multiples of 32 (the longer at most ``max_side``), the
    detector's probability map thresholded, each component kept if its mean probability passes
    ``BOX_THRESH``, and its bounding box grown by DB's unclip distance (``area * 1.6 /
    perimeter``)."""
    h, w = image.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    rh, rw = (max(32, int(round(s * scale / 32)) * 32) for s in (h, w))
    prob = run_det(normalize(resize(image.astype(np.float32), rh, rw)))[0, 0]
    mask = prob > THRESH
    grown = mask.copy()  # (PP-OCR dilates the map by one pixel)
    grown[1:] |= mask[:-1]
    grown[:, 1:] |= mask[:, :-1]
    boxes = []
    for pixels in _components(grown):
        if len(pixels) < 4 or float(prob[pixels[:, 0], pixels[:, 1]].mean()) < BOX_THRESH:
            continue
        (r0, c0), (r1, c1) = pixels.min(0), pixels.max(0) + 1
        d = (r1 - r0) * (c1 - c0) * UNCLIP / (2 * ((r1 - r0) + (c1 - c0)))
        sy, sx = h / rh, w / rw
        box = (max(0, int((c0 - d) * sx)), max(0, int((r0 - d) * sy)), min(w, int(math.ceil((c1 + d) * sx))), min(h, int(math.ceil((r1 + d) * sy))))
        if box[2] - box[0] >= 4 and box[3] - box[1] >= 4:
            boxes.append(box)
    return sorted(boxes, key=lambda b: (b[1] // 10, b[0]))


def line_input(image: np.ndarray, box: Box, max_width: int = 1280) -> np.ndarray:
    """A line's crop at the recognizer's height and its own width (aspect kept, 8..``max_width``)."""
    x0, y0, x1, y1 = box
    crop = image[y0:y1, x0:x1].astype(np.float32)
    width = min(max_width, max(8, int(math.ceil(HEIGHT * crop.shape[1] / crop.shape[0]))))
    return normalize(resize(crop, HEIGHT, width))


def decode(probs: np.ndarray, classes: Sequence[str]) -> Tuple[str, float]:
    """CTC greedy decoding of ``[1, T, classes]`` probabilities: the text and its mean probability."""
    best, score = probs[0].argmax(-1), probs[0].max(-1)
    keep = (best != 0) & np.concatenate([[True], best[1:] != best[:-1]])
    return "".join(classes[i] for i in best[keep]), float(score[keep].mean()) if keep.any() else 0.0


def read_text(image: np.ndarray, run_det: Run, run_rec: Run, classes: Sequence[str], max_side: int = 960,
              max_width: int = 1280) -> List[Tuple[Box, str, float]]:  # fmt: skip
    """``(box, text, score)`` of every line of ``image``, each line read at its own width."""
    return [(box, *decode(run_rec(line_input(image, box, max_width)), classes)) for box in detect(run_det, image, max_side)]


def demo_page(lines: Sequence[str] = ("relax_vk reads text", "OCR 2026", "textures on mobile GPUs")) -> np.ndarray:
    """A white page with ``lines`` in black (Pillow, and the DejaVu font matplotlib ships)."""
    from PIL import Image, ImageDraw, ImageFont
    import matplotlib

    font = ImageFont.truetype(os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "fonts", "ttf", "DejaVuSans.ttf"), 28)
    page = Image.new("RGB", (520, 60 + 56 * len(lines)), "white")
    draw = ImageDraw.Draw(page)
    for i, text in enumerate(lines):
        draw.text((24 + 40 * (i % 2), 30 + 56 * i), text, fill="black", font=font)
    return np.asarray(page)


def sessions(det_path: str, rec_path: str, device=None, engine: str = "relax_vk") -> Tuple[Run, Run]:
    """The two models as ``Run`` functions: relax_vk sessions of the artifacts, or onnxruntime's
    sessions of the ONNX files (``engine="onnxruntime"``, for comparison)."""
    if engine == "onnxruntime":
        import onnxruntime as ort

        from relax_vk.zoo.packaged import packaged_model_path

        made = [ort.InferenceSession(packaged_model_path(n), providers=["CPUExecutionProvider"]) for n in ("ppocr_det", "ppocr_rec")]
        return tuple((lambda s: lambda x: s.run(None, {s.get_inputs()[0].name: x})[0])(s) for s in made)
    from relax_vk.runtime import load

    made = [load(p, device=device) for p in (det_path, rec_path)]
    return tuple((lambda s: lambda x: s.run([x])[0])(s) for s in made)


def _built_for(path: str, api: str) -> bool:
    """Whether ``path`` is an artifact built for ``api``."""
    from relax_vk.serialization.artifact import Artifact, ArtifactError

    try:
        return os.path.exists(path) and Artifact.read_program(path).get("target") == api
    except (ArtifactError, OSError):
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image", nargs="?", help="an image file (default: a rendered demo page)")
    parser.add_argument("--api", default="opencl", choices=("opencl", "vulkan"))
    parser.add_argument("--device", default=None, help="e.g. pocl, lavapipe, gpu (default: the API's first device)")
    parser.add_argument("--models", default="ocr_models", help="folder of det.rvk and rec.rvk (built when missing)")
    parser.add_argument("--engine", default="relax_vk", choices=("relax_vk", "onnxruntime"))
    args = parser.parse_args(argv)
    if args.image:
        from PIL import Image

        image = np.asarray(Image.open(args.image).convert("RGB"))
    else:
        image = demo_page()
    det, rec = (os.path.join(args.models, n) for n in ("det.rvk", "rec.rvk"))
    if args.engine == "relax_vk" and not all(_built_for(path, args.api) for path in (det, rec)):
        # (missing, or built for the other API: --api vulkan after an OpenCL build ran OpenCL)
        print(f"building {det} and {rec} for {args.api} ...", file=sys.stderr)
        build(args.models, args.api)
    run_det, run_rec = sessions(det, rec, args.device, args.engine)
    for box, text, score in read_text(image, run_det, run_rec, characters()):
        print(f"{box}  {score:.3f}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
