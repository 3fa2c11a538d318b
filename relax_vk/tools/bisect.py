"""``relax-vk bisect``: the first op of the user's model whose output the device gets wrong.

The device side runs the model's artifact built without storage reuse (every tensor keeps its
own allocation, so after a run every kernel's output is still there) and reads back the output of
every kernel that computes model ops (``step["ops"]``, :mod:`relax_vk.core.provenance`). A kernel
that computes several fused ops writes only the last one's output (in model order), so that op
stands for the kernel.

The reference is TVM's llvm build of the model as imported (:func:`relax_vk.analysis.reference.reference_outputs`),
its ``main`` made to return the output of every model op (the last binding the op's conversion
made, :data:`~relax_vk.core.provenance.MODEL_OPS_ATTR`), in the model's own layout. A device
tensor in a packed layout is read back into that layout first (:func:`to_model_layout`: ``NCHW4c``
blocks of four channels or packed tokens, padded channels dropped); a tensor in any other layout
is skipped, with the reason, rather than guessed.

The ops are compared in model order; the first one whose largest error exceeds the tolerance is
``first_bad``, with its error, the scope its tensor lives in and the kernel that wrote it. The
tolerance scales with the reference's magnitude: ``rtol * max(1, max |ref|)`` with ``rtol``
1e-4, or 1e-2 for builds that store textures as half texels (``--fp16``: 11 significant bits) or
compute in half (``--fp16-arith``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..analysis.reference import model_outputs, reference_outputs
from ..core.provenance import MODEL_OPS_ATTR
from ..core.states import states_of

FP32_RTOL, FP16_RTOL = 1e-4, 1e-2


@dataclass
class Bisection:
    """What :func:`bisect` found (see the module docstring)."""

    model: str
    backend: str
    device: str
    tolerance: float  # relative to max(1, the reference's largest magnitude)
    compared: List[dict] = field(default_factory=list)  # every op compared, in model order
    skipped: List[dict] = field(default_factory=list)  # ops whose tensor could not be compared (why)
    first_bad: Optional[dict] = None

    @property
    def ok(self) -> bool:
        """Every op output compared matches, and at least one was compared."""
        return self.first_bad is None and bool(self.compared)

    def to_json(self) -> dict:
        """The ``relax-vk bisect --json`` document (README: "bisect --json")."""
        return asdict(self)

    def table(self) -> str:
        lines = [f"{self.model} on {self.device} ({self.backend}): {len(self.compared)} op outputs compared with TVM llvm "
                 f"(tolerance {self.tolerance:g} x max(1, |ref|))"]  # fmt: skip
        lines.append(f"{'op':<40} {'max abs err':>12} {'bound':>10}  {'scope':<16} kernel")
        for r in self.compared:
            mark = "  <-- first bad" if self.first_bad is not None and r["op"] == self.first_bad["op"] else ""
            lines.append(f"{r['op'][:40]:<40} {r['max_abs_err']:>12.3g} {r['bound']:>10.3g}  {r['scope']:<16} {r['kernel'][:50]}{mark}")
        for s in self.skipped:
            lines.append(f"{s['op'][:40]:<40} skipped: {s['why']}")
        if not self.compared:
            lines.append("no op output could be compared: nothing is known to be right")
        elif self.first_bad is None:
            lines.append("every op output compared matches the reference" + (f" ({len(self.skipped)} not compared: above)" if self.skipped else ""))
        else:
            b = self.first_bad
            lines.append(f"first bad op: {b['op']} (max abs err {b['max_abs_err']:.3g}, bound {b['bound']:.3g}, "
                         f"{b['scope']}, kernel {b['kernel']})")  # fmt: skip
        return "\n".join(lines)


def to_model_layout(device: np.ndarray, shape: Sequence[int]) -> Optional[np.ndarray]:
    """A device tensor in the model's ``shape``: the same shape, an ``NCHW4c`` block layout
    (``[N, C/4, H, W, 4]`` for ``[N, C, H, W]``), or the packed token layout (``[1, C/4, 1, M, 4]``
    for ``[..., C]`` with ``M`` rows), padded channels dropped; None when none of these fits (no
    guess: a wrong unpacking would report a healthy op as bad)."""
    shape = tuple(int(d) for d in shape)
    if device.shape == shape:
        return device
    if device.ndim != 5 or device.shape[-1] != 4 or not shape:
        return None
    n, blocks = device.shape[0], device.shape[1]
    if len(shape) == 4 and n == shape[0] and tuple(device.shape[2:4]) == shape[2:] and blocks * 4 >= shape[1] > (blocks - 1) * 4:
        return np.moveaxis(device, -1, 2).reshape((n, blocks * 4) + shape[2:])[:, : shape[1]]
    rows, channels = int(np.prod(shape[:-1])), shape[-1]
    if n == 1 and device.shape[2] == 1 and device.shape[3] == rows and blocks * 4 >= channels > (blocks - 1) * 4:
        tokens = np.moveaxis(device[0, :, 0], 0, 1).reshape(rows, blocks * 4)  # [M, C/4, 4] -> [M, C]
        return tokens[:, :channels].reshape(shape)
    return None


def device_outputs(session) -> List[dict]:
    """After a run of ``session`` (an artifact built without storage reuse): per model op, the
    tensor of the kernel that finishes it, when the op is that kernel's last, ``{"op", "kernel",
    "tid", "scope", "fused"}``, in step order. An op split over kernels (a conv whose bias add is
    fused with the next op) is compared where it ends: not in the kernel that starts it."""
    tensors = session.program["tensors"]
    steps = session.program["steps"]
    last_kernel = {op: k for k, step in enumerate(steps) for op in step.get("ops", [])}  # where each op's computation ends
    found: Dict[str, dict] = {}
    seen = set()
    for k, step in enumerate(steps):
        args = step["args"] if step["op"] == "launch" else [step["src"], step["dst"]]
        # what a step writes: the intermediates no earlier step referenced
        made = [t for t in args if t not in seen and tensors[t]["kind"] == "intermediate"]
        seen.update(args)
        if step["op"] != "launch" or not step.get("ops") or not made:
            continue
        tid = made[-1]
        op = step["ops"][-1]
        if last_kernel[op] != k:  # a later kernel finishes the op (a conv whose bias add runs with the next op)
            continue
        found.pop(op, None)
        found[op] = {"op": op, "kernel": step["kernel"], "tid": tid, "scope": tensors[tid]["scope"], "fused": list(step["ops"])}
    _check_unshared(session.program, [f["tid"] for f in found.values()])
    return list(found.values())


def _check_unshared(program: dict, tids: Sequence[int]) -> None:
    storage = [program["tensors"][t].get("storage") for t in tids]
    if any(s is not None and storage.count(s) > 1 for s in storage):
        raise ValueError("bisect reads every kernel's output after the run: build the artifact without storage reuse "
                         "(CompiledModule.artifact(reuse=False))")  # fmt: skip


def _error(got: np.ndarray, ref: np.ndarray, rtol: float) -> "tuple[float, float]":
    """``(max abs error, bound)`` of a device tensor against its reference."""
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    err = float(np.max(diff)) if diff.size else 0.0
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(ref)):
        err = float("inf")
    return err, rtol * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)


def bisect_session(session, mod, inputs: Sequence[np.ndarray], model: str = "", rtol: Optional[float] = None) -> Bisection:
    """Run ``session`` once on ``inputs`` and compare every model op's output with ``mod`` (the
    model as imported) on the CPU (see the module docstring).

    A kernel's tensor that misses the reference of the op provenance names but matches another
    op's (another op of the kernel first, then any op, in model order) is that op's output: the
    provenance was wrong, not the kernel (the row says ``claimed_op``). A constant reference (every
    value the same: a LayerNorm over one channel is zeros) proves nothing of the kind: stale or
    never-written memory matches it. Only a tensor that matches no other op's non-constant
    reference counts as bad."""
    half = any(t.get("texel") == "float16" for t in session.program["tensors"]) or "arithmetic" in session.program
    rtol = (FP16_RTOL if half else FP32_RTOL) if rtol is None else rtol
    session.run(inputs)
    produced = device_outputs(session)
    order = list(model_outputs(mod))
    reference = reference_outputs(mod, with_states(mod, inputs), order)
    result = Bisection(model=model, backend=session.program.get("target", "opencl"), device=session.device_name, tolerance=rtol)
    rows = []
    for p in produced:
        ref = reference.get(p["op"])
        if ref is None:
            result.skipped.append({"op": p["op"], "why": "no reference tensor (not an op output of the imported model)"})
            continue
        device = session.read_tensor(p["tid"])
        got = to_model_layout(device, ref.shape)
        if got is None:
            shape = session.tensors[p["tid"]]["shape"]
            result.skipped.append({"op": p["op"], "why": f"device shape {shape} does not map to the model's {list(ref.shape)}"})
            continue
        err, bound = _error(got, ref, rtol)
        row = {"op": p["op"], "max_abs_err": err, "bound": bound, "ok": bool(err <= bound), "scope": p["scope"],
               "kernel": p["kernel"], "fused": p["fused"], "shape": list(ref.shape)}  # fmt: skip
        if not row["ok"]:
            others = [o for o in p["fused"] if o != p["op"]] + [o for o in order if o not in p["fused"]]
            for other in others:
                ref_other = reference.get(other)
                if ref_other is None or (ref_other.size and float(np.ptp(ref_other)) == 0.0):
                    continue  # (a constant, zeros above all, is what a kernel that wrote nothing leaves: no evidence)
                got_other = to_model_layout(device, ref_other.shape)
                if got_other is not None and np.all(np.isfinite(got_other)):
                    err_other, bound_other = _error(got_other, ref_other, rtol)
                    if err_other <= bound_other:
                        row.update(op=other, claimed_op=p["op"], max_abs_err=err_other, bound=bound_other, ok=True, shape=list(ref_other.shape))
                        break
        rows.append(row)
    rows.sort(key=lambda r: order.index(r["op"]) if r["op"] in order else len(order))
    # the model's ops no kernel names at all are said so, not left out: a bisection that compared
    # some ops must not read as one that compared every op
    named = {op for step in session.program.get("steps", []) for op in step.get("ops", [])}
    for op in order:
        if op not in named and op in reference:
            result.skipped.append({"op": op, "why": "no kernel of the artifact names it (computed at build time, a view "
                                                   "of another op's output, or its provenance was lost)"})  # fmt: skip
    result.compared = rows
    result.first_bad = next((r for r in rows if not r["ok"]), None)
    return result


def with_states(mod, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """``main``'s arguments for a run of a session on ``inputs``: the caller's inputs, and zeros for
    the states (:mod:`relax_vk.core.states`), as a session holds them after load."""
    states = {s["input"] for s in states_of(mod["main"])}
    if not states:
        return list(inputs)
    given, out = iter(inputs), []
    for p in mod["main"].params:
        if p.name in states:
            out.append(np.zeros([int(d) for d in p.ty.shape.values], dtype=str(p.ty.dtype)))
        else:
            out.append(next(given))
    return out


def bisect(model, inputs: Optional[Sequence[np.ndarray]] = None, device=None, target: str = "opencl", fp16: bool = False,
           artifact=None, rtol: Optional[float] = None) -> Bisection:  # fmt: skip
    """Find the first op of ``model`` (a name or file, or a Relax module as imported) that the
    device computes wrong. ``artifact``: run this build instead of building one (it must keep
    every tensor: ``CompiledModule.artifact(reuse=False)``). See the module docstring."""
    from ..runtime import load
    from .profile import _device, seeded_inputs

    name = model if isinstance(model, str) else "model"
    if isinstance(model, str):
        from ..frontends import load_model

        model, _ = load_model(model)
    if MODEL_OPS_ATTR not in (model["main"].attrs or {}):
        raise ValueError("bisect needs the model's op names: import it with relax_vk.frontends (from_onnx, from_torch, load_model)")
    if artifact is not None and artifact.program.get("target"):
        target = artifact.program["target"]
    dev = _device(target, device)
    if artifact is None:
        artifact = build_unshared(model, target, dev, fp16)
    session = load(artifact, device=dev)
    return bisect_session(session, model, list(inputs) if inputs is not None else seeded_inputs(session), name, rtol)


def build_unshared(mod, target: str = "opencl", device=None, fp16: bool = False, model: Optional[dict] = None):
    """The artifact of ``mod`` for ``target`` (planned for ``device``'s limits), every tensor in
    an allocation of its own (what :func:`bisect` reads back)."""
    from .profile import build_for

    return build_for(mod, target, device, fp16, model).artifact(reuse=False)
