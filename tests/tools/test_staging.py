"""Output folders written all or nothing (relax_vk.tools.staging)."""

import os

import pytest

from relax_vk.tools.staging import staged_folder


def test_a_finished_block_replaces_the_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with staged_folder(str(out)) as staging:
        (tmp_path / staging / "new.txt").write_text("new")
    assert sorted(os.listdir(out)) == ["new.txt"]
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging folder left behind


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
