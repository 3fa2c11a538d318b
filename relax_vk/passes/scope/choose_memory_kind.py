"""ChooseMemoryKind: textures or buffers for a model, from measured kernel times where there are some.

Requires: a Relax module (before or after the layout stage) and the target it is scoped for.

Guarantees: when measurements decide, the module gets a ``relax_vk.memory_decision`` attribute
(JSON, :class:`MemoryDecision`) saying which memory kind the scope passes give activations and
weights, and the times behind it; otherwise the module is returned unchanged (so the RFC's
stage-by-stage listing and ``scope_pipeline`` stay structurally equal), and :func:`decide` tells
tools which rule decided. The rules:

* ``prefer``: the options asked for one kind (``ScopeOptions(prefer="texture" | "buffer")``);
* ``measured``: ``prefer="auto"``, the target names a device (``device=`` target key, e.g.
  ``relax_vk.target.opencl(device_name=...)`` or ``--device``) whose tuning database
  (:mod:`relax_vk.schedules.tuning`) holds either a whole-model measurement of this model's two
  plans on this API (``basis="model"``: the faster plan wins; matched by
  :func:`~relax_vk.schedules.workloads.model_fingerprint` of the module as this pass sees it, after
  the layout stage, which is what ``gpu_benchmark.py`` records and ``relax-vk tune --import``
  reads), or every conv of the model in both
  memory kinds (``basis="convs"``: the kind with the smaller total of measured conv times wins);
* ``consumer-priority``: ``prefer="auto"`` without those measurements: the RFC's rule (textures
  wherever every consumer takes them).

Both candidate plans are uniform (all textures where the registry allows, or all buffers), so
neither adds scope copies, and the convs carry nearly all of a CNN's time; a per-tensor choice
that mixes kinds would pay a copy at every boundary. :func:`effective_options` is how the
downstream scope passes read the decision. The IR is otherwise unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Optional

import tvm

from ...core import target as _target
from ...core.options import ScopeOptions

ATTR = "relax_vk.memory_decision"


@dataclass(frozen=True)
class MemoryDecision:
    rule: str  # "prefer" | "measured" | "consumer-priority"
    kind: str  # "texture" | "buffer"
    reason: str
    device: Optional[str] = None
    api: Optional[str] = None
    texture_ms: Optional[float] = None  # per memory kind: summed conv times, or the whole model's (basis)
    buffer_ms: Optional[float] = None
    convs: int = 0  # conv calls in the model
    measured: int = 0  # of which the database has both kinds
    basis: str = ""  # "model" (whole-model plan times) or "convs" (summed conv times), when measured
    model: str = ""  # the model's fingerprint (schedules.workloads.model_fingerprint)

    def to_json(self) -> dict:
        return asdict(self)


def decide(mod: tvm.IRModule, target: tvm.target.Target, options: Optional[ScopeOptions] = None) -> MemoryDecision:
    """The decision for ``mod`` (module docstring)."""
    options = options or ScopeOptions()
    if not options.textures or options.prefer == "buffer":
        return MemoryDecision("prefer", "buffer", "buffers asked for (prefer=buffer)")
    if options.prefer == "texture":
        return MemoryDecision("prefer", "texture", "textures asked for (prefer=texture): the RFC's consumer-priority rule")
    from ...schedules.tuning import database
    from ...schedules.workloads import model_fingerprint, workload_counts

    device, api = _target.target_device(target), _target.target_api(target)
    counts = workload_counts(mod)
    calls = sum(counts.values())
    model = model_fingerprint(mod)
    db = database(device) if device else None
    if db is None:
        why = "the target names no device" if not device else f"no tuning database for {device}"
        return MemoryDecision("consumer-priority", "texture", f"{why}: the RFC's consumer-priority rule", device, api, convs=calls, model=model)
    plan = db.plan(api, model)
    if plan is not None:
        kind = "buffer" if plan.buffer_ms < plan.texture_ms else "texture"
        reason = (f"measured on {device} ({api}): this model runs in {plan.texture_ms:.3f} ms with textures, "
                  f"{plan.buffer_ms:.3f} ms with buffers (whole-model runs)")  # fmt: skip
        return MemoryDecision("measured", kind, reason, device, api, plan.texture_ms, plan.buffer_ms, calls, calls, "model", model)
    totals = {"texture": 0.0, "buffer": 0.0}
    measured = 0
    for key, n in counts.items():
        records = {kind: db.best(api, kind, key) for kind in totals}
        if all(records.values()):
            measured += n
            for kind, record in records.items():
                totals[kind] += n * record.ms
    if not calls or measured < calls:
        return MemoryDecision("consumer-priority", "texture",
                              f"{device} ({api}) has measurements for {measured} of {calls} convs: the RFC's consumer-priority rule",
                              device, api, convs=calls, measured=measured, model=model)  # fmt: skip
    kind = "buffer" if totals["buffer"] < totals["texture"] else "texture"
    reason = (f"measured on {device} ({api}): {calls} convs take {totals['texture']:.3f} ms in textures, "
              f"{totals['buffer']:.3f} ms in buffers")  # fmt: skip
    return MemoryDecision("measured", kind, reason, device, api, totals["texture"], totals["buffer"], calls, measured, "convs", model)


def recorded(mod: tvm.IRModule) -> Optional[MemoryDecision]:
    """The decision a module carries, if any."""
    attrs = mod.attrs
    if attrs is None or ATTR not in attrs:
        return None
    return MemoryDecision(**json.loads(str(attrs[ATTR])))


def effective_options(mod: tvm.IRModule, options: Optional[ScopeOptions]) -> ScopeOptions:
    """``options`` as the scope passes apply them: ``prefer="buffer"``, or a measured decision for
    buffers that the module carries, turns textures off."""
    options = options or ScopeOptions()
    decision = recorded(mod)
    wants_buffers = options.prefer == "buffer" or (decision is not None and decision.kind == "buffer")
    if wants_buffers and options.textures:
        return replace(options, textures=False)
    return options


def ChooseMemoryKind(
    target: "tvm.target.Target | str | None" = None, options: Optional[ScopeOptions] = None
) -> tvm.transform.Pass:
    """The pass (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.ChooseMemoryKind")
    def _choose(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        decision = decide(mod, _target.resolve(target), options)
        if decision.rule != "measured":
            return mod  # the options or the RFC's rule: nothing for the scope passes to read
        return mod.with_attr(ATTR, json.dumps(decision.to_json()))

    return _choose
