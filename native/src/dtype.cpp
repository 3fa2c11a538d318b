#include "dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace rvk {

namespace {
struct Info {
    const char* name;
    DType type;
    size_t size;
};
const Info kTypes[] = {
    {"float16", DType::F16, 2}, {"float32", DType::F32, 4}, {"float64", DType::F64, 8}, {"int8", DType::I8, 1},
    {"int16", DType::I16, 2},   {"int32", DType::I32, 4},   {"int64", DType::I64, 8},   {"uint8", DType::U8, 1},
    {"uint16", DType::U16, 2},  {"uint32", DType::U32, 4},  {"uint64", DType::U64, 8},  {"bool", DType::Bool, 1},
};
}  // namespace

DType dtype_from_name(const std::string& name) {
    for (const Info& i : kTypes)
        if (name == i.name) return i.type;
    return DType::Invalid;
}

const char* dtype_name(DType d) {
    for (const Info& i : kTypes)
        if (i.type == d) return i.name;
    return "invalid";
}

size_t dtype_size(DType d) {
    for (const Info& i : kTypes)
        if (i.type == d) return i.size;
    return 0;
}

bool dtype_is_integer(DType d) {
    switch (d) {
        case DType::I8: case DType::I16: case DType::I32: case DType::I64:
        case DType::U8: case DType::U16: case DType::U32: case DType::U64: return true;
        default: return false;
    }
}

bool dtype_is_float(DType d) { return d == DType::F16 || d == DType::F32 || d == DType::F64; }

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t mant = x & 0x7FFFFFu;
    if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u | (mant >> 13) : 0u));
    int e = static_cast<int>(exp) - 127 + 15;
    if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow: inf
    if (e <= 0) {
        if (e < -10) return static_cast<uint16_t>(sign);  // underflow: signed zero
        mant |= 0x800000u;
        uint32_t shift = static_cast<uint32_t>(14 - e);
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
    return static_cast<uint16_t>(sign | half);
}

float half_to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    uint32_t x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while (!(mant & 0x400u));
            x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3FFu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7F800000u | (mant << 13);
    } else {
        x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

namespace {

// One element as the widest value of its family.
struct Value {
    enum { Float, Signed, Unsigned } kind;
    double f;
    int64_t i;
    uint64_t u;
};

template <typename T>
T load(const void* p, size_t k) {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(p) + k * sizeof(T), sizeof(T));
    return v;
}

template <typename T>
void store(void* p, size_t k, T v) {
    std::memcpy(static_cast<unsigned char*>(p) + k * sizeof(T), &v, sizeof(T));
}

Value read(DType s, const void* src, size_t k) {
    switch (s) {
        case DType::F16: return {Value::Float, half_to_float(load<uint16_t>(src, k)), 0, 0};
        case DType::F32: return {Value::Float, load<float>(src, k), 0, 0};
        case DType::F64: return {Value::Float, load<double>(src, k), 0, 0};
        case DType::I8: return {Value::Signed, 0, load<int8_t>(src, k), 0};
        case DType::I16: return {Value::Signed, 0, load<int16_t>(src, k), 0};
        case DType::I32: return {Value::Signed, 0, load<int32_t>(src, k), 0};
        case DType::I64: return {Value::Signed, 0, load<int64_t>(src, k), 0};
        case DType::U8: return {Value::Unsigned, 0, 0, load<uint8_t>(src, k)};
        case DType::U16: return {Value::Unsigned, 0, 0, load<uint16_t>(src, k)};
        case DType::U32: return {Value::Unsigned, 0, 0, load<uint32_t>(src, k)};
        case DType::U64: return {Value::Unsigned, 0, 0, load<uint64_t>(src, k)};
        case DType::Bool: return {Value::Unsigned, 0, 0, load<uint8_t>(src, k) ? 1u : 0u};
        default: return {Value::Signed, 0, 0, 0};
    }
}

// A float as an integer of [lo, hi] (truncated toward zero; NaN is 0; saturating).
template <typename T>
T float_to_int(double f) {
    if (std::isnan(f)) return 0;
    f = std::trunc(f);
    if (f <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (f >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(f);
}

// Writes v as dtype d; false when an integer value does not survive.
template <typename T>
bool write_int(void* dst, size_t k, const Value& v) {
    T out;
    bool exact = true;
    if (v.kind == Value::Float) {
        out = float_to_int<T>(v.f);
    } else if (v.kind == Value::Signed) {
        out = static_cast<T>(v.i);  // modular, as numpy's astype
        exact = std::numeric_limits<T>::is_signed ? static_cast<int64_t>(out) == v.i
                                                   : v.i >= 0 && static_cast<uint64_t>(out) == static_cast<uint64_t>(v.i);
    } else {
        out = static_cast<T>(v.u);
        exact = std::numeric_limits<T>::is_signed ? static_cast<int64_t>(out) >= 0 && static_cast<uint64_t>(out) == v.u
                                                   : static_cast<uint64_t>(out) == v.u;
    }
    store<T>(dst, k, out);
    return exact;
}

double as_double(const Value& v) {
    return v.kind == Value::Float ? v.f : v.kind == Value::Signed ? static_cast<double>(v.i) : static_cast<double>(v.u);
}

}  // namespace

bool convert(DType s, const void* src, DType d, void* dst, size_t n) {
    if (s == d) {
        std::memcpy(dst, src, n * dtype_size(s));
        return true;
    }
    bool exact = true;
    for (size_t k = 0; k < n; ++k) {
        Value v = read(s, src, k);
        bool ok = true;
        switch (d) {
            case DType::F16: store<uint16_t>(dst, k, float_to_half(static_cast<float>(as_double(v)))); break;
            case DType::F32: store<float>(dst, k, static_cast<float>(as_double(v))); break;
            case DType::F64: store<double>(dst, k, as_double(v)); break;
            case DType::I8: ok = write_int<int8_t>(dst, k, v); break;
            case DType::I16: ok = write_int<int16_t>(dst, k, v); break;
            case DType::I32: ok = write_int<int32_t>(dst, k, v); break;
            case DType::I64: ok = write_int<int64_t>(dst, k, v); break;
            case DType::U8: ok = write_int<uint8_t>(dst, k, v); break;
            case DType::U16: ok = write_int<uint16_t>(dst, k, v); break;
            case DType::U32: ok = write_int<uint32_t>(dst, k, v); break;
            case DType::U64: ok = write_int<uint64_t>(dst, k, v); break;
            case DType::Bool: store<uint8_t>(dst, k, as_double(v) != 0.0 || (v.kind == Value::Signed && v.i) || (v.kind == Value::Unsigned && v.u)); break;
            default: break;
        }
        // only integer sources are checked (numpy: np.issubdtype(array.dtype, np.integer))
        if (!ok && v.kind != Value::Float && s != DType::Bool) exact = false;
    }
    return exact;
}

}  // namespace rvk
