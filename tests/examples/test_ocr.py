"""examples/ocr: PP-OCRv4's detector and recognizer, each one artifact with run-time dims, read a
rendered page on pocl: the same boxes and texts as the same pipeline on onnxruntime, the text that
was rendered, and each line read at its own width; the detector's map equals onnxruntime's at the
page's size and at three more."""

import os
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("PIL")
pytest.importorskip("matplotlib")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "ocr"))
import ocr  # noqa: E402

LINES = ("relax_vk reads text", "OCR 2026", "textures on mobile GPUs")


def test_ocr_reads_each_line_at_its_width_as_onnxruntime_does(pocl, tmp_path):
    det, rec = ocr.build(str(tmp_path), "opencl")
    page, classes = ocr.demo_page(LINES), ocr.characters()
    ours = ocr.sessions(det, rec, device=pocl)
    theirs = ocr.sessions(det, rec, engine="onnxruntime")
    widths = []

    def det_both(x, atol=1e-3):  # (a probability map: on the page, 2e-4 at most measured)
        got, want = ours[0](x), theirs[0](x)
        assert got.shape == want.shape == (1, 1, *x.shape[2:])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)
        return got

    def rec_both(x):
        widths.append(x.shape[3])
        got, want = ours[1](x), theirs[1](x)
        assert got.shape == want.shape and np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
        return got

    read = ocr.read_text(page, det_both, rec_both, classes)
    expected = ocr.read_text(page, *theirs, classes)
    assert [(box, text) for box, text, _ in read] == [(box, text) for box, text, _ in expected]
    assert [text for _, text, _ in read] == list(LINES)
    assert len(set(widths)) == len(LINES)  # (one recognizer artifact, a width per line)
    # the detector's one artifact at another multiple of 32, not square, past its first run (pocl
    # builds each new launch geometry: a size costs seconds here, not on a GPU)
    for h, w in ((96, 64),):
        det_both(np.random.default_rng(h + w).standard_normal((1, 3, h, w)).astype(np.float32), atol=1e-5)


def test_artifacts_of_the_other_api_are_rebuilt_not_run(tmp_path):
    """--api vulkan after an OpenCL build ran the OpenCL artifacts (and --device lavapipe failed on
    them): main rebuilds unless both artifacts are for the API asked for."""
    import relax_vk
    from relax_vk.models import build_example

    path = str(tmp_path / "det.rvk")
    relax_vk.build(build_example("conv-relu-pool"), "opencl").artifact().write(path)
    assert ocr._built_for(path, "opencl") and not ocr._built_for(path, "vulkan")
    assert not ocr._built_for(str(tmp_path / "missing.rvk"), "opencl")
