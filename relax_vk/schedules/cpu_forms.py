"""The serial CPU forms of relax_vk's hand-scheduled GPU kernels.

A hand-scheduled kernel (:mod:`.recurrence`, :mod:`.decode_attention`, :mod:`.rotary`) binds GPU threads and
workgroup memory, which llvm cannot compile; each carries an attribute from which its module builds
the same computation as plain loops. :func:`cpu_form` finds it for the CPU reference
(:mod:`relax_vk.analysis.reference`).
"""

from __future__ import annotations

from typing import Optional

from tvm import tirx

from . import decode_attention, recurrence, rotary

_MODULES = (recurrence, decode_attention, rotary)


def cpu_form(func: tirx.PrimFunc) -> Optional[tirx.PrimFunc]:
    """The serial CPU form of a hand-scheduled kernel, None for any other PrimFunc."""
    for module in _MODULES:
        form = module.cpu_form(func)
        if form is not None:
            return form
    return None
