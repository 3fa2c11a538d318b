"""Stage 1 (the RFC's convert-layout stage): constants folded with numpy, then NCHW4c / OIHW4o
packed layouts through the network."""

from .convert_layout import ConvertToPackedLayout
from .fold_small_constants import FoldSmallConstants

__all__ = ["FoldSmallConstants", "ConvertToPackedLayout"]
