// Element types the runtime holds and converts at a model's edges (numpy's names and astype rules:
// floats round to nearest even, float -> int truncates (saturating here instead of numpy's undefined
// wrap), int -> bool is "non-zero").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rvk {

enum class DType { F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, Bool, Invalid };

// The dtype of a numpy name ("float32", ...); Invalid when the runtime does not know it.
DType dtype_from_name(const std::string& name);
const char* dtype_name(DType d);
size_t dtype_size(DType d);
bool dtype_is_integer(DType d);  // numpy's np.integer (bool is not)
bool dtype_is_float(DType d);

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

// Converts n elements from `src` (dtype s) to `dst` (dtype d). Returns false when an integer source
// value does not survive the conversion (the "values outside the range" check).
bool convert(DType s, const void* src, DType d, void* dst, size_t n);

}  // namespace rvk
