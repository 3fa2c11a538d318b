"""The walkthrough notebook runs top to bottom (nbclient); any cell error fails the test. Its cells
assert their own results (OpenCL output vs TVM llvm and vs PyTorch eager), so a wrong answer fails
too, not only an exception."""

import os

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs the notebook extra")
nbclient = pytest.importorskip("nbclient", reason="the notebook test needs the notebook extra")
pytest.importorskip("torch", reason="the walkthrough imports a zoo model")

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "01_texture_scoping_walkthrough.ipynb")


def test_walkthrough_notebook_executes(tmp_path, monkeypatch):
    # the inline backend, so figures come back as images (whatever MPLBACKEND the caller has)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # run from a clean slate, not from the committed outputs
        if cell.cell_type == "code":
            cell.outputs = []
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the cell and the error
    texts = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"
    )
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert "max abs err vs PyTorch eager" in texts
    assert "global.texture" in texts
    assert len(images) >= 2  # the plan pictures were drawn
