"""``relax-vk profile``: where a model's device time goes, per op of the user's own model.

A session (:mod:`relax_vk.runtime`) times every step of a run on the device (kernel launches and
copies between memory kinds). :func:`profile_session` runs the model ``repeat`` times warm (after
one warm-up run), takes the run whose device span is the median, and reads its steps back to the
model's ops through the provenance the artifact carries (``step["ops"]``,
:mod:`relax_vk.core.provenance`):

* ``device_ms``: that run's device span, first step's start to last step's end (what the device
  timestamps measure: the queue's time on the device, not the host's);
* ``ops``: one row per model op (``kind: "op"``), the time of the kernels that compute it; a
  kernel that computes several model ops (fused) splits its time evenly among them, and each of
  their rows names the others (``fused_with``); kernels the compiler added (layout transforms, the
  slice that drops padded channels: ``kind: "layout"``) and copies between memory kinds
  (``kind: "copy"``) are rows of their own. A step's time is its busy time on the device
  (``busy_ms``) plus the device's idle gap before it, the step's launch gap (the time from the
  previous step's end to its start: the runtime's and driver's cost of starting it; ``idle_ms``
  is their sum, ``kernels[i]["gap_ms"]`` each), so the rows add up to ``device_ms`` exactly;
* ``wall_ms`` (the host's clock around the same run) and ``host_ms = wall_ms - device_ms``: writing
  inputs, launching, reading outputs;
* ``kernels``: every step of that run with its start (the timeline) and its model ops.

:meth:`Profile.plot` draws the top ops and the timeline (matplotlib: the ``notebook`` extra).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..core.extras import require


@dataclass
class Profile:
    """A warm profile of one model on one device (see the module docstring)."""

    model: str
    backend: str
    device: str
    repeat: int
    device_ms: float
    wall_ms: float
    host_ms: float
    ops: List[dict] = field(default_factory=list)
    copies: List[dict] = field(default_factory=list)
    kernels: List[dict] = field(default_factory=list)
    idle_ms: float = 0.0  # the launch gaps, included in the rows' ms (their busy_ms exclude them)
    device_ms_runs: List[float] = field(default_factory=list)

    def to_json(self) -> dict:
        """The ``relax-vk profile --json`` document (README: "profile --json")."""
        return asdict(self)

    def top(self, count: int = 10) -> List[dict]:
        """The ``count`` rows that take the most time."""
        return sorted(self.ops, key=lambda r: -r["ms"])[:count]

    def table(self, count: Optional[int] = None) -> str:
        """A text table: the summary line, then every row (or the ``count`` largest) by time."""
        spread = f"{min(self.device_ms_runs):.3f}-{max(self.device_ms_runs):.3f}" if self.device_ms_runs else "-"
        lines = [
            f"{self.model} on {self.device} ({self.backend}), median of {self.repeat} warm runs: "
            f"device {self.device_ms:.3f} ms (runs {spread}; launch gaps {self.idle_ms:.3f} ms, in the rows), "
            f"wall {self.wall_ms:.3f} ms, host {self.host_ms:.3f} ms",
            f"{'op':<48} {'kind':<6} {'ms':>9} {'%':>6}  fused with / kernels",
        ]
        rows = self.top(count) if count else sorted(self.ops, key=lambda r: -r["ms"])
        for r in rows:
            share = 100.0 * r["ms"] / self.device_ms if self.device_ms > 0 else 0.0
            note = ", ".join(r.get("fused_with") or []) or ", ".join(r.get("kernels") or [])
            lines.append(f"{r['name'][:48]:<48} {r['kind']:<6} {r['ms']:>9.4f} {share:>5.1f}%  {note[:70]}")
        total = sum(r["ms"] for r in self.ops)
        lines.append(f"{'sum of rows':<48} {'':<6} {total:>9.4f} {100.0 * total / self.device_ms if self.device_ms > 0 else 0.0:>5.1f}%")
        return "\n".join(lines)

    def plot(self, path: str, count: int = 15) -> None:
        """Write a PNG: a bar chart of the ``count`` slowest rows and the run's timeline."""
        require("matplotlib", "notebook")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        top = self.top(count)
        fig, (bars, line) = plt.subplots(2, 1, figsize=(11, 3 + 0.3 * len(top)), gridspec_kw={"height_ratios": [max(len(top), 1), 3]})
        colors = {"op": "tab:blue", "layout": "tab:orange", "copy": "tab:red", "idle": "tab:gray"}
        # (the bar of a row: its time with launch gaps; the timeline: busy spans, gaps left blank)
        bars.barh([r["name"][:50] for r in top][::-1], [r["ms"] for r in top][::-1], color=[colors[r["kind"]] for r in top][::-1])
        bars.set_xlabel("ms with launch gaps (fused kernels split evenly among their ops)")
        bars.set_title(f"{self.model} on {self.device}: device {self.device_ms:.3f} ms, host {self.host_ms:.3f} ms")
        for k in self.kernels:
            kind = "copy" if k["kind"] == "copy" else ("op" if k["ops"] else "layout")
            line.barh(0, k["ms"], left=k["start_ms"], color=colors[kind], edgecolor="white", linewidth=0.3)
        line.set_yticks([])
        line.set_xlabel("device timeline of the median run (ms)")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _rows(program: dict, steps: Sequence[dict], span: float) -> "tuple[List[dict], List[dict], List[dict], float]":
    """``(ops, copies, kernels, idle)`` of one run's per-step times (``steps``: a session's
    ``last_profile``, with each step's ``start_ms``) and its device span. A step's time is its
    busy time plus the device's idle gap before it (its launch gap): the rows tile the span."""
    tensors = program["tensors"]
    ops: Dict[str, dict] = {}
    copies: List[dict] = []
    kernels: List[dict] = []
    prev_end = 0.0

    def charge(key: str, row: dict, share: float, total: float, busy: float, kernel: str) -> None:
        row = ops.setdefault(key, row)
        row["ms"] += total * share
        row["busy_ms"] += busy * share
        if kernel not in row["kernels"]:
            row["kernels"].append(kernel)

    for step, timed in zip(program["steps"], steps):
        busy = float(timed["ms"])
        start = float(timed.get("start_ms", prev_end))
        gap = max(start - prev_end, 0.0)
        prev_end = start + busy
        total = busy + gap
        if step["op"] == "copy":
            src, dst = tensors[step["src"]], tensors[step["dst"]]
            row = {"name": timed["name"], "kind": "copy", "ms": total, "busy_ms": busy, "src_scope": src["scope"], "dst_scope": dst["scope"],
                   "bytes": int(src["bytes"])}  # fmt: skip
            copies.append(row)
            ops[f"{timed['name']}#{len(copies)}"] = dict(row, kernels=[])
            kernels.append({"name": timed["name"], "kind": "copy", "ms": busy, "gap_ms": gap, "start_ms": start, "ops": []})
            continue
        names = list(step.get("ops") or [])
        kernels.append({"name": step["kernel"], "kind": "launch", "ms": busy, "gap_ms": gap, "start_ms": start, "ops": names})
        if not names:  # work the compiler added: a row of its own, named after its kernel
            empty = {"name": step["kernel"], "kind": "layout", "ms": 0.0, "busy_ms": 0.0, "kernels": []}
            charge(f"{step['kernel']}#layout", empty, 1.0, total, busy, step["kernel"])
            continue
        for name in names:
            empty = {"name": name, "kind": "op", "ms": 0.0, "busy_ms": 0.0, "kernels": [], "fused_with": []}
            charge(name, empty, 1.0 / len(names), total, busy, step["kernel"])
            ops[name]["fused_with"] += [n for n in names if n != name and n not in ops[name]["fused_with"]]
    rows = list(ops.values())
    rest = span - sum(r["ms"] for r in rows)
    if rest > 1e-9 * max(span, 1.0):  # (a session without step starts: its idle time, unattributed)
        rows.append({"name": "(device idle, unattributed)", "kind": "idle", "ms": rest, "busy_ms": 0.0, "kernels": []})
    idle = max(span - sum(float(t["ms"]) for t in steps), 0.0)
    return rows, copies, kernels, idle


def profile_session(session, inputs: Sequence[np.ndarray], repeat: int = 10, model: str = "") -> Profile:
    """Profile ``session`` (a :class:`relax_vk.runtime.Session` made with profiling on) on
    ``inputs`` (see the module docstring)."""
    if not session.profiling:
        raise ValueError(f"{session.device_name} gives no per-step device times (no timestamp queries): nothing to profile")
    repeat = max(int(repeat), 1)
    session.run(inputs)  # warm-up: pipelines, caches, first-touch allocations
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        session.run(inputs)
        wall = (time.perf_counter() - t0) * 1e3
        steps = [dict(p) for p in session.last_profile]
        # (a program of no steps, outputs that are constants, spans no device time: 0, not NaN,
        # which no JSON reader takes)
        device = float(session.last_device_ms) if steps else 0.0
        runs.append((device, wall, steps))
    spans = [r[0] for r in runs]
    span, wall, steps = sorted(runs, key=lambda r: r[0])[(len(runs) - 1) // 2]  # the median run (the lower one of an even count)
    program = session.last_program  # (a shape variant's steps where one ran)
    rows, copies, kernels, idle = _rows(program, steps, span)
    return Profile(model=model, backend=program.get("target", "opencl"), device=session.device_name, repeat=repeat,
                   device_ms=span, wall_ms=wall, host_ms=max(wall - span, 0.0), ops=rows, copies=copies, kernels=kernels,
                   idle_ms=idle, device_ms_runs=spans)  # fmt: skip


def compile_model(model, target: str = "opencl", device=None, fp16: bool = False):
    """``(artifact, model name)`` of a model given as a name or file (``relax-vk models``; an
    ``.rvk`` is read by :func:`profile`), a Relax module, a :class:`~relax_vk.compiler.CompiledModule` or an artifact, planned for
    ``device``'s limits when one is given."""
    from ..serialization.artifact import Artifact

    if isinstance(model, Artifact):
        return model, _artifact_model(model)
    from ..compiler import CompiledModule

    if isinstance(model, CompiledModule):
        return model.artifact(), _model_name(model.model) or "model"
    name, source = "model", None
    if isinstance(model, str):
        from ..frontends import load_model

        name = model
        model, source = load_model(model)
    return build_for(model, target, device, fp16, source).artifact(), name


def build_for(mod, target: str = "opencl", device=None, fp16: bool = False, model: Optional[dict] = None):
    """``relax_vk.build`` of ``mod`` for ``target``, planned for ``device``'s limits (a
    :class:`relax_vk.runtime.Device`; None: the target's defaults), textures in half texels with ``fp16``."""
    from ..compiler import build
    from ..core import target as _target
    from ..core.limits import of_device
    from ..core.options import ScopeOptions

    limits = None
    if device is not None and not isinstance(device, str):
        limits = of_device(device)
    tgt = (_target.vulkan if target == "vulkan" else _target.opencl)(limits=limits)
    return build(mod, tgt, options=ScopeOptions(precision="fp16" if fp16 else "fp32"), model=model)


def _model_name(source: dict) -> str:
    return str(source.get("example") or source.get("zoo") or source.get("packaged") or source.get("onnx") or source.get("pt2") or "")


def _artifact_model(artifact) -> str:
    return _model_name(artifact.program.get("model", {})) or "model"


def _device(target: str, device):
    """The local device or adapter a spec names (None: the default one)."""
    from ..runtime import select_device

    return select_device(target, device)


def seeded_inputs(session, seed: int = 0) -> List[np.ndarray]:
    """Seeded random inputs of a session's program (the first standard normal, the others scaled
    by 1/sqrt(fan-in), as ``relax-vk run`` makes them; a bool input true where its draw is
    positive, half of it: cast as it was, every entry was true, a key padding mask that masks
    every key; an input that indexes a table, within its rows)."""
    rng = np.random.default_rng(seed)
    arrays = []
    states = {s["tensor"] for s in session.program.get("states", [])}  # (the session holds those)
    for i, tid in enumerate(t for t in session.program["inputs"] if t not in states):
        t = session.tensors[tid]
        fan_in = int(np.prod(t["shape"][1:])) if i > 0 and len(t["shape"]) > 1 else 1
        draw = rng.standard_normal(t["shape"]) / np.sqrt(fan_in)
        dtype = t.get("host_dtype", t["dtype"])
        r = t.get("index_range")
        if r is not None:  # indices of a table: drawn within it (the session refuses the others)
            pairs = np.array(r if isinstance(r[0], list) else [r], dtype=np.int64)
            lo, hi = pairs[:, 0], pairs[:, 1]  # (broadcast over the last axis where a range is per position)
            arrays.append(np.floor(lo + rng.random(t["shape"]) * (hi - lo + 1)).astype(dtype))
            continue
        arrays.append(draw > 0 if dtype == "bool" else draw.astype(dtype))
    return arrays


def profile(model, inputs: Optional[Sequence[np.ndarray]] = None, device=None, target: str = "opencl", repeat: int = 10,
            fp16: bool = False) -> Profile:  # fmt: skip
    """Profile ``model`` (a name or file, a Relax module, a compiled module or an artifact) on
    ``device`` (OpenCL: ``"pocl"``, ``"gpu"``, ``"P:D"``; Vulkan with ``target="vulkan"``:
    ``"lavapipe"``, ``"gpu"``, ``"N"``; or a :class:`relax_vk.runtime.Device`) over ``repeat`` warm
    runs; ``inputs`` default to seeded random ones. See :class:`Profile`."""
    from ..runtime import load
    from ..serialization.artifact import Artifact

    if isinstance(model, str) and model.endswith(".rvk"):
        model = Artifact.read(model)
    if isinstance(model, Artifact) and model.program.get("target"):
        target = model.program["target"]
    dev = _device(target, device)
    artifact, name = compile_model(model, target, dev, fp16)
    session = load(artifact, device=dev, profile=True)
    return profile_session(session, list(inputs) if inputs is not None else seeded_inputs(session), repeat, name)
