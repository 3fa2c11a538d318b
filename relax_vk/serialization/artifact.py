"""The ``.rvk`` artifact: one file holding a lowered model (after ExecuTorch's ``preprocess``).

Layout (little endian)::

    offset 0   magic            8 bytes  b"RELAXVK\\0"
           8   version          u32
          12   section count    u32      (3)
          16   sections         3 x (offset u64, size u64, crc32 u32, reserved u32)
          88   ...              program JSON | kernel source (UTF-8) | constants (16-byte aligned)

The program JSON describes tensors (shape, dtype, scope, image extents, kind), kernels (name,
launch geometry; on OpenCL an optional ``"entry"``, the function of the source the kernel runs when
kernels share one: :mod:`relax_vk.codegen.shared_kernels`), the ordered steps (kernel launches, scope copies, aliases; a launch may name the
model ops it computes, ``"ops"``: :mod:`relax_vk.core.provenance`) and the inputs and outputs;
with run-time dims, ``"dims"`` (name, min, max), each such tensor's ``"shape_expr"`` and the
launches' ``"scalars"`` and ``"global"`` as integer expressions (:mod:`relax_vk.codegen.run_time_shapes`), and a
Vulkan launch's ``"loop_iterations"``, one invocation's loop count where it depends on the dims and may pass
llvmpipe's cap (its kernel's, ``"loop_iterations"``, where that is a constant past it);
with states, ``"states"``: ``{"tensor": input, "update": output, "offset": rows}`` each
(:mod:`relax_vk.core.states`). A folded activation texture (:mod:`relax_vk.codegen.texture_origins`)
has ``"origin": [x0, y0]`` in its allocation's image and its folded ``"image"`` ``[W, w h layers /
W, 1]``, ``W`` a power of two times or a power of two into ``w`` (:func:`relax_vk.core.scope.folded_width`); a launch passes it as a scalar ``{"index", "dtype", "origin": tensor}`` whose value the
runtime computes from the tensor (``y0 << 16 | x0``). Constants live in the last section; each constant's offset is a multiple of 16.
Loading checks the magic, the version, that the sections lie inside the file in order with
zero padding between them and nothing after, each section's CRC32, and that every constant lies
inside the constant section, and refuses anything else with an
:class:`ArtifactError` that says what is wrong. Whether the program itself is complete and
consistent (tensors, kernels, launches, storage) is checked by the native library, the one
validator, at every load or by :func:`relax_vk.runtime.validate`. Writing is atomic (a temporary file renamed into
place), so a failed export never leaves a half-written file. Needs only the standard library and
numpy: this module must stay importable without TVM.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

from ..core.errors import UnsupportedError
from ..core.files import replace_with_file

MAGIC = b"RELAXVK\0"
VERSION = 2  # 2: a Vulkan kernel's integer arguments are one uniform block ("uniforms"), not a binding each
ALIGN = 16
_HEADER = struct.Struct("<8sII")
_SECTION = struct.Struct("<QQII")
SECTIONS = ("program", "source", "constants")
HEADER_SIZE = _HEADER.size + _SECTION.size * len(SECTIONS)


class ArtifactError(UnsupportedError):
    """A file is not a valid relax_vk artifact (truncated, corrupted, wrong version, ...)."""


@dataclass
class Artifact:
    """A lowered model: the program description, the OpenCL source and the constant bytes."""

    program: dict
    source: str
    constants: Dict[str, np.ndarray] = field(default_factory=dict)

    # ------------------------------------------------------------------ write
    def to_bytes(self) -> bytes:
        program = dict(self.program)
        blob = bytearray()
        table: List[dict] = []
        for name in sorted(self.constants):
            array = np.ascontiguousarray(self.constants[name]).reshape(np.shape(self.constants[name]))  # (a 0-d constant stays 0-d)
            pad = (-len(blob)) % ALIGN
            blob += b"\0" * pad
            table.append({"name": name, "offset": len(blob), "nbytes": array.nbytes, "dtype": str(array.dtype), "shape": list(array.shape)})
            blob += array.tobytes()
        program["constants"] = table
        sections = [json.dumps(program, sort_keys=True).encode(), self.source.encode(), bytes(blob)]
        out = bytearray(HEADER_SIZE)
        offset = HEADER_SIZE
        entries = []
        for data in sections:
            offset += (-offset) % ALIGN
            entries.append((offset, len(data), zlib.crc32(data) & 0xFFFFFFFF, 0))
            offset += len(data)
        _HEADER.pack_into(out, 0, MAGIC, VERSION, len(sections))
        for i, entry in enumerate(entries):
            _SECTION.pack_into(out, _HEADER.size + i * _SECTION.size, *entry)
        for (start, _, _, _), data in zip(entries, sections):
            out += b"\0" * (start - len(out))
            out += data
        return bytes(out)

    def write(self, path: str) -> None:
        """Write atomically: a temporary file in the same folder, then renamed over ``path``."""
        data = self.to_bytes()
        folder = os.path.dirname(os.path.abspath(path)) or "."
        fd, tmp = tempfile.mkstemp(prefix=".rvk-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            replace_with_file(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    # ------------------------------------------------------------------- read
    @staticmethod
    def from_bytes(data: bytes, what: str = "artifact") -> "Artifact":
        if len(data) < HEADER_SIZE:
            raise ArtifactError(f"{what}: truncated: {len(data)} bytes, the header alone is {HEADER_SIZE}")
        magic, version, count = _HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise ArtifactError(f"{what}: not a relax_vk artifact (magic {magic!r}, expected {MAGIC!r})")
        if version != VERSION:
            raise ArtifactError(f"{what}: format version {version}, this relax_vk reads version {VERSION}; rebuild the model")
        if count != len(SECTIONS):
            raise ArtifactError(f"{what}: {count} sections, expected {len(SECTIONS)}")
        parts = []
        end = HEADER_SIZE
        for i, name in enumerate(SECTIONS):
            offset, size, crc, _ = _SECTION.unpack_from(data, _HEADER.size + i * _SECTION.size)
            if offset < end or offset + size > len(data):
                raise ArtifactError(
                    f"{what}: section '{name}' [{offset}, {offset + size}) lies outside the file ({len(data)} bytes): truncated?"
                )
            if any(data[end:offset]):
                raise ArtifactError(f"{what}: padding before section '{name}' is corrupted (not zero)")
            end = offset + size
            part = data[offset : offset + size]
            if zlib.crc32(part) & 0xFFFFFFFF != crc:
                raise ArtifactError(f"{what}: section '{name}' is corrupted (CRC32 mismatch)")
            parts.append(part)
        if len(data) != end:
            raise ArtifactError(f"{what}: {len(data) - end} unexpected bytes after the last section")
        try:
            program = json.loads(parts[0].decode())
            source = parts[1].decode()
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ArtifactError(f"{what}: unreadable program section: {err}") from None
        constants = {}
        blob = parts[2]
        for entry in program.get("constants", []):
            start, nbytes = int(entry["offset"]), int(entry["nbytes"])
            if start % ALIGN or start + nbytes > len(blob):
                raise ArtifactError(f"{what}: constant {entry['name']} at [{start}, {start + nbytes}) is misaligned or outside its section")
            array = np.frombuffer(blob, dtype=entry["dtype"], count=nbytes // np.dtype(entry["dtype"]).itemsize, offset=start)
            constants[entry["name"]] = array.reshape(entry["shape"])
        return Artifact(program, source, constants)

    @staticmethod
    def read_program(path: str) -> dict:
        """The program section of the artifact at ``path`` alone (its bounds and CRC checked, the
        JSON parsed), without reading the source or the constants or validating: for a caller that
        has the whole artifact validated elsewhere (a runtime session, whose library read and
        validated the same file). Raises :class:`ArtifactError` as :meth:`read` does."""
        try:
            with open(path, "rb") as f:
                head = f.read(HEADER_SIZE)
                if len(head) < HEADER_SIZE:
                    raise ArtifactError(f"{path}: truncated: {len(head)} bytes, the header alone is {HEADER_SIZE}")
                magic, version, count = _HEADER.unpack_from(head, 0)
                if magic != MAGIC or version != VERSION or count != len(SECTIONS):
                    return Artifact.read(path).program  # (read() names what is wrong)
                offset, size, crc, _ = _SECTION.unpack_from(head, _HEADER.size)
                f.seek(offset)
                part = f.read(size)
        except OSError as err:
            raise ArtifactError(f"{path}: cannot read: {err}") from None
        if len(part) != size or zlib.crc32(part) & 0xFFFFFFFF != crc:
            return Artifact.read(path).program
        try:
            return json.loads(part.decode())
        except (UnicodeDecodeError, json.JSONDecodeError):
            return Artifact.read(path).program

    @staticmethod
    def read(path: str) -> "Artifact":
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise ArtifactError(f"{path}: cannot read: {err}") from None
        return Artifact.from_bytes(data, path)


#: the constant holding variant ``i``'s artifact (:func:`with_variants`)
VARIANT_CONSTANT = "variant{}"


def with_variants(generic: Artifact, variants: List[tuple]) -> Artifact:
    """``generic`` (a program with run-time dims) carrying ``variants``: ``(dims, artifact)`` pairs,
    each a complete artifact of the same model with every dim fixed to ``dims`` (``{name: value}``,
    one per dim of ``generic``; :mod:`relax_vk.codegen.shape_variants`). Each variant's bytes are a
    ``uint8`` constant (:data:`VARIANT_CONSTANT`) and ``program["variants"]`` lists ``{"dims",
    "constant"}``: a session runs a variant where a run's dims equal its ``dims`` (the native
    library checks that its inputs and outputs are the generic program's at those dims)."""
    names = [d["name"] for d in generic.program.get("dims", [])]
    if not names:
        raise ValueError("shape variants need a program with run-time dims")
    if generic.program.get("states"):
        raise ValueError("a program with states (a decoder's cache) takes no shape variants: its states live in one program's storage")
    program, constants, table, seen = dict(generic.program), dict(generic.constants), [], set()
    for i, (dims, artifact) in enumerate(variants):
        if sorted(dims) != sorted(names):
            raise ValueError(f"variant {dims}: give each of the dims {', '.join(names)} one value")
        key = tuple(int(dims[n]) for n in names)
        if key in seen:
            raise ValueError(f"variant {dims} is given twice")
        seen.add(key)
        if artifact.program.get("dims") or artifact.program.get("variants"):
            raise ValueError(f"variant {dims}: its artifact must have every dim fixed and no variants of its own")
        name = VARIANT_CONSTANT.format(i)
        constants[name] = np.frombuffer(artifact.to_bytes(), dtype=np.uint8)
        table.append({"dims": {n: int(dims[n]) for n in names}, "constant": name})
    program["variants"] = table
    return Artifact(program, generic.source, constants)


def variant_artifact(artifact: Artifact, index: int) -> Artifact:
    """Variant ``index`` of ``artifact`` (:func:`with_variants`) as an artifact of its own."""
    entry = artifact.program.get("variants", [])[index]
    return Artifact.from_bytes(artifact.constants[entry["constant"]].tobytes(), f"variant {entry['dims']}")
