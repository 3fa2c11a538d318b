"""benchmarks/peers.py's bundle packing: every file lands in exactly one part no larger than the
limit, the index in every part, and a run over the parts finds each file (no GPU, no peers)."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import peers  # noqa: E402


def test_pack_fills_parts_under_the_limit_and_bundle_finds_every_file(tmp_path):
    full = tmp_path / "full"
    sizes = {"rvk/blobs/a.npy": 600_000, "mnn/models/m.mnn": 500_000, "ncnn/m.ncnn.bin": 400_000, "io/m.in.bin": 300_000, "io/m.ref.bin": 40, "iree/m.vmfb": 100_000}
    for rel, size in sizes.items():
        (full / rel).parent.mkdir(parents=True, exist_ok=True)
        (full / rel).write_bytes(os.urandom(size))
    (full / peers.INDEX).write_text(json.dumps({"models": [], "tools": {}}))
    parts = peers.pack(str(full), str(tmp_path), part_mib=1.0)
    assert len(parts) == 3 and all(mib <= 1.0 for _, mib in parts)
    assert sorted(os.listdir(parts[-1][0])) == ["iree", peers.INDEX]  # (IREE's part of its own)
    for root, _ in parts:
        assert os.path.exists(os.path.join(root, peers.INDEX))
    held = [rel for rel in sizes for root, _ in parts if os.path.exists(os.path.join(root, rel))]
    assert sorted(held) == sorted(sizes)  # each file in exactly one part
    bundle = peers.Bundle([root for root, _ in parts])
    for rel in sizes:
        assert open(bundle.path(rel), "rb").read() == (full / rel).read_bytes()
    with pytest.raises(FileNotFoundError, match="was every part carried"):
        peers.Bundle([parts[0][0]]).path(next(rel for rel in sizes if not os.path.exists(os.path.join(parts[0][0], rel))))


def test_pack_refuses_a_file_larger_than_a_part(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "big.bin").write_bytes(b"\0" * 2_000_000)
    (full / peers.INDEX).write_text("{}")
    with pytest.raises(RuntimeError, match="big.bin .* is larger than a part"):
        peers.pack(str(full), str(tmp_path), part_mib=1.0)
