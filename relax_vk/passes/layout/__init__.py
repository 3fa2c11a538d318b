"""Stage 1 (the RFC's convert-layout stage): names made valid identifiers, inputs and outputs of
dtypes the API cannot hold converted at the edges, weights too large for one buffer binding split, constants folded with numpy (int64 ones held as int32 where the API has no int64), then NCHW4c / OIHW4o packed layouts
through the network; last, a model whose shapes depend on input values is refused by name."""

from .convert_layout import ConvertToPackedLayout
from .derive_identifiers import DeriveIdentifiers
from .edge_dtypes import EdgeDtypes
from .fold_small_constants import FoldSmallConstants
from .index_ranges import RecordIndexRanges
from .int64_constants import NarrowInt64Constants
from .self_comparisons import NaNSelfComparisons
from .bool_arithmetic import BoolArithmetic
from .step_quotients import StepQuotients
from .split_large_weights import SplitLargeWeights
from .split_wide_concats import SplitWideConcats
from .static_shapes import CheckStaticShapes

__all__ = ["BoolArithmetic", "StepQuotients", "DeriveIdentifiers", "EdgeDtypes", "SplitLargeWeights", "SplitWideConcats", "FoldSmallConstants", "RecordIndexRanges", "NarrowInt64Constants", "NaNSelfComparisons", "CheckStaticShapes", "ConvertToPackedLayout"]
