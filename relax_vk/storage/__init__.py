"""Storage planning: liveness-based reuse of buffers and textures (after lowering, before the runtime).

- :mod:`.lifetimes`: which tensors may share and when each is live; the lower bound.
- :mod:`.strategies`: shared-object groupings (greedy by size, by breadth, in order; exact search).
- :mod:`.planner`: the cheapest grouping per pool, as a :class:`~.planner.StoragePlan`.
- :mod:`.program`: the assignment recorded in an artifact's program, and its load-time check.

Standard library only: the runtimes read and check assignments without TVM.
"""

from .lifetimes import Lifetime, lower_bound, program_lifetimes
from .planner import SharedObject, StoragePlan, plan_storage
from .program import allocated_bytes, allocations, assign_storage, storage_problem

__all__ = [
    "Lifetime",
    "SharedObject",
    "StoragePlan",
    "allocated_bytes",
    "allocations",
    "assign_storage",
    "lower_bound",
    "plan_storage",
    "program_lifetimes",
    "storage_problem",
]
