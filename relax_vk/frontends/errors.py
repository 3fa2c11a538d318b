"""The error every front door raises for a model it cannot read."""


class ModelLoadError(ValueError):
    """A model file could not be read, parsed or imported (names the file and why)."""
