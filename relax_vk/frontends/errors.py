"""The error every front door raises for a model it cannot read."""

from ..core.errors import UnsupportedError


class ModelLoadError(UnsupportedError):
    """A model file could not be read, parsed or imported (names the file and why)."""
