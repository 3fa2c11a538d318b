"""TVM's TensorIR schedule without its Python argument checks, for relax_vk's own schedule rules.

Every primitive of ``tvm.s_tir.Schedule`` is wrapped by TVM's ``type_checked``, which binds and
walks each call's arguments against the type hints in Python before the FFI call. relax_vk's rules
make about 100,000 such calls for a zoo model's kernels, and the checks took 11% of a build
(measured on four zoo models, both APIs). The FFI call checks the argument types again in C++
and raises a ``TypeError`` naming the argument, so a wrong argument is still refused, by the same
primitive, with the same error type.

:func:`new_schedule` makes the schedule the rules use. TVM's own rules (dlight) keep TVM's class;
nothing here changes ``tvm.s_tir.Schedule`` itself.
"""

from __future__ import annotations

from typing import Union

import tvm
from tvm import s_tir, tirx


class UncheckedSchedule(s_tir.Schedule):
    """``tvm.s_tir.Schedule`` whose primitives call TVM's implementations directly (the functions
    ``type_checked`` wraps). Schedules it returns (``copy``) are TVM's own class."""


for _name, _attr in vars(s_tir.Schedule).items():
    _unwrapped = getattr(_attr, "__wrapped__", None)
    if callable(_attr) and _unwrapped is not None and _name != "__init__":
        setattr(UncheckedSchedule, _name, _unwrapped)


#: the last function a schedule was made of, and a copy of that schedule as made (see new_schedule)
_last: tuple = (None, None)


def new_schedule(func: Union[tirx.PrimFunc, tvm.IRModule]) -> s_tir.Schedule:
    """A schedule of ``func`` for relax_vk's rules (:class:`UncheckedSchedule`).

    The rules are tried in turn on one kernel, and each makes its schedule to look at the kernel
    first: the schedule state's construction (its block scopes and their analysis, 1-3 ms for a
    fused kernel) was 15% of a build. The schedule of the last function asked for is kept as made,
    and a request for the same function object gets a copy of it (a copy of the state, 0.01 ms): the
    same schedule as a new one, and independent of every other."""
    global _last
    made, pristine = _last
    if made is not None and made.same_as(func):
        copied = UncheckedSchedule.__new__(UncheckedSchedule)  # (copy() would return TVM's class)
        copied.__init_handle_by_constructor__(s_tir.schedule._ffi_api.ScheduleCopy, pristine)
        return copied
    sch = UncheckedSchedule(func)
    _last = (func, sch.copy())
    return sch
