"""The model zoo: plain ``torch.nn`` networks with random weights from fixed seeds (torchvision has
no CPU build here, so the architectures are written out). Input sizes are reduced to keep the test
suite fast on a CPU OpenCL device; :data:`ZOO` says which.

Requires the ``torch`` extra: ``pip install 'relax_vk[torch]'``.
"""

from .models import ZOO, ZooEntry, build_zoo_model

__all__ = ["ZOO", "ZooEntry", "build_zoo_model"]
