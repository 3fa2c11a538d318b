"""Output folders written all or nothing (relax_vk.tools.staging)."""

import os

import pytest

from relax_vk.tools.staging import staged_folder


def test_a_finished_block_replaces_the_folder_an_earlier_run_wrote(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.rvk").write_text("old")
    with staged_folder(str(out)) as staging:
        (tmp_path / staging / "model.rvk").write_text("new")
        (tmp_path / staging / "plan.json").write_text("{}")
    assert sorted(os.listdir(out)) == ["model.rvk", "plan.json"] and (out / "model.rvk").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging folder left behind


def test_a_folder_of_other_files_is_never_replaced(tmp_path):
    """``relax-vk build model.onnx -o .`` (or -o on the model's folder) emptied the folder, the model
    included: a folder holding a file the new output does not write is refused and left as it was."""
    (tmp_path / "conv.onnx").write_text("the model")
    with pytest.raises(FileExistsError, match=r"holds files this output does not write \(conv.onnx\): it was not replaced"):
        with staged_folder(str(tmp_path)) as staging:
            (tmp_path / staging / "model.rvk").write_text("new")
    assert sorted(os.listdir(tmp_path)) == ["conv.onnx"] and (tmp_path / "conv.onnx").read_text() == "the model"
    (tmp_path / "x.rvk").write_text("a file")
    with pytest.raises(FileExistsError, match="x.rvk is a file, not a folder"):
        with staged_folder(str(tmp_path / "x.rvk")) as staging:
            (tmp_path / staging / "model.rvk").write_text("new")
    assert sorted(os.listdir(tmp_path)) == ["conv.onnx", "x.rvk"]


def test_a_failed_block_leaves_the_old_folder_and_no_staging(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with staged_folder(str(out)) as staging:
            (tmp_path / staging / "half.txt").write_text("half")
            raise RuntimeError("interrupted")
    assert sorted(os.listdir(out)) == ["old.txt"]
    assert sorted(os.listdir(tmp_path)) == ["out"]
