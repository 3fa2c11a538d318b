"""Whose fault an exception is: relax_vk's, or a model's exporter's / TVM's importer's.

The fuzzer's classes (:mod:`.runner`) hang on this. An exception is attributed by where it was
raised, not by its class or its message: relax_vk's front doors wrap whatever the importer raises
in a clear error ("TVM's PyTorch frontend failed: ...") even when the code that failed was one of
relax_vk's own converters, called back by TVM's importer.

:func:`origin` follows an exception to its root (``__cause__``, else ``__context__``, which
``raise ... from None`` keeps) and reads the root's traceback from the innermost frame outwards;
the first frame that belongs to one of the owners below decides:

* ``relax_vk`` -- relax_vk's package (front doors, converters, passes, runtime);
* ``harness`` -- the fuzzer itself (:mod:`relax_vk.testing.fuzz`: its graph generator and runner);
* ``tvm-importer`` -- TVM's model importers (``tvm/relax/frontend``);
* ``torch`` -- PyTorch (``torch.export``, the ONNX exporter, eager execution);
* ``onnx`` -- the ``onnx`` / ``onnxscript`` / ``onnxslim`` packages (checker, exporter, optimizer).

Frames of the rest of TVM (op constructors, the block builder, passes, tvm-ffi, C++) and of
anything else (numpy, the standard library, a test) belong to no one: an error raised there is the
fault of the owner that called it, so a TVM error in a pass relax_vk runs is relax_vk's, and one in
an op TVM's importer builds is the importer's. A root with no owned frame is ``unknown``.

:func:`blame` turns the origin into a fuzz status: ``frontend`` for an exporter or TVM's importer;
``clear-error`` for an :class:`~relax_vk.core.errors.UnsupportedError` /
:class:`~relax_vk.core.errors.LimitError` relax_vk raised on purpose (the root itself is one, or
relax_vk caught its own exception to refuse the input, without an importer or exporter in
between); ``crash`` for everything else raised in relax_vk's (or the harness's) code.
"""

from __future__ import annotations

import importlib.util
import os
import traceback
from functools import lru_cache
from typing import Dict, Optional, Tuple

from ...core.errors import LimitError, UnsupportedError

#: owners whose failures are not relax_vk's: the model's exporters and TVM's importers
FOREIGN = ("tvm-importer", "torch", "onnx")
_CLEAR = (UnsupportedError, LimitError)


def _package_dir(name: str) -> Optional[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(getattr(spec, "submodule_search_locations", None) or []) if spec is not None else []
    return os.path.realpath(locations[0]) + os.sep if locations else None


@lru_cache(maxsize=1)
def _owners() -> Tuple[Tuple[str, str], ...]:
    """(directory prefix, owner), the most specific directories first."""
    here = os.path.realpath(os.path.dirname(__file__)) + os.sep
    relax_vk = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..")) + os.sep
    table: Dict[str, str] = {here: "harness", relax_vk: "relax_vk"}
    tvm = _package_dir("tvm")
    if tvm:
        table[os.path.join(tvm, "relax", "frontend") + os.sep] = "tvm-importer"
    for package, owner in (("torch", "torch"), ("onnx", "onnx"), ("onnxscript", "onnx"), ("onnxslim", "onnx")):
        where = _package_dir(package)
        if where:
            table[where] = owner
    return tuple(sorted(table.items(), key=lambda item: -len(item[0])))


def owner_of(filename: str) -> Optional[str]:
    """The owner of a source file (module docstring), or None when it belongs to no one."""
    if not filename or filename.startswith("<"):
        return None
    path = os.path.realpath(filename)
    for prefix, owner in _owners():
        if path.startswith(prefix):
            return owner
    return None


def root_of(err: BaseException) -> BaseException:
    """The exception at the bottom of ``err``'s chain (what was raised first)."""
    seen = {id(err)}
    while True:
        below = err.__cause__ if err.__cause__ is not None else err.__context__
        if below is None or id(below) in seen:
            return err
        seen.add(id(below))
        err = below


def _frame_owners(err: BaseException) -> list:
    """The owners of ``err``'s traceback frames, outermost first (None: no one's)."""
    return [owner_of(frame.filename) for frame in traceback.extract_tb(err.__traceback__)]


def origin(err: BaseException) -> str:
    """Who raised ``err``: the owner of the innermost owned frame of its root (module docstring)."""
    for owner in reversed(_frame_owners(root_of(err))):
        if owner is not None:
            return owner
    return "unknown"


def blame(err: BaseException) -> Tuple[str, str]:
    """``(status, origin)`` of an exception the fuzzer caught: ``frontend``, ``clear-error`` or
    ``crash`` (module docstring)."""
    root = root_of(err)
    where = origin(err)
    if where in FOREIGN:
        return "frontend", where
    if isinstance(root, _CLEAR):
        return "clear-error", where
    if isinstance(err, _CLEAR) and not any(owner in FOREIGN for owner in _frame_owners(root)):
        return "clear-error", where  # relax_vk caught an exception of its own to refuse the input
    return "crash", where
