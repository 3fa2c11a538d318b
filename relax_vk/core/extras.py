"""Optional dependencies: import them or say which extra to install."""

from __future__ import annotations

import importlib

from .errors import UnsupportedError


class MissingExtra(UnsupportedError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


def require(module: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtra(f"{module} is needed for this; install it with: pip install 'relax_vk[{extra}]' ({err})") from err
