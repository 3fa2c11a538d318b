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


def new_schedule(func: Union[tirx.PrimFunc, tvm.IRModule]) -> s_tir.Schedule:
    """A schedule of ``func`` for relax_vk's rules (:class:`UncheckedSchedule`)."""
    return UncheckedSchedule(func)
