"""Run one random graph through a front door, relax_vk and a device, and classify the result.

Outcomes (:data:`STATUSES`), each a statement about relax_vk:

* ``ok`` -- the device output matches PyTorch eager;
* ``miscompile`` -- it runs, its output differs from PyTorch's, and TVM's own llvm build of the
  imported module does not explain it (that build agrees with PyTorch, differs from the device
  too, or cannot run): wrong numbers, the worst bug;
* ``crash`` -- an exception raised in relax_vk's code at any stage, its front doors included (its
  converters called back by TVM's importer, its fix-up passes), and TVM code relax_vk called
  (a pass, an op constructor): anything but a clear error;
* ``clear-error`` -- relax_vk refused the model on purpose with an
  :class:`~relax_vk.core.errors.UnsupportedError` or :class:`~relax_vk.core.errors.LimitError` that
  names what it cannot do;
* ``reference-disagrees`` -- the device output differs from PyTorch's, and so does TVM's own llvm
  build of the imported module, which the device output matches: TVM's import, not relax_vk, is wrong;
* ``frontend`` -- the model's exporter (``torch.export``, the ONNX exporter, PyTorch eager) or TVM's
  importer refused it: not relax_vk's code.

``run_time_dims=True`` imports the graph with its height and width as run-time dims (``torch.export``'s
``Dim``, ONNX's dynamic axes and ``dims=``), builds one artifact over the range from the example's
size to the largest size tried, and runs it at each size that PyTorch eager runs (:func:`sizes_to_try`):
``ok`` only when every size matches. A graph whose parameters fix its size (PyTorch runs no other
size) is ``frontend``: nothing of relax_vk's is tried.

Who raised an exception is read from its traceback (:mod:`.blame`), not from its class or message:
relax_vk's front doors word an importer's failure as a clear error even when the code that failed
was their own. :attr:`Outcome.origin` names the owner (``relax_vk``, ``tvm-importer``, ``torch``,
``onnx``, ``harness``).
"""

from __future__ import annotations

import os
import tempfile
import traceback
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from .blame import blame
from .graph import GraphSpec, to_torch

STATUSES = ("ok", "miscompile", "crash", "clear-error", "frontend", "reference-disagrees")
FRONT_DOORS = ("torch", "onnx")
BACKENDS = ("opencl", "vulkan")
DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}


@dataclass
class Outcome:
    status: str
    front_door: str
    backend: str
    detail: str = ""
    max_err: Optional[float] = None
    stage: str = ""
    extra: dict = field(default_factory=dict)
    origin: str = ""  # who raised the exception, for a failed stage (:func:`.blame.origin`)

    def to_json(self) -> dict:
        return {"status": self.status, "front_door": self.front_door, "backend": self.backend, "stage": self.stage,
                "detail": self.detail, "max_err": self.max_err, "origin": self.origin}  # fmt: skip


def close_enough(out: np.ndarray, ref: np.ndarray) -> bool:
    """Elementwise ``|out - ref| <= 1e-3 * (|ref| + mean|ref|) + 1e-5``: relative to each element
    and to the tensor's scale, so float32 summation order passes and gross errors never do."""
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return False
    if not np.all(np.isfinite(out) == np.isfinite(ref)):
        return False
    finite = np.isfinite(ref)
    o, r = out[finite], ref[finite]
    if r.size == 0:
        return True
    return bool(np.all(np.abs(o - r) <= 1e-3 * (np.abs(r) + np.mean(np.abs(r))) + 1e-5))


def max_error(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> float:
    errs = [float(np.max(np.abs(np.asarray(o, np.float64) - np.asarray(r, np.float64)))) for o, r in zip(outs, refs) if np.shape(o) == np.shape(r)]
    return max(errs) if errs else float("inf")


def _short(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    return text.splitlines()[0][:400] if "\n" in text else text[:400]


def _failed(outcome, stage: str, err: BaseException) -> "Outcome":
    """The outcome of an exception caught at ``stage``, classified by who raised it."""
    status, where = blame(err)
    extra = {"traceback": "".join(traceback.format_exception(err, limit=-8))} if status == "crash" else {}
    return outcome(status, stage=stage, detail=_short(err), origin=where, extra=extra)


def import_model(spec: GraphSpec, front_door: str, opset: int = 17, dims: Optional[dict] = None):
    """``(Relax module, torch module, example input)`` through ``front_door``; ``dims``: ``{"H":
    (min, max), "W": (min, max)}``, the input's height and width as run-time dims over those ranges."""
    import torch

    from ...frontends import from_onnx, from_torch

    model, example = to_torch(spec)
    if front_door == "torch":
        if dims is None:
            return from_torch(model, (example,)), model, example
        axes = {axis: torch.export.Dim(name, min=lo, max=hi) for axis, (name, (lo, hi)) in zip((2, 3), dims.items())}
        return from_torch(model, (example,), dynamic_shapes=(axes,)), model, example
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        with torch.no_grad():
            axes = {"x": {axis: name for axis, name in zip((2, 3), dims)}} if dims else None
            torch.onnx.export(model, (example,), path, dynamo=False, opset_version=opset, input_names=["x"], dynamic_axes=axes)
        return from_onnx(path, dims=dims), model, example


def sizes_to_try(model, example) -> List[tuple]:
    """The input sizes a run-time-dims run tries: the example's, then larger ones (a larger map
    never breaks a conv's or pool's window) that PyTorch eager runs."""
    import torch

    n, c, h, w = example.shape
    sizes = []
    for size in ((h, w), (h + 3, w + 5), (2 * h + 1, 2 * w)):
        try:
            with torch.no_grad():
                model(torch.zeros(n, c, *size))
        except Exception:  # (parameters of the example's size: this size is not the graph's)
            continue
        sizes.append(size)
    return sizes


def _inputs(example, size, index: int):
    import torch

    gen = torch.Generator().manual_seed(1000 + index)
    return torch.randn(example.shape[0], example.shape[1], *size, generator=gen)


#: the cut-down device limits of ``--limits cut``: images of 256 texels and 64 layers, 1 MiB buffer
#: bindings, 256 workgroups per grid axis (splits, folds and re-plans all happen on small graphs)
CUT_LIMITS = {"spatial_limit": 256, "depth_limit": 64, "max_buffer_bytes": 1 << 20, "max_workgroups": 256}


def make_target(backend: str, limits: Optional[dict] = None):
    from ...core import target

    make = target.opencl if backend == "opencl" else target.vulkan
    return make(**(limits or {}))


def run_spec(
    spec: GraphSpec, front_door: str = "torch", backend: str = "opencl", device: Optional[str] = None, opset: int = 17,
    limits: Optional[dict] = None, run_time_dims: bool = False,
) -> Outcome:
    """Run ``spec`` once, for the default device limits or ``limits`` (keyword arguments of the
    target constructors, e.g. :data:`CUT_LIMITS`), at the example's size or (``run_time_dims``)
    from one artifact at several sizes; see the module docstring for the outcomes."""
    import warnings

    import torch

    from ...compiler import build
    from ...runtime import load

    warnings.filterwarnings("ignore")
    outcome = lambda status, **kw: Outcome(status, front_door, backend, **kw)  # noqa: E731
    try:
        dims, sizes = None, None
        if run_time_dims:
            model, example = to_torch(spec)
            sizes = sizes_to_try(model, example)
            if len(sizes) < 2:
                return outcome("frontend", stage="import", detail="the graph's parameters fix its size: PyTorch runs no other", origin="torch")
            dims = {"H": (sizes[0][0], max(h for h, _ in sizes)), "W": (sizes[0][1], max(w for _, w in sizes))}
        mod, model, example = import_model(spec, front_door, opset, dims)
        cases = [example] if sizes is None else [_inputs(example, size, i) for i, size in enumerate(sizes)]
        with torch.no_grad():
            expected = [_flat(model(x)) for x in cases]
    except Exception as err:  # the exporters' and TVM's importers' failures are not relax_vk's; its front doors' are
        return _failed(outcome, "import", err)
    stage = "build"
    try:
        compiled = build(mod, target=make_target(backend, limits))
        stage = "export"
        artifact = compiled.artifact()
        stage = "load"
        session = load(artifact, device=device or DEVICES[backend])
        stage = "run"
        results = [session.run([x.numpy()]) for x in cases]
    except Exception as err:
        return _failed(outcome, stage, err)
    errors = [max_error(o, e) for o, e in zip(results, expected)]
    wrong = [i for i, (o, e) in enumerate(zip(results, expected)) if not _agree(o, e)]
    if not wrong:
        return outcome("ok", max_err=max(errors))
    at = "" if sizes is None else f" at {sizes[wrong[0]][0]}x{sizes[wrong[0]][1]}"
    return _judge(outcome, mod, cases[wrong[0]], results[wrong[0]], expected[wrong[0]], errors[wrong[0]], at)


def _agree(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> bool:
    """As many outputs as references, each :func:`close_enough` to its own."""
    return len(outs) == len(refs) and all(close_enough(o, r) for o, r in zip(outs, refs))


def _flat(value) -> List[np.ndarray]:
    return [v.numpy() for v in (value if isinstance(value, tuple) else (value,))]


def _judge(outcome, mod, x, outputs, expected, err: float, at: str) -> Outcome:
    """``miscompile`` or ``reference-disagrees`` for a run whose output differs from PyTorch's, by
    TVM's own llvm build of the imported module at the same input."""
    from ...analysis.reference import run_on_cpu

    try:
        reference = run_on_cpu(mod, [x.numpy()])
    except Exception as ref_err:  # no witness that the import is wrong: the numbers differ from PyTorch's
        return outcome("miscompile", stage="reference", detail=f"max abs error {err:.3g} vs PyTorch{at}; TVM's llvm build failed: {_short(ref_err)}",
                       max_err=err)  # fmt: skip
    if _agree(outputs, reference) and not _agree(reference, expected):
        return outcome("reference-disagrees", stage="compare", detail=f"TVM's import disagrees with PyTorch{at}; relax_vk matches TVM llvm", max_err=err)
    return outcome("miscompile", stage="compare", detail=f"max abs error {err:.3g} vs PyTorch{at}", max_err=err)


def combinations(seed: int, front_doors: Sequence[str], backends: Sequence[str]) -> List[tuple]:
    """The (front door, backend, opset) runs of one seed. With more than one of each, a seed runs
    one combination chosen from it (all combinations are covered across seeds); a single front
    door or backend runs as given."""
    import random

    rng = random.Random(seed * 7919 + 1)
    opset = rng.choice((11, 12, 13, 15, 17))
    pairs = [(f, b) for f in front_doors for b in backends]
    if len(pairs) > 1:
        pairs = [pairs[seed % len(pairs)]]
    return [(f, b, opset) for f, b in pairs]
