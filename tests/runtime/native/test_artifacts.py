"""Bad artifacts through the native runtime: every case the Python runtime's tests refuse
(truncated, corrupt, CRC-valid but inconsistent) is refused with the same ArtifactError message,
before any device is touched; plus damage only a C parser has to survive (hostile JSON, bad UTF-8)."""

import copy
import re
import json
import struct
import zlib

import pytest

import relax_vk
from relax_vk.models import build_example
from relax_vk.runtime import load
from relax_vk.serialization.artifact import HEADER_SIZE, VERSION, Artifact, ArtifactError

from ...serialization.test_validate import CASES


@pytest.fixture(scope="module")
def artifact():
    return relax_vk.build(build_example("conv-relu-pool")).artifact()


def native_error(data: bytes) -> str:
    """The native runtime's message for ``data`` (it must refuse it)."""
    with pytest.raises(ArtifactError) as err:
        load(data, device="pocl")
    return str(err.value)


def python_error(data: bytes) -> str:
    with pytest.raises(ArtifactError) as err:
        Artifact.from_bytes(data)
    return str(err.value)


def damaged_bytes(artifact, change) -> bytes:
    program = copy.deepcopy(artifact.program)
    change(program)
    return Artifact(program, artifact.source, dict(artifact.constants)).to_bytes()


def with_program_section(data: bytes, text: bytes) -> bytes:
    """``data`` with its program section replaced by ``text`` (offsets and CRCs rewritten)."""
    sections = []
    for i in range(3):
        offset, size, _, _ = struct.unpack_from("<QQII", data, 16 + 24 * i)
        sections.append(data[offset : offset + size])
    sections[0] = text
    out = bytearray(data[:16])
    body, offset = b"", HEADER_SIZE
    for s in sections:
        pad = (-offset) % 16
        body += b"\0" * pad
        offset += pad
        out += struct.pack("<QQII", offset, len(s), zlib.crc32(s), 0)
        body += s
        offset += len(s)
    return bytes(out + body)


def test_truncated_files(native_build, artifact):
    data = artifact.to_bytes()
    for cut in (0, 10, HEADER_SIZE - 1, HEADER_SIZE + 5, len(data) - 1):
        assert native_error(data[:cut]) == python_error(data[:cut])


def test_bit_flips(native_build, artifact):
    data = artifact.to_bytes()
    for position in (HEADER_SIZE + 3, len(data) // 2, len(data) - 2):
        flipped = bytearray(data)
        flipped[position] ^= 0x10
        message = native_error(bytes(flipped))
        assert message == python_error(bytes(flipped)) and "corrupted" in message


def test_magic_version_padding_and_trailing_bytes(native_build, artifact):
    data = artifact.to_bytes()
    other = bytearray(data)
    other[:8] = b"NOTRVK\0\0"
    newer = bytearray(data)
    struct.pack_into("<I", newer, 8, VERSION + 1)
    count = bytearray(data)
    struct.pack_into("<I", count, 12, 4)
    # a byte of the zero padding between two sections made non-zero (whichever gap has padding:
    # how long each section is depends on the program)
    sections = [struct.unpack_from("<QQ", data, 16 + 24 * i) for i in range(struct.unpack_from("<I", data, 12)[0])]
    gaps = [end for (o, n), (nxt, _) in zip(sections, sections[1:]) for end in [o + n] if nxt > end]
    padding = bytearray(data)
    if gaps:  # (every section's length a multiple of 16 would leave none: then that case is not made)
        padding[gaps[0]] = 1
    for bad in (other, newer, count, *([padding] if gaps else []), bytearray(data) + b"\0"):
        assert native_error(bytes(bad)) == python_error(bytes(bad))


def test_a_missing_file(native_build, tmp_path):
    with pytest.raises(ArtifactError, match="nope.rvk: cannot read"):
        load(str(tmp_path / "nope.rvk"), device="pocl")


@pytest.mark.parametrize("case", sorted(CASES))
def test_crc_valid_but_inconsistent_programs(native_build, artifact, case):
    change, pattern = CASES[case]
    data = damaged_bytes(artifact, change)
    message = native_error(data)
    assert re.search(pattern, message) and message.startswith("artifact: invalid program: ")


def test_missing_constant_data(native_build):
    artifact = relax_vk.build(build_example("residual")).artifact()
    constants = dict(artifact.constants)
    del constants[sorted(constants)[0]]
    data = Artifact(artifact.program, artifact.source, constants).to_bytes()
    assert re.search(r"constant tensor \d+ \(.*\) has no data", native_error(data))


STORAGE_CASES = {
    "an allocation that does not exist": lambda p: p["tensors"][1].update(storage=len(p["storage"])),
    "a misaligned arena offset": lambda p: next(t for t in p["tensors"] if not t["image"]).update(offset=3),
    "a texture in a buffer allocation": lambda p: next(t for t in p["tensors"] if t["image"]).update(
        storage=next(t["storage"] for t in p["tensors"] if not t["image"])),
    "an input sharing an allocation": lambda p: p["tensors"][p["inputs"][0]].update(storage=p["tensors"][p["outputs"][0]]["storage"]),
    "a malformed allocation": lambda p: p["storage"][0].update(bytes=0),
    "a wrong image allocation": lambda p: next(a for a in p["storage"] if a["image"]).update(bytes=12),
    "two live tensors in one allocation": lambda p: [t.update(storage=0, offset=0) for t in p["tensors"] if t["kind"] == "intermediate"],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(STORAGE_CASES))
def test_unsafe_storage_assignments(native_build, artifact, case):
    assert "storage" in artifact.program
    data = damaged_bytes(artifact, STORAGE_CASES[case])
    message = native_error(data)
    assert message.startswith("artifact: invalid program: storage assignment: ")


@pytest.mark.parametrize("text", [
    b"", b"{", b"[1, 2", b'{"format": "relax_vk.program"', b"\x00", b"{\"a\": 1}}", b"[" * 100000 + b"]" * 100000,
    b'{"a": 123456789012345678901234567890}', b'{"a": "\\ud800"}', b'"\\x"', b"nul", b"\xff\xfe", b"\xed\xa0\x80",
    b"{\"format\": \"relax_vk.program\", \"target\": \"opencl\", \"tensors\": 5}",
    b"{\"format\": \"relax_vk.program\", \"target\": \"opencl\", \"tensors\": [], \"kernels\": [], \"steps\": [], \"inputs\": [], \"outputs\": []}",
    b"{\"constants\": [{\"name\": \"t0\", \"offset\": -16, \"nbytes\": 4, \"dtype\": \"float32\", \"shape\": [1]}]}",
    b"{\"constants\": [{\"name\": \"t0\", \"offset\": 0, \"nbytes\": 99999999999, \"dtype\": \"float32\", \"shape\": [1]}]}",
    b"{\"constants\": [{\"name\": \"t0\", \"offset\": 0, \"nbytes\": 4, \"dtype\": \"float32\", \"shape\": [9223372036854775807, 2]}]}",
    b"{\"constants\": 7}",
], ids=lambda text: repr(text[:48]))  # fmt: skip  (a short id: pytest puts it in $PYTEST_CURRENT_TEST, which a 200 KB one made too long for a subprocess's environment)
def test_hostile_program_sections_are_refused(native_build, artifact, text):
    data = with_program_section(artifact.to_bytes(), text)
    message = native_error(data)
    assert message.startswith("artifact: ") and len(message) > len("artifact: ")


def test_huge_shapes_do_not_overflow(native_build, artifact):
    def change(p):
        p["tensors"][1].update(shape=[2**40, 2**40, 4], bytes=16)

    assert "too large" in native_error(damaged_bytes(artifact, change))


def test_a_grid_past_32_bit_indices_is_refused(native_build, artifact):
    """A CRC-valid program whose kernel launches 2**40 work items along x (pocl aborted in its
    scheduler) is refused by name on OpenCL, as on Vulkan."""
    from relax_vk.runtime import DeviceLimitError

    def change(p):
        p["kernels"][0]["global"][0] = 2**40

    with pytest.raises(DeviceLimitError, match=r"kernel \S+: 1099511627776 work items along x > 2147483647"):
        load(damaged_bytes(artifact, change), device="pocl")


def test_a_valid_artifact_loads(native_build, artifact):
    session = load(artifact, device="pocl")
    assert [i["name"] for i in session.inputs] == [artifact.program["tensors"][t]["name"] for t in artifact.program["inputs"]]
    assert json.loads(json.dumps(session.outputs))[0]["shape"] == artifact.program["tensors"][artifact.program["outputs"][0]]["shape"]


def _launch_with_image_arg(p):
    tensors = p["tensors"]
    return next(s for s in p["steps"] if s["op"] == "launch" and any(tensors[a]["image"] for a in s["args"]))


def _rewire_to_buffer(p):
    step = _launch_with_image_arg(p)
    i = next(i for i, a in enumerate(step["args"]) if p["tensors"][a]["image"])
    for sc in step.get("scalars", []):  # (its origin argument, if any, an integer like any other)
        if sc.get("origin") == step["args"][i]:
            del sc["origin"]
            sc["value"] = 0
    step["args"][i] = next(t["id"] for t in p["tensors"] if not t["image"])


@pytest.mark.parametrize("change, message", [
    (_rewire_to_buffer, r"step \d+ \(\w+\) passes tensor \S+ as parameter \d+: a buffer for an image parameter"),
    (lambda p: _launch_with_image_arg(p)["args"].append(0), r"step \d+ \(\w+\) passes \d+ tensors; the kernel takes \d+ parameters"),
])  # fmt: skip
def test_launches_are_checked_against_the_kernel_declarations(native_build, artifact, change, message):
    """Every launch binds what its kernel's declaration takes (a buffer bound to an image parameter
    crashed pocl inside clEnqueueNDRangeKernel before the validator made this check)."""
    data = damaged_bytes(artifact, change)
    assert re.search(message, native_error(data))


def test_a_kernel_entry_must_be_a_function_of_the_source(native_build, artifact):
    """A kernel that runs another's function (relax_vk.codegen.shared_kernels) names one the
    OpenCL source defines."""
    data = damaged_bytes(artifact, lambda p: p["kernels"][0].__setitem__("entry", "no_such_kernel"))
    assert re.search(r"kernel \w+ \(function no_such_kernel\) is not in the OpenCL source", native_error(data))
    data = damaged_bytes(artifact, lambda p: p["kernels"][0].__setitem__("entry", 7))
    assert re.search(r"kernel \w+: entry 7 is not a function name", native_error(data))


def _set_binding(kernel: int, position: int, kind):
    return lambda p: p["kernels"][kernel]["bindings"].__setitem__(position, kind)


#: CRC-valid Vulkan programs whose kernels, bindings and shaders disagree (no validator can tell: the
#: device's shader compiler and binding checks do, at load): a clear error in both runtimes
VULKAN_CASES = {
    "fewer bindings": (lambda p: p["kernels"][-1]["bindings"].pop(), None),
    "more bindings": (lambda p: p["kernels"][-1]["bindings"].append("buffer"), None),
    "a texture binding for a buffer": (lambda p: p["kernels"][-1]["bindings"].__setitem__(
        p["kernels"][-1]["bindings"].index("buffer_read"), "texture"), None),  # fmt: skip
    "an unknown binding kind": (_set_binding(0, 0, "sampler"), None),
    "a binding kind that is no string": (_set_binding(0, 0, 5), None),
    "another kernel's shader": (lambda p: p["kernels"][0].__setitem__("shader", dict(p["kernels"][-1]["shader"])), None),
    "WGSL the device rejects": (lambda p: None, lambda source: source.replace("textureStore", "textureStorX")),
}


@pytest.fixture(scope="module")
def vulkan_artifact():
    return relax_vk.build(build_example("conv-relu-pool"), target="vulkan").artifact()


@pytest.mark.parametrize("case", sorted(VULKAN_CASES))
def test_inconsistent_vulkan_programs_fail_as_in_python(native_build, vulkan_artifact, case):
    """The same exception family as the Python Vulkan runtime (a ShaderError naming the same kernel,
    or a ValueError) and never a crash (wgpu-native's default handler would abort the process)."""
    from relax_vk.runtime import load
    from relax_vk.runtime import ShaderError

    change, source = VULKAN_CASES[case]
    program = copy.deepcopy(vulkan_artifact.program)
    change(program)
    text = source(vulkan_artifact.source) if source else vulkan_artifact.source
    data = Artifact(program, text, dict(vulkan_artifact.constants)).to_bytes()
    with pytest.raises((ShaderError, ValueError)) as python_error:
        load(Artifact.from_bytes(data), device="lavapipe")
    with pytest.raises((ShaderError, ValueError)) as native_error:
        load(data, device="lavapipe")
    if isinstance(python_error.value, ShaderError):
        assert isinstance(native_error.value, ShaderError)
        assert str(native_error.value).splitlines()[0] == str(python_error.value).splitlines()[0]  # the same kernel
    else:
        assert isinstance(native_error.value, ValueError) and str(native_error.value)
