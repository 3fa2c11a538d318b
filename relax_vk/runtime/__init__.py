"""The relax_vk runtime: run ``.rvk`` artifacts on OpenCL devices with real images.

Needs only numpy and pyopencl (never TVM), so a model compiled on one machine runs on another::

    from relax_vk.runtime import load
    session = load("model.rvk", device="pocl")      # or "gpu", or "0:1" (platform:device)
    outputs = session.run([x])                      # numpy in, numpy out
    print(session.last_profile)                     # per-kernel milliseconds
"""

from .devices import list_devices, select_device
from .opencl_session import DeviceLimitError, OpenCLSession, load

__all__ = ["DeviceLimitError", "OpenCLSession", "list_devices", "load", "select_device"]
