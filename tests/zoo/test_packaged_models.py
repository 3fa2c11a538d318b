"""Real deployed models from PyPI packages (PP-OCR's detector, recognizer and classifier from
rapidocr_onnxruntime): imported as they ship (symbolic dims fixed by the catalogue's input shapes,
shape subgraphs folded), compiled for both backends, run on pocl and lavapipe, and compared with
onnxruntime on realistic inputs."""

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the reference needs onnxruntime (test extra)")
pytest.importorskip("onnx", reason="needs the onnx extra")

import relax_vk  # noqa: E402
from relax_vk.frontends import load_model  # noqa: E402
from relax_vk.runtime import load  # noqa: E402
from relax_vk.zoo.packaged import PACKAGED, example_input, packaged_model_path  # noqa: E402
from helpers_build import BACKENDS, marked_full_only  # noqa: E402

# minimum activation texture share and maximum copies of each model's compiled plan. The detector's
# buffers are its input, its output and the transposed convs of its head (no packed form); since
# its squeeze-excite gates fuse into their consumers (IsolateBroadcastReductions) it has fewer
# intermediate textures, so the same buffers are 10.3% of its activation bytes (9.2% before)
TARGETS = {"ppocr_det": (0.89, 0), "ppocr_cls": (0.999, 0), "ppocr_rec": (0.95, 0)}


# (the recognizer and the detector on Vulkan, with ``make test-full``: tests/examples/test_ocr.py
# runs both on OpenCL, with run-time dims; ``python benchmarks/conformance.py`` runs each model on
# both APIs)
ON_API = {"ppocr_cls": BACKENDS[0], "ppocr_det": BACKENDS[1], "ppocr_rec": BACKENDS[1]}
FULL_ONLY = {"ppocr_det", "ppocr_rec"}


@pytest.mark.parametrize("name", marked_full_only(sorted(PACKAGED), FULL_ONLY, "tests/examples/test_ocr.py"))
def test_packaged_model_runs_and_matches_onnxruntime(name):
    backend, device = ON_API[name].values
    if not __import__("importlib").util.find_spec(PACKAGED[name].package):
        pytest.skip(f"{PACKAGED[name].requirement} is not installed")
    mod, source = load_model(name)
    assert source["packaged"] == name
    x = example_input(name)
    (expected,) = ort.InferenceSession(packaged_model_path(name)).run(None, {"x": x})
    assert float(np.std(expected)) > 1e-3  # the input exercises the model (the detector finds text)
    compiled = relax_vk.build(mod, target=backend)
    (out,) = load(compiled.artifact(), device=device).run([x])
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-4)
    share, copies = TARGETS[name]
    plan = compiled.plan()
    assert plan.activation_texture_share >= share and plan.copies <= copies


def test_symbolic_inputs_without_shapes_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"input 'x' has symbolic dimensions .*--input-shape x=1,3,224,224"):
        load_model(packaged_model_path("ppocr_cls"))
    with pytest.raises(ValueError, match=r"--input-shape names 'y', but the model's inputs are 'x'"):
        load_model(packaged_model_path("ppocr_cls"), {"y": (1, 3, 48, 192)})
    with pytest.raises(ValueError, match=r"dimension 1 is 3 in the model; --input-shape gives 4"):
        load_model(packaged_model_path("ppocr_cls"), {"x": (1, 4, 48, 192)})


@pytest.mark.parametrize("side", [64, 224])
def test_detector_input_has_text_at_larger_sizes(side):
    """The example page's glyphs keep the size they have at 64x64, so the detector still finds text
    at 224x224 (glyphs scaled with the page became blocks, and its output was all background)."""
    if not __import__("importlib").util.find_spec(PACKAGED["ppocr_det"].package):
        pytest.skip(f"{PACKAGED['ppocr_det'].requirement} is not installed")
    x = example_input("ppocr_det", shape=(1, 3, side, side))
    (probability,) = ort.InferenceSession(packaged_model_path("ppocr_det")).run(None, {"x": x})
    assert 0.02 < float(np.mean(probability > 0.3)) < 0.5
