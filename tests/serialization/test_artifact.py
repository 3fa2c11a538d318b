"""The .rvk format: round trip, and every kind of damage refused with a clear error."""

import struct

import numpy as np
import pytest

import relax_vk
from relax_vk.serialization.artifact import ALIGN, HEADER_SIZE, VERSION, Artifact, ArtifactError
from relax_vk.models import build_example


@pytest.fixture(scope="module")
def artifact():
    return relax_vk.build(build_example("rgb-stem"), model={"example": "rgb-stem"}).artifact()


def test_round_trip(artifact, tmp_path):
    path = tmp_path / "m.rvk"
    artifact.write(str(path))
    back = Artifact.read(str(path))
    assert back.program == {**artifact.program, "constants": back.program["constants"]}
    assert back.source == artifact.source
    assert set(back.constants) == set(artifact.constants) and back.constants
    for name, array in artifact.constants.items():
        np.testing.assert_array_equal(back.constants[name], array)
    assert all(c["offset"] % ALIGN == 0 for c in back.program["constants"])
    assert back.program["model"] == {"example": "rgb-stem"}


def test_program_describes_kernels_and_steps(artifact):
    p = artifact.program
    kernels = {k["name"] for k in p["kernels"]}
    launched = {s["kernel"] for s in p["steps"] if s["op"] == "launch"}
    assert kernels == launched and kernels <= set(__import__('relax_vk.codegen.opencl', fromlist=['kernel_names']).kernel_names(artifact.source))
    for k in p["kernels"]:
        assert len(k["global"]) == 3 and all(g % l == 0 for g, l in zip(k["global"], k["local"]))
    textures = [t for t in p["tensors"] if t["image"]]
    assert textures and all(t["scope"].startswith("global.texture") for t in textures)


def _bytes(artifact):
    return bytearray(artifact.to_bytes())


def test_truncated_files_are_refused(artifact):
    data = _bytes(artifact)
    for cut in (0, 10, HEADER_SIZE - 1, HEADER_SIZE + 5, len(data) - 1):
        with pytest.raises(ArtifactError, match="truncated|outside the file"):
            Artifact.from_bytes(bytes(data[:cut]))


def test_bit_flips_are_detected(artifact):
    data = _bytes(artifact)
    for position in (HEADER_SIZE + 3, len(data) // 2, len(data) - 2):
        flipped = bytearray(data)
        flipped[position] ^= 0x10
        with pytest.raises(ArtifactError, match="corrupted"):
            Artifact.from_bytes(bytes(flipped))


def test_wrong_magic_and_version(artifact):
    data = _bytes(artifact)
    other = bytearray(data)
    other[:8] = b"NOTRVK\0\0"
    with pytest.raises(ArtifactError, match="not a relax_vk artifact"):
        Artifact.from_bytes(bytes(other))
    newer = bytearray(data)
    struct.pack_into("<I", newer, 8, VERSION + 1)
    with pytest.raises(ArtifactError, match=f"format version {VERSION + 1}.*reads version {VERSION}"):
        Artifact.from_bytes(bytes(newer))


def test_missing_file_is_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="cannot read"):
        Artifact.read(str(tmp_path / "nope.rvk"))


def test_write_is_atomic(artifact, tmp_path, monkeypatch):
    path = tmp_path / "m.rvk"
    path.write_bytes(b"old")

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr("relax_vk.serialization.artifact.os.replace", boom)
    with pytest.raises(OSError):
        artifact.write(str(path))
    assert path.read_bytes() == b"old"  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["m.rvk"]  # and no temporary is left behind


def test_a_written_artifact_has_a_new_files_mode(artifact, tmp_path):
    """0666 less the umask, as any file the user writes (the temporary file's 0600 was kept)."""
    import os

    mask = os.umask(0o022)
    try:
        artifact.write(str(tmp_path / "m.rvk"))
    finally:
        os.umask(mask)
    assert (tmp_path / "m.rvk").stat().st_mode & 0o777 == 0o644


def test_read_program_reads_the_program_section_alone(artifact, tmp_path):
    """read_program: the program read() gives, from the header and the program section only; a
    file read() refuses is refused the same way (not a half-read program)."""
    path = tmp_path / "m.rvk"
    artifact.write(str(path))
    assert Artifact.read_program(str(path)) == Artifact.read(str(path)).program
    data = bytearray(path.read_bytes())
    program_offset = struct.unpack_from("<Q", data, 16)[0]  # (the first section entry's offset)
    data[program_offset + 5] ^= 0xFF  # inside the program section: its CRC fails
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="CRC32"):
        Artifact.read_program(str(path))
    path.write_bytes(bytes(data[:HEADER_SIZE - 1]))
    with pytest.raises(ArtifactError, match="truncated"):
        Artifact.read_program(str(path))
    with pytest.raises(ArtifactError, match="cannot read"):
        Artifact.read_program(str(tmp_path / "missing.rvk"))
