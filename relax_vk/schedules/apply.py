"""The scheduling driver: each kernel gets the first rule whose result passes verification.

For every unscheduled PrimFunc, the rules of :data:`relax_vk.schedules.RULES` are tried in order.
A rule may decline (None), fail (an exception) or produce a schedule that
:func:`~relax_vk.schedules.verify.kernel_problems` rejects; the next rule is then tried. When no
rule gives a verified kernel, the safe schedule (:mod:`relax_vk.schedules.fallback`) is used, and
the kernel records why (``relax_vk.schedule`` names the rule that scheduled it,
``relax_vk.schedule_note`` what the rejected rules got wrong). Only a kernel that even the safe
schedule cannot make fit for codegen raises :class:`KernelScheduleError`, naming the kernel, the
ops fused into it and the Relax tensor it computes.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tvm
from tvm import relax, tirx

from ..core.dims import with_kernel_ranges
from ..core.errors import RelaxVKError, UnsupportedError
from .fallback import schedule_safe
from .verify import kernel_problems

Rule = Tuple[str, Callable[[tirx.PrimFunc, tvm.target.Target], Optional[tirx.PrimFunc]]]

SCHEDULE_ATTR = "relax_vk.schedule"
NOTE_ATTR = "relax_vk.schedule_note"


class KernelScheduleError(RelaxVKError, RuntimeError):
    """No schedule makes a kernel fit for code generation (names the kernel and where it comes from)."""


def _is_scheduled(func) -> bool:
    return func.attrs is not None and "tirx.is_scheduled" in func.attrs and int(func.attrs["tirx.is_scheduled"]) == 1


def hand_scheduled_attrs(schedule: str, cpu: bool = False) -> Dict[str, object]:
    """The PrimFunc attributes of a hand-scheduled kernel: ``tirx.is_scheduled`` (the driver leaves
    it as it is) and :data:`SCHEDULE_ATTR` naming its ``schedule``; with ``cpu``, of its serial CPU
    form (no GPU schedule: llvm compiles it as it is)."""
    attrs: Dict[str, object] = {"tirx.noalias": True}
    if not cpu:
        attrs.update({"tirx.is_scheduled": True, SCHEDULE_ATTR: schedule})
    return attrs


def max_threads(target: tvm.target.Target) -> int:
    """Threads per workgroup a schedule may use on ``target`` (at most 256; 64 if it says nothing)."""
    for key in ("max_num_threads", "max_threads_per_block"):
        if key in target.attrs:
            return max(1, min(int(target.attrs[key]), 256))
    return 64


def _call_sites(mod: tvm.IRModule) -> Dict[str, List[str]]:
    """kernel name -> names of the Relax variables bound to its calls (for error messages)."""
    sites: Dict[str, List[str]] = {}
    for _, func in mod.functions_items():
        if not isinstance(func, relax.Function):
            continue
        for block in getattr(func.body, "blocks", []):
            for binding in block.bindings:
                value = binding.value
                if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
                    sites.setdefault(value.args[0].name_hint, []).append(binding.var.name)
    return sites


def schedule_kernel(func: tirx.PrimFunc, target: tvm.target.Target, rules: Sequence[Rule], name: str = "kernel") -> tirx.PrimFunc:
    """``func`` scheduled by the first verified rule, else the safe schedule (module docstring)."""
    notes: List[str] = []
    for rule_name, rule in rules:
        try:
            scheduled = rule(func, target)
        except Exception as err:  # a rule that cannot handle this kernel: the next one may
            notes.append(f"{rule_name}: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
            continue
        if scheduled is None:
            continue
        problems = kernel_problems(scheduled)
        if not problems:
            return _mark(scheduled, func, rule_name, "")
        notes.append(f"{rule_name}: {problems[0]}")
    try:
        safe = schedule_safe(func, max_threads(target))
    except UnsupportedError as err:  # (a kernel relax_vk knows it cannot compile: refused by name)
        raise UnsupportedError(f"kernel {name}: {err}" + (f" ({'; '.join(notes)})" if notes else "")) from None
    except Exception as err:
        raise KernelScheduleError(f"kernel {name}: no schedule fits it ({'; '.join(notes + [f'safe: {err}'])})") from None
    problems = kernel_problems(safe)
    if problems:
        raise KernelScheduleError(f"kernel {name}: no schedule fits it ({'; '.join(notes + ['safe: ' + problems[0]])})")
    return _mark(safe, func, "safe", "; ".join(notes))


def _mark(scheduled: tirx.PrimFunc, original: tirx.PrimFunc, rule: str, note: str) -> tirx.PrimFunc:
    if original.attrs is not None:
        scheduled = scheduled.with_attrs(original.attrs) if scheduled.attrs is None else scheduled
        for key, value in original.attrs.items():
            if key not in scheduled.attrs:
                scheduled = scheduled.with_attr(key, value)
    scheduled = scheduled.with_attr("tirx.is_scheduled", True).with_attr(SCHEDULE_ATTR, rule)
    return scheduled.with_attr(NOTE_ATTR, note) if note else scheduled


def ScheduleKernels(rules: Sequence[Rule]) -> tvm.transform.Pass:
    """Schedule every unscheduled PrimFunc of the module (see the module docstring); needs the
    target entered (``with target:``) or each PrimFunc's ``target`` attribute."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        sites = None
        mod = with_kernel_ranges(mod)  # (a rule may reason about a run-time extent's bound: core.dims.kernel_ranges)
        out = mod.clone()
        for gvar, func in mod.functions_items():
            if not isinstance(func, tirx.PrimFunc) or _is_scheduled(func):
                continue
            target = func.attrs.get("target") if func.attrs is not None and "target" in func.attrs else tvm.target.Target.current(allow_none=False)
            try:
                out[gvar] = schedule_kernel(func, target, rules, gvar.name_hint)
            except (KernelScheduleError, UnsupportedError) as err:
                sites = sites if sites is not None else _call_sites(mod)
                where = ", ".join(sites.get(gvar.name_hint, [])) or "no call site"
                raise type(err)(f"{err} [computes {where}]") from None
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.ScheduleKernels")
