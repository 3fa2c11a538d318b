// Parsing and complete validation of a .rvk artifact: the one validator of the format that
// relax_vk/serialization/artifact.py writes (the container) and relax_vk/codegen/export.py fills (the
// program). Storage assignments are held to the invariant the planner's own check states
// (relax_vk/storage/program.py storage_problem), with the same words. Every offset, size and product
// is checked before it is used (overflow included).
#include "program.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace rvk {

// ------------------------------------------------------------------------------------ helpers
namespace {

const char kMagic[8] = {'R', 'E', 'L', 'A', 'X', 'V', 'K', '\0'};
constexpr uint32_t kVersion = 2;  // artifact.py VERSION
constexpr size_t kAlign = 16;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 3 * 24;
const char* const kSections[3] = {"program", "source", "constants"};

const char* const kKinds[] = {"input", "intermediate", "constant", "workspace"};
const char* const kScopes[] = {"global", "global.texture", "global.texture-nhwc", "global.texture-weight"};
// texel dtypes of an image: float, half, and signed normalized bytes (quantized weights; a read gives byte / 127)
const char* const kTexels[] = {"float32", "float16", "snorm8"};
const char* const kTargets[] = {"opencl", "vulkan"};
const char* const kSteps[] = {"launch", "copy"};

struct Invalid : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void require(bool cond, const std::string& message) {
    if (!cond) throw Invalid(message);
}

uint32_t u32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint64_t u64(const uint8_t* p) { return u32(p) | (static_cast<uint64_t>(u32(p + 4)) << 32); }

// Python: isinstance(v, int) (bool included) / and not bool
bool py_int(const Json* v) { return v && (v->is_int() || v->is_bool()); }
bool strict_int(const Json* v) { return v && v->is_int(); }
int64_t int_value(const Json* v) { return v->is_bool() ? (v->as_bool() ? 1 : 0) : v->as_int(); }

// `value == n` for an integer value (stricter than Python's ==, which also takes 1.0 and True for 1:
// the runtime reads these fields as integers, so they must be integers)
bool equals_int(const Json* v, int64_t n) { return v && v->is_int() && v->as_int() == n; }

// Python's truthiness
bool truthy(const Json* v) {
    if (!v) return false;
    switch (v->type()) {
        case Json::Type::Null: return false;
        case Json::Type::Bool: return v->as_bool();
        case Json::Type::Int: return v->as_int() != 0;
        case Json::Type::Float: return v->as_number() != 0;
        case Json::Type::String: return !v->as_string().empty();
        case Json::Type::Array: return !v->items().empty();
        case Json::Type::Object: return !v->members().empty();
    }
    return false;
}

std::string repr(const Json* v) { return v ? v->repr() : "None"; }

// validate._ints: a list (of n) of integers (not bools), positive or non-negative
bool ints(const Json* v, size_t n = 0, bool positive = true) {
    if (!v || !v->is_array() || (n && v->items().size() != n)) return false;
    for (const Json& x : v->items())
        if (!x.is_int() || (positive ? x.as_int() <= 0 : x.as_int() < 0)) return false;
    return true;
}

std::vector<int64_t> int_list(const Json& v) {
    std::vector<int64_t> out;
    for (const Json& x : v.items()) out.push_back(x.as_int());
    return out;
}

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// a product of positive ints; false when it overflows
bool product(const std::vector<int64_t>& v, size_t from, size_t to, int64_t* out) {
    int64_t p = 1;
    for (size_t i = from; i < to; ++i)
        if (!mul_ok(p, v[i], &p)) return false;
    *out = p;
    return true;
}

// validate._dtype: numpy's dtype of a value (as str(value))
DType dtype_of(const Json* v) {
    DType d = v && v->is_string() ? dtype_from_name(v->as_string()) : DType::Invalid;
    if (d == DType::Invalid) throw Invalid("unknown dtype " + repr(v));
    return d;
}

std::string tuple_repr(const char* const* names, size_t n) {
    std::string out = "(";
    for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + py_repr(names[i]);
    return out + ")";
}

template <size_t N>
bool one_of(const Json* v, const char* const (&names)[N]) {
    if (!v || !v->is_string()) return false;
    for (const char* n : names)
        if (v->as_string() == n) return true;
    return false;
}

// core.scope: the image extents of `shape` in a texture scope (shape: rank >= 3, last axis 4)
bool image_extents(const std::string& scope, const std::vector<int64_t>& shape, Extents* out) {
    size_t rank = shape.size();
    if (rank < 3 || shape[rank - 1] != 4) return false;
    size_t sep = scope == "global.texture" ? rank - 2 : scope == "global.texture-nhwc" ? 2 : 1;
    int64_t layers = 0, height = shape[sep - 1], width = 0;
    if (!product(shape, 0, sep - 1, &layers) || !product(shape, sep, rank - 1, &width)) return false;
    *out = {width, height, layers};
    return true;
}

bool is_texture_scope(const std::string& scope) { return scope != "global"; }

// ------------------------------------------------------------------------- the program
// A program's run-time dims: name -> index (validated: unique names, 1 <= min <= max)
std::map<std::string, int> check_dims(const Json& program) {
    std::map<std::string, int> out;
    const Json* dims = program.get("dims");
    if (!dims || dims->is_null()) return out;
    require(dims->is_array(), "dims " + dims->repr() + " is not a list");
    for (const Json& d : dims->items()) {
        const Json* name = d.is_object() ? d.get("name") : nullptr;
        bool ok = name && name->is_string() && !name->as_string().empty() && strict_int(d.get("min")) && strict_int(d.get("max")) &&
                  d.get("min")->as_int() >= 1 && d.get("min")->as_int() <= d.get("max")->as_int();
        require(ok, "dim " + d.repr() + ": not a name with a range 1 <= min <= max");
        if (const Json* step = d.get("step")) {
            require(strict_int(step) && step->as_int() >= 1 && d.get("min")->as_int() % step->as_int() == 0 &&
                        d.get("max")->as_int() % step->as_int() == 0,
                    "dim " + d.repr() + ": step is not a positive integer dividing min and max");
        }
        require(!out.count(name->as_string()), "dim " + name->as_string() + " is declared twice");
        int index = static_cast<int>(out.size());
        out[name->as_string()] = index;
    }
    return out;
}

ShapeExpr expr_of(const Json& j, const std::map<std::string, int>& dims, const std::string& where) {
    try {
        return ShapeExpr::parse(j, dims);
    } catch (const std::invalid_argument& err) {
        throw Invalid(where + ": " + err.what());
    }
}

void check_tensor(const Json& t, size_t index, const std::map<std::string, int>& dims) {
    std::string where = "tensor " + std::to_string(index);
    require(t.is_object(), where + " is not an object");
    require(equals_int(t.get("id"), static_cast<int64_t>(index)), where + " has id " + repr(t.get("id")));
    require(t.get("name") && t.get("name")->is_string(), where + " has no name");
    where = "tensor " + std::to_string(index) + " (" + t.get("name")->as_string() + ")";
    // a buffer may hold no elements (a slice that leaves nothing), a texture may not
    require(ints(t.get("shape"), 0, false), where + ": shape " + repr(t.get("shape")) + " is not a list of non-negative integers");
    DType dtype = dtype_of(t.get("dtype"));
    require(one_of(t.get("kind"), kKinds), where + ": kind " + repr(t.get("kind")) + " is not one of " + tuple_repr(kKinds, 4));
    require(one_of(t.get("scope"), kScopes), where + ": unknown scope " + repr(t.get("scope")));
    std::vector<int64_t> shape = int_list(*t.get("shape"));
    int64_t expected = 0;
    require(product(shape, 0, shape.size(), &expected) && mul_ok(expected, static_cast<int64_t>(dtype_size(dtype)), &expected),
            where + ": shape " + list_repr(shape) + " is too large");
    require(equals_int(t.get("bytes"), expected),
            where + ": " + repr(t.get("bytes")) + " bytes for shape " + list_repr(shape) + " " + dtype_name(dtype) + " (" +
                std::to_string(expected) + " expected)");
    const std::string& scope = t.get("scope")->as_string();
    const Json* image = t.get("image");
    const Json* origin = t.get("origin");
    if (origin) {
        bool ok = (scope == "global.texture" || scope == "global.texture-nhwc") && origin->is_array() && origin->items().size() == 2;
        for (size_t i = 0; ok && i < 2; ++i) ok = strict_int(&origin->items()[i]) && origin->items()[i].as_int() >= 0 && origin->items()[i].as_int() < 65536;
        require(ok, where + ": origin " + origin->repr() + " is not two integers in [0, 65536) of an activation texture (global.texture, global.texture-nhwc)");
    }
    if (is_texture_scope(scope)) {
        require(ints(t.get("shape")), where + ": a texture of shape " + list_repr(shape) + " (no elements)");
        Extents e{};
        bool ok = shape.size() >= 3 && shape.back() == 4 && image_extents(scope, shape, &e) && image && image->is_array() &&
                  image->items().size() == 3;
        if (ok && origin) {  // placed: folded, its texels in order W wide, (W, w * h * layers / W, 1)
            int64_t rows = 0, wide = 0;
            ok = mul_ok(e[1], e[2], &rows) && strict_int(&image->items()[0]) && e[0] > 0;
            if (ok) wide = image->items()[0].as_int();
            // W = k w, k a power of two dividing the rows, or W = w / m, m a power of two dividing w
            const int64_t k = ok && wide >= e[0] && wide % e[0] == 0 ? wide / e[0] : 0;
            const int64_t m = ok && wide > 0 && wide < e[0] && e[0] % wide == 0 ? e[0] / wide : 0;
            ok = ok && ((k > 0 && (k & (k - 1)) == 0 && rows % k == 0) || (m > 0 && (m & (m - 1)) == 0));
            if (ok) e = k > 0 ? Extents{wide, rows / k, 1} : Extents{wide, rows * m, 1};
        }
        for (size_t i = 0; ok && i < 3; ++i) ok = equals_int(&image->items()[i], e[i]);
        require(ok, where + ": image " + repr(image) + " does not match " + scope + " of " + list_repr(shape));
        require(dtype == DType::F32 || dtype == DType::F16, where + ": a " + dtype_name(dtype) + " texture");
    } else {
        require(!image || image->is_null(), where + ": a buffer with image extents " + repr(image));
    }
    if (const Json* exprs = t.get("shape_expr"); exprs && !exprs->is_null()) {
        require(exprs->is_array() && exprs->items().size() == shape.size(),
                where + ": shape_expr " + exprs->repr() + " does not have one expression per axis of " + list_repr(shape));
        require(!is_texture_scope(scope), where + ": a texture of run-time shape (run-time dims are held in buffers)");
        for (size_t a = 0; a < shape.size(); ++a) {
            ShapeExpr e = expr_of(exprs->items()[a], dims, where + ": axis " + std::to_string(a));
            require(!e.is_const() || e.eval({}) == shape[a], where + ": axis " + std::to_string(a) + " is " + exprs->items()[a].repr() +
                                                                   " at run time and " + std::to_string(shape[a]) + " at the bound");
        }
    }
    if (t.has("host_dtype")) dtype_of(t.get("host_dtype"));
    if (const Json* r = t.get("index_range"); r && !r->is_null()) {  // (passes/layout/index_ranges.py)
        auto pair = [](const Json& p) {
            return p.is_array() && p.items().size() == 2 && strict_int(&p.items()[0]) && strict_int(&p.items()[1]) &&
                   p.items()[0].as_int() <= p.items()[1].as_int();
        };
        bool per_component = r->is_array() && !r->items().empty() && r->items()[0].is_array();
        bool ok = t.get("kind")->as_string() == "input" && dtype_is_integer(dtype) && r->is_array();
        if (ok && per_component) {  // [[lo, hi], ...]: one a position of the last axis, whose extent is static
            for (const Json& p : r->items()) ok = ok && pair(p);
            ok = ok && !shape.empty() && static_cast<size_t>(shape.back()) == r->items().size() &&
                 (!t.get("shape_expr") || t.get("shape_expr")->is_null() || t.get("shape_expr")->items().back().is_int());
        } else {
            ok = ok && pair(*r);
        }
        require(ok, where + ": index_range " + r->repr() + " is not [lo, hi] (lo <= hi), or one such a position of the static last axis, of an integer input");
    }
    if (t.has("texel")) {
        const Json* texel = t.get("texel");
        std::string name = texel->is_string() ? texel->as_string() : "";
        bool snorm = name == "snorm8" && t.get("kind")->as_string() == "constant" && t.get("dtype")->as_string() == "float32";
        bool ok = is_texture_scope(scope) && (name == "float32" || name == "float16" || snorm);
        require(ok, where + ": texel " + repr(texel) + " (half or float texels of a texture, or snorm8 texels of a float32 constant texture)");
    }
}

// The kernel-name check of validate._kernel: `__kernel\s+void\s+(?:__attribute__\(\([^)]*\)\)\s+)?NAME\s*\(`
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The position of the '(' opening NAME's parameter list in its first declaration (npos: none).
size_t kernel_params_at(const std::string& src, const std::string& name) {
    const std::string kw = "__kernel";
    for (size_t at = src.find(kw); at != std::string::npos; at = src.find(kw, at + 1)) {
        size_t p = at + kw.size();
        auto spaces = [&](size_t& q) {
            size_t s = q;
            while (q < src.size() && is_space(src[q])) ++q;
            return q > s;
        };
        if (!spaces(p) || src.compare(p, 4, "void") != 0) continue;
        p += 4;
        if (!spaces(p)) continue;
        auto name_at = [&](size_t q) -> size_t {
            if (src.compare(q, name.size(), name) != 0) return std::string::npos;
            q += name.size();
            while (q < src.size() && is_space(src[q])) ++q;
            return q < src.size() && src[q] == '(' ? q : std::string::npos;
        };
        if (size_t open = name_at(p); open != std::string::npos) return open;
        const std::string attr = "__attribute__((";
        if (src.compare(p, attr.size(), attr) == 0) {
            size_t q = p + attr.size();
            while (q < src.size() && src[q] != ')') ++q;
            if (src.compare(q, 2, "))") == 0) {
                q += 2;
                if (spaces(q))
                    if (size_t open = name_at(q); open != std::string::npos) return open;
            }
        }
    }
    return std::string::npos;
}

bool kernel_in_source(const std::string& src, const std::string& name) { return kernel_params_at(src, name) != std::string::npos; }

// What each parameter of an OpenCL kernel's declaration takes: 'i' an image, 'b' a buffer (a
// pointer), 's' anything else (a scalar, a sampler). Empty for "(void)" or "()". Unbalanced
// parentheses (a source that ends inside the list): nullopt.
std::optional<std::string> kernel_param_kinds(const std::string& src, size_t open) {
    int depth = 0;
    std::string kinds, param;
    auto classify = [&]() {
        std::string p = param;
        size_t a = p.find_first_not_of(" \t\n\r\f\v"), b = p.find_last_not_of(" \t\n\r\f\v");
        p = a == std::string::npos ? "" : p.substr(a, b - a + 1);
        param.clear();
        if (p.empty() || p == "void") return;
        kinds += p.find("image1d") != std::string::npos || p.find("image2d") != std::string::npos || p.find("image3d") != std::string::npos ? 'i'
                 : p.find('*') != std::string::npos ? 'b'
                                                    : 's';
    };
    for (size_t i = open; i < src.size(); ++i) {
        char c = src[i];
        if (c == '(') {
            if (depth++ == 0) continue;
        } else if (c == ')') {
            if (--depth == 0) {
                classify();
                return kinds;
            }
        } else if (c == ',' && depth == 1) {
            classify();
            continue;
        }
        param += c;
    }
    return std::nullopt;
}

// As validate.check_launch_signatures (the same messages): every launch of an OpenCL program
// binds as many tensors as its kernel's declaration has parameters, an image to every image
// parameter and a buffer to every pointer (a buffer bound to an image parameter makes pocl crash in
// clEnqueueNDRangeKernel).
// A kernel entry's OpenCL function: "entry" when present, else its name
std::string kernel_entry(const Json& k) {
    const Json* e = k.get("entry");
    return e && e->is_string() ? e->as_string() : k.get("name")->as_string();
}

void check_launch_signatures(const Json& program, const std::string& source) {
    std::map<std::string, std::string> kinds, entries;
    for (const Json& k : program.get("kernels")->items()) entries[k.get("name")->as_string()] = kernel_entry(k);
    const std::vector<Json>& tensors = program.get("tensors")->items();
    const std::vector<Json>& steps = program.get("steps")->items();
    for (size_t i = 0; i < steps.size(); ++i) {
        const Json& step = steps[i];
        if (step.get("op")->as_string() != "launch") continue;
        const std::string& kernel = step.get("kernel")->as_string();
        if (!kinds.count(kernel)) {
            auto entry = entries.find(kernel);
            std::optional<std::string> k = kernel_param_kinds(source, kernel_params_at(source, entry == entries.end() ? kernel : entry->second));
            require(k.has_value(), "kernel " + kernel + ": its parameter list in the OpenCL source is not closed");
            kinds[kernel] = *k;
        }
        const std::string& all = kinds[kernel];
        const std::vector<Json>& args = step.get("args")->items();
        // the scalar arguments take their positions; the tensors the others, in order
        std::string want = all;
        std::set<int64_t> scalar_at;
        if (const Json* scalars = step.get("scalars"); scalars && scalars->is_array())
            for (const Json& sc : scalars->items()) scalar_at.insert(sc.get("index")->as_int());
        for (auto it = scalar_at.rbegin(); it != scalar_at.rend(); ++it) {
            require(*it < static_cast<int64_t>(all.size()) && all[static_cast<size_t>(*it)] == 's',
                    "step " + std::to_string(i) + " (" + kernel + ") passes an integer as parameter " + std::to_string(*it) +
                        ", which is not a scalar parameter of the kernel");
            want.erase(static_cast<size_t>(*it), 1);
        }
        require(args.size() == want.size(), "step " + std::to_string(i) + " (" + kernel + ") passes " + std::to_string(args.size()) +
                                                " tensors; the kernel takes " + std::to_string(want.size()) + " parameters");
        for (size_t a = 0; a < args.size(); ++a) {
            const Json& t = tensors[static_cast<size_t>(args[a].as_int())];
            bool image = is_texture_scope(t.get("scope")->as_string());
            const char* problem = want[a] == 'i' && !image ? "a buffer for an image parameter"
                                  : want[a] == 'b' && image ? "a texture for a buffer parameter"
                                  : want[a] == 's'          ? "a tensor for a parameter that is neither a buffer nor an image"
                                                            : nullptr;
            if (problem)
                throw Invalid("step " + std::to_string(i) + " (" + kernel + ") passes tensor " + t.get("name")->as_string() + " as parameter " +
                              std::to_string(a) + ": " + problem);
        }
    }
}

// Python's len(str) of UTF-8 text (code points)
int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

// the byte offset of code point `n` of UTF-8 text (its size for n = code_points(s))
size_t code_point_offset(const std::string& s, int64_t n) {
    for (size_t i = 0; i < s.size(); ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n-- == 0) return i;
    return s.size();
}

void check_kernel(const Json& k, const std::string& target, const std::string& source) {
    require(k.is_object() && k.get("name") && k.get("name")->is_string(), "kernel entry " + k.repr() + " has no name");
    std::string where = "kernel " + k.get("name")->as_string();
    require(ints(k.get("global"), 3) && ints(k.get("local"), 3),
            where + ": launch geometry global=" + repr(k.get("global")) + " local=" + repr(k.get("local")));
    std::vector<int64_t> g = int_list(*k.get("global")), l = int_list(*k.get("local"));
    require(g[0] % l[0] == 0 && g[1] % l[1] == 0 && g[2] % l[2] == 0,
            where + ": global size " + list_repr(g) + " is not a multiple of the local size " + list_repr(l));
    if (target == "vulkan") {
        const Json* span = k.get("shader");
        Json empty = Json::object();
        if (!truthy(span)) span = &empty;
        const Json* start = span->get("offset");
        const Json* length = span->get("length");
        int64_t chars = code_points(source), end = 0;
        bool ok = py_int(start) && py_int(length) && int_value(start) >= 0 &&
                  add_ok(int_value(start), int_value(length), &end) && end <= chars && int_value(length) > 0;
        require(ok, where + ": shader span " + span->repr() + " lies outside the source section (" + std::to_string(chars) + " characters)");
        require(k.get("bindings") && k.get("bindings")->is_array(), where + ": no binding list");
    } else {
        const Json* entry = k.get("entry");
        require(!entry || entry->is_string(), where + ": entry " + (entry ? entry->repr() : std::string()) + " is not a function name");
        require(kernel_in_source(source, kernel_entry(k)), where + (entry ? " (function " + kernel_entry(k) + ")" : std::string()) + " is not in the OpenCL source");
    }
}

// ------------------------------------------------------------- storage/program.py storage_problem
std::string texel_of(const Json& t) {
    const Json* texel = t.get("texel");
    return truthy(texel) && texel->is_string() ? texel->as_string() : t.get("dtype")->as_string();
}

int64_t bytes_of(const Json& t) { return t.get("bytes")->as_int(); }

// A texture's origin in its allocation's image: (x0, y0, first layer); a texture that is not
// placed sits at the image's origin. (check_tensor validated "origin".)
std::array<int64_t, 3> origin_of(const Json& t) {
    const Json* o = t.get("origin");
    if (!o || !o->is_array() || o->items().size() != 2) return {0, 0, 0};
    return {o->items()[0].as_int(), o->items()[1].as_int(), 0};
}

// Whether two textures of one allocation cover a common texel (their boxes at their origins).
bool images_overlap(const Json& t, const Json& u) {
    std::array<int64_t, 3> a = origin_of(t), b = origin_of(u);
    for (size_t j = 0; j < 3; ++j) {
        int64_t ea = a[j] + t.get("image")->items()[j].as_int(), eb = b[j] + u.get("image")->items()[j].as_int();
        if (!(a[j] < eb && b[j] < ea)) return false;
    }
    return true;
}

std::string storage_problem(const Json& program) {
    const Json* storage = program.get("storage");
    if (!storage) return "";
    const std::vector<Json>& tensors = program.get("tensors")->items();
    if (!storage->is_array()) return "storage is not a list";
    const std::vector<Json>& allocs = storage->items();
    for (size_t i = 0; i < allocs.size(); ++i) {
        const Json& a = allocs[i];
        // a buffer allocation may hold 0 bytes (tensors of no elements; the runtime allocates a word)
        const Json* image = a.is_object() ? a.get("image") : nullptr;
        const bool has_image = image && !image->is_null() && !(image->is_array() && image->items().empty());
        if (!a.is_object() || !equals_int(a.get("id"), static_cast<int64_t>(i)) || !py_int(a.get("bytes")) ||
            int_value(a.get("bytes")) < (has_image ? 1 : 0))
            return "allocation " + std::to_string(i) + " is malformed: " + a.repr();
        if (image && !image->is_null()) {
            bool ok = image->is_array() && image->items().size() == 3;
            for (size_t j = 0; ok && j < 3; ++j) ok = py_int(&image->items()[j]) && int_value(&image->items()[j]) > 0;
            if (!ok) return "allocation " + std::to_string(i) + ": image " + image->repr() + " is not three positive integers";
            const Json* dt = a.get("dtype");
            bool fits = one_of(dt, kTexels);
            if (fits) {
                Extents e = {int_value(&image->items()[0]), int_value(&image->items()[1]), int_value(&image->items()[2])};
                fits = image_bytes(e, dt->as_string()) == int_value(a.get("bytes"));
            }
            if (!fits)
                return "allocation " + std::to_string(i) + ": a " + image->repr() + " image of " + repr(dt) + " texels is not " +
                       std::to_string(int_value(a.get("bytes"))) + " bytes";
        }
    }
    std::vector<int> order;  // allocation indices in order of first use (Python's dict order)
    std::map<int, std::vector<const Json*>> users;
    for (const Json& t : tensors) {
        const Json* kj = t.get("storage");
        const Json* oj = t.get("offset");
        Json zero = Json::of_int(0);
        if (!oj) oj = &zero;
        const std::string& name = t.get("name")->as_string();
        if (!strict_int(kj) || kj->as_int() < 0 || kj->as_int() >= static_cast<int64_t>(allocs.size()))
            return "tensor " + t.get("id")->repr() + " (" + name + ") uses allocation " + repr(kj) + ", which does not exist (" +
                   std::to_string(allocs.size()) + " allocations)";
        int k = static_cast<int>(kj->as_int());
        const Json& a = allocs[static_cast<size_t>(k)];
        const Json* align = a.get("alignment");
        bool bad = !strict_int(oj) || oj->as_int() < 0;
        if (!bad && oj->as_int()) {
            if (truthy(t.get("image"))) {
                bad = true;
            } else {
                int64_t alignment = truthy(align) && py_int(align) ? int_value(align) : 1;
                if (truthy(align) && !py_int(align)) return "tensor " + name + ": allocation " + std::to_string(k) + " has alignment " + align->repr();
                int64_t m = oj->as_int() % alignment;  // Python's modulo: the sign of the divisor
                if (m != 0 && (m < 0) != (alignment < 0)) m += alignment;
                bad = m != 0;
            }
        }
        if (bad)
            return "tensor " + name + ": offset " + oj->repr() + " is not an aligned offset of allocation " + std::to_string(k) + " (alignment " +
                   (align ? (align->is_string() ? align->as_string() : align->repr()) : "None") + ")";
        const Json* aimage = a.get("image");
        bool a_is_image = aimage && !aimage->is_null();
        bool t_is_image = truthy(t.get("image"));
        if (t_is_image != a_is_image)
            return "tensor " + name + " is " + (t_is_image ? "a texture" : "a buffer") + " but allocation " + std::to_string(k) + " is not";
        if (t_is_image) {
            bool fits = a.get("dtype")->as_string() == texel_of(t);
            std::array<int64_t, 3> at = origin_of(t);
            for (size_t j = 0; fits && j < 3; ++j) {
                int64_t end;
                fits = add_ok(at[j], t.get("image")->items()[j].as_int(), &end) && end <= int_value(&aimage->items()[j]);
            }
            if (!fits)
                return "tensor " + name + " (" + texel_of(t) + " image " + t.get("image")->repr() + " at " + list_repr({at[0], at[1]}) +
                       ") does not fit allocation " + std::to_string(k) + " (" + a.get("dtype")->as_string() + " image " + aimage->repr() + ")";
        } else {
            int64_t end;
            if (!add_ok(oj->as_int(), bytes_of(t), &end) || end > int_value(a.get("bytes")))
                return "tensor " + name + " (" + std::to_string(bytes_of(t)) + " bytes at offset " + std::to_string(oj->as_int()) +
                       ") does not fit allocation " + std::to_string(k) + " (" + std::to_string(int_value(a.get("bytes"))) + " bytes)";
        }
        if (!users.count(k)) order.push_back(k);
        users[k].push_back(&t);
    }
    // step_tensors and touched_steps
    std::map<int64_t, std::pair<int64_t, int64_t>> span;
    const std::vector<Json>& steps = program.get("steps")->items();
    std::vector<std::vector<int64_t>> bound(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
        std::vector<int64_t>& ids = bound[i];
        if (steps[i].get("op")->as_string() == "launch") ids = int_list(*steps[i].get("args"));
        else ids = {steps[i].get("src")->as_int(), steps[i].get("dst")->as_int()};
        for (int64_t tid : ids) {
            auto it = span.find(tid);
            int64_t first = it == span.end() ? static_cast<int64_t>(i) : it->second.first;
            span[tid] = {first, static_cast<int64_t>(i)};
        }
    }
    auto span_of = [&](const Json* t) {
        auto it = span.find(t->get("id")->as_int());
        return it == span.end() ? std::make_pair<int64_t, int64_t>(-1, -1) : it->second;
    };
    std::set<int64_t> outputs;
    for (const Json& o : program.get("outputs")->items()) outputs.insert(o.as_int());
    for (int k : order) {
        std::vector<const Json*> group = users[k];
        if (group.size() == 1) continue;
        for (const Json* t : group) {
            const std::string& kind = t->get("kind")->as_string();
            bool is_output = outputs.count(t->get("id")->as_int()) > 0;
            if ((kind != "intermediate" && kind != "workspace") || is_output)
                return "tensor " + t->get("name")->as_string() + " (" + kind + (is_output ? ", an output" : "") + ") shares allocation " +
                       std::to_string(k) + "; only intermediates may";
        }
        std::stable_sort(group.begin(), group.end(), [&](const Json* a, const Json* b) { return span_of(a) < span_of(b); });
        std::vector<const Json*> live;
        for (const Json* t : group) {
            int64_t first = span_of(t).first;
            std::vector<const Json*> still;
            for (const Json* u : live)
                if (span_of(u).second >= first) still.push_back(u);
            live = still;
            const Json* to = t->get("offset");
            int64_t lo = to ? to->as_int() : 0, hi = lo + bytes_of(*t);
            for (const Json* u : live) {
                const Json* uo = u->get("offset");
                int64_t u_lo = uo ? uo->as_int() : 0;
                if (truthy(t->get("image")) ? images_overlap(*t, *u) : (u_lo < hi && lo < u_lo + bytes_of(*u)))
                    return "tensors " + u->get("name")->as_string() + " and " + t->get("name")->as_string() + " share allocation " +
                           std::to_string(k) + " but are both live at step " + std::to_string(first);
            }
            live.push_back(t);
        }
    }
    // a texture a step writes (the tensors it touches first, not inputs or constants) shares no image
    // with another tensor the step binds: partners_of in storage/lifetimes.py
    std::set<int64_t> inputs;
    for (const Json& o : program.get("inputs")->items()) inputs.insert(o.as_int());
    std::map<int64_t, const Json*> by_id;
    for (const Json& t : tensors) by_id[t.get("id")->as_int()] = &t;
    for (size_t i = 0; i < steps.size(); ++i) {
        const std::vector<int64_t>& ids = bound[i];
        for (int64_t w : ids) {
            auto wt = by_id.find(w);
            if (wt == by_id.end() || span[w].first != static_cast<int64_t>(i) || inputs.count(w) || !truthy(wt->second->get("image")) ||
                wt->second->get("kind")->as_string() == "constant")
                continue;
            int64_t k = wt->second->get("storage")->as_int();
            for (int64_t u : ids) {
                auto ut = by_id.find(u);
                if (u != w && ut != by_id.end() && truthy(ut->second->get("image")) && ut->second->get("storage")->as_int() == k)
                    return "step " + std::to_string(i) + " writes " + wt->second->get("name")->as_string() + " and binds " +
                           ut->second->get("name")->as_string() + " in one image (allocation " + std::to_string(k) + ")";
            }
        }
    }
    return "";
}

// The program's states (relax_vk.core.states): each an input of fixed shape, updated by an output
// of the same dtype whose rows have the state's trailing shape, both buffers, none twice.
void check_states(const Json& program, const std::vector<Json>& ts, const std::map<std::string, int>& dims) {
    const Json* states = program.get("states");
    if (!states || states->is_null()) return;
    require(states->is_array(), "states " + states->repr() + " is not a list");
    auto listed = [&](const char* what, int64_t tid) {
        for (const Json& i : program.get(what)->items())
            if (i.as_int() == tid) return true;
        return false;
    };
    std::set<int64_t> used;
    for (const Json& s : states->items()) {
        const Json* tj = s.is_object() ? s.get("tensor") : nullptr;
        const Json* uj = s.is_object() ? s.get("update") : nullptr;
        require(s.is_object() && strict_int(tj) && strict_int(uj) && s.get("offset"), "state " + s.repr() + " is not {tensor, update, offset}");
        int64_t n = static_cast<int64_t>(ts.size());
        require(tj->as_int() >= 0 && tj->as_int() < n && uj->as_int() >= 0 && uj->as_int() < n, "state " + s.repr() + " names a tensor that does not exist");
        const Json& t = ts[static_cast<size_t>(tj->as_int())];
        const Json& u = ts[static_cast<size_t>(uj->as_int())];
        std::string where = "state " + t.get("name")->as_string() + " (updated by " + u.get("name")->as_string() + ")";
        require(listed("inputs", tj->as_int()), where + ": the state is not an input");
        require(listed("outputs", uj->as_int()), where + ": the update is not an output");
        require(!used.count(tj->as_int()) && !used.count(uj->as_int()), where + ": a tensor serves two states");
        used.insert(tj->as_int());
        used.insert(uj->as_int());
        require(!is_texture_scope(t.get("scope")->as_string()) && !is_texture_scope(u.get("scope")->as_string()), where + ": states are buffers");
        require(t.get("dtype")->as_string() == u.get("dtype")->as_string(), where + ": " + t.get("dtype")->as_string() + " updated by " +
                                                                               u.get("dtype")->as_string());
        const Json* texpr = t.get("shape_expr");
        require(!texpr || texpr->is_null(), where + ": a state has a fixed shape");
        std::vector<int64_t> ts_shape = int_list(*t.get("shape")), us_shape = int_list(*u.get("shape"));
        require(!ts_shape.empty() && ts_shape.size() == us_shape.size(), where + ": the update is not rows of the state");
        const Json* uexpr = u.get("shape_expr");
        for (size_t a = 1; a < ts_shape.size(); ++a) {
            bool fixed = !uexpr || uexpr->is_null() || uexpr->items()[a].is_int();
            require(fixed && us_shape[a] == ts_shape[a], where + ": the update " + list_repr(us_shape) + " is not rows of the state " + list_repr(ts_shape));
        }
        expr_of(*s.get("offset"), dims, where + ": offset");
    }
}

void validate_program(const Json& program, const std::string& source, const std::map<std::string, Constant>& constants) {
    require(program.is_object(), "the program is not an object");
    const Json* format = program.get("format");
    require(format && format->is_string() && format->as_string() == "relax_vk.program",
            "format " + repr(format) + ", expected 'relax_vk.program'");
    const Json* target = program.get("target");
    require(one_of(target, kTargets), "target " + repr(target) + " is not one of ('opencl', 'vulkan')");
    const Json* tensors = program.get("tensors");
    require(tensors && tensors->is_array(), "no tensor list");
    std::map<std::string, int> dims = check_dims(program);
    for (size_t i = 0; i < tensors->items().size(); ++i) check_tensor(tensors->items()[i], i, dims);
    const Json* kernels = program.get("kernels");
    require(kernels && kernels->is_array(), "no kernel list");
    std::set<std::string> names;
    for (const Json& k : kernels->items()) {
        check_kernel(k, target->as_string(), source);
        require(!names.count(k.get("name")->as_string()), "kernel " + k.get("name")->as_string() + " is listed twice");
        names.insert(k.get("name")->as_string());
    }
    const std::vector<Json>& ts = tensors->items();
    int64_t n = static_cast<int64_t>(ts.size());
    auto ref = [&](const Json* tid, const std::string& what) -> const Json& {
        require(strict_int(tid) && tid->as_int() >= 0 && tid->as_int() < n,
                what + " names tensor " + repr(tid) + ", which does not exist (" + std::to_string(n) + " tensors)");
        return ts[static_cast<size_t>(tid->as_int())];
    };
    const Json* steps = program.get("steps");
    require(steps && steps->is_array(), "no step list");
    for (size_t i = 0; i < steps->items().size(); ++i) {
        const Json& step = steps->items()[i];
        std::string at = "step " + std::to_string(i);
        const Json* op = step.is_object() ? step.get("op") : nullptr;
        require(step.is_object() && one_of(op, kSteps),
                at + ": op " + (step.is_object() ? repr(op) : step.repr()) + " is not one of ('launch', 'copy')");
        if (op->as_string() == "launch") {
            const Json* kernel = step.get("kernel");
            require(kernel && kernel->is_string() && names.count(kernel->as_string()),
                    at + " launches kernel " + repr(kernel) + ", which the program does not have");
            require(step.get("args") && step.get("args")->is_array(), at + " (" + kernel->as_string() + ") has no argument list");
            for (const Json& tid : step.get("args")->items()) ref(&tid, at + " (" + kernel->as_string() + ")");
            std::string where = at + " (" + kernel->as_string() + ")";
            std::set<int64_t> origins;  // the folded textures whose origin the step passes
            if (const Json* scalars = step.get("scalars"); scalars && !scalars->is_null()) {
                require(scalars->is_array(), where + ": scalars " + scalars->repr() + " is not a list");
                for (const Json& sc : scalars->items()) {
                    const Json* dtype = sc.is_object() ? sc.get("dtype") : nullptr;
                    const Json* origin = sc.is_object() ? sc.get("origin") : nullptr;
                    bool ok = sc.is_object() && strict_int(sc.get("index")) && sc.get("index")->as_int() >= 0 && dtype && dtype->is_string() &&
                              (dtype->as_string() == "int32" || dtype->as_string() == "int64") && (origin ? !sc.get("value") : sc.get("value") != nullptr);
                    require(ok, where + ": scalar argument " + sc.repr() + " is not {index, dtype int32|int64, value | origin}");
                    if (!origin) {
                        expr_of(*sc.get("value"), dims, where + ": scalar argument " + std::to_string(sc.get("index")->as_int()));
                        continue;
                    }
                    bool bound = false;
                    for (const Json& tid : step.get("args")->items()) bound = bound || (strict_int(origin) && tid.as_int() == origin->as_int());
                    require(bound && ts[static_cast<size_t>(origin->as_int())].get("origin"),
                            where + ": scalar argument " + sc.repr() + " is not the origin of a folded texture the step binds");
                    origins.insert(origin->as_int());
                }
            }
            for (const Json& tid : step.get("args")->items())
                require(origins.count(tid.as_int()) || origin_of(ts[static_cast<size_t>(tid.as_int())]) == std::array<int64_t, 3>{0, 0, 0},
                        where + ": binds texture " + ts[static_cast<size_t>(tid.as_int())].get("name")->as_string() +
                            " at an origin it does not pass");
            if (const Json* global = step.get("global"); global && !global->is_null()) {
                require(global->is_array() && global->items().size() == 3, where + ": global " + global->repr() + " is not three expressions");
                for (const Json& g : global->items()) expr_of(g, dims, where + ": global size");
            }
            if (const Json* loops = step.get("loop_iterations"); loops && !loops->is_null()) expr_of(*loops, dims, where + ": loop iterations");
        } else {
            const Json& src = ref(step.get("src"), "copy " + at);
            const Json& dst = ref(step.get("dst"), "copy " + at);
            require(bytes_of(src) == bytes_of(dst), "copy " + at + ": " + src.get("name")->as_string() + " (" + std::to_string(bytes_of(src)) +
                                                        " bytes) -> " + dst.get("name")->as_string() + " (" + std::to_string(bytes_of(dst)) + " bytes)");
        }
    }
    for (const char* what : {"inputs", "outputs"}) {
        const Json* ids = program.get(what);
        // a model of constants alone has no inputs
        require(ids && ids->is_array() && (!ids->items().empty() || std::string(what) == "inputs"), std::string("no ") + what);
        for (const Json& tid : ids->items()) ref(&tid, what);
    }
    check_states(program, ts, dims);
    // every run-time dim is an axis of an input on its own (what binds it at run time)
    std::set<int> bound;
    for (const Json& tid : program.get("inputs")->items()) {
        const Json* exprs = ts[static_cast<size_t>(tid.as_int())].get("shape_expr");
        if (!exprs || exprs->is_null()) continue;
        for (const Json& e : exprs->items())
            if (e.is_string() && dims.count(e.as_string())) bound.insert(dims.at(e.as_string()));
    }
    for (const auto& [name, index] : dims) require(bound.count(index), "dim " + name + " is no input's axis: nothing binds it at run time");
    std::string problem = storage_problem(program);
    require(problem.empty(), "storage assignment: " + problem);
    for (const Json& t : ts) {
        if (t.get("kind")->as_string() != "constant") continue;
        std::string id = std::to_string(t.get("id")->as_int());
        auto it = constants.find("t" + id);
        require(it != constants.end(), "constant tensor " + id + " (" + t.get("name")->as_string() + ") has no data");
        // a constant in snorm8 texels holds its bytes k (its values are k / 127)
        bool snorm = t.has("texel") && truthy(t.get("texel")) && t.get("texel")->as_string() == "snorm8";
        DType dtype = snorm ? DType::I8 : dtype_of(t.get("dtype"));
        require(it->second.shape == int_list(*t.get("shape")) && it->second.dtype == dtype,
                "constant " + t.get("name")->as_string() + ": data " + list_repr(it->second.shape) + " " + dtype_name(it->second.dtype) +
                    ", tensor " + list_repr(int_list(*t.get("shape"))) + " " + dtype_name(dtype));
    }
}

// ------------------------------------------------------------------------ typed program
Program to_program(const Json& j, const std::string& source) {
    Program p;
    p.target = j.get("target")->as_string();
    std::map<std::string, int> dims;
    if (const Json* dj = j.get("dims"); dj && dj->is_array())
        for (const Json& d : dj->items()) {
            dims[d.get("name")->as_string()] = static_cast<int>(p.dims.size());
            const Json* step = d.get("step");
            p.dims.push_back({d.get("name")->as_string(), d.get("min")->as_int(), d.get("max")->as_int(), step ? step->as_int() : 1});
        }
    for (const Json& tj : j.get("tensors")->items()) {
        Tensor t;
        t.id = static_cast<int>(p.tensors.size());
        t.name = tj.get("name")->as_string();
        t.shape = int_list(*tj.get("shape"));
        if (const Json* exprs = tj.get("shape_expr"); exprs && exprs->is_array())
            for (const Json& e : exprs->items()) t.shape_expr.push_back(ShapeExpr::parse(e, dims));
        t.dtype = dtype_from_name(tj.get("dtype")->as_string());
        t.host_dtype = tj.has("host_dtype") ? dtype_from_name(tj.get("host_dtype")->as_string()) : t.dtype;
        t.scope = tj.get("scope")->as_string();
        t.kind = tj.get("kind")->as_string();
        t.bytes = tj.get("bytes")->as_int();
        t.is_image = is_texture_scope(t.scope);
        if (t.is_image) image_extents(t.scope, t.shape, &t.image);
        if (const Json* o = tj.get("origin"); o && o->is_array()) {  // (check_tensor validated it)
            t.origin = {o->items()[0].as_int(), o->items()[1].as_int()};
            const auto& folded = tj.get("image")->items();  // (check_tensor validated it against the shape)
            t.image = {folded[0].as_int(), folded[1].as_int(), 1};
        }
        if (tj.has("texel") && truthy(tj.get("texel"))) t.texel = tj.get("texel")->as_string();
        if (const Json* r = tj.get("index_range"); r && r->is_array()) {  // (check_tensor validated it)
            t.has_index_range = true;
            if (r->items()[0].is_array())
                for (const Json& p : r->items()) t.index_range.push_back({p.items()[0].as_int(), p.items()[1].as_int()});
            else
                t.index_range.push_back({r->items()[0].as_int(), r->items()[1].as_int()});
        }
        if (const Json* s = tj.get("storage"); s && s->is_int()) t.storage = static_cast<int>(s->as_int());
        if (const Json* o = tj.get("offset"); o && o->is_int()) t.offset = o->as_int();
        p.tensors.push_back(t);
    }
    for (const Json& kj : j.get("kernels")->items()) {
        Kernel k;
        k.name = kj.get("name")->as_string();
        k.entry = kernel_entry(kj);
        for (size_t i = 0; i < 3; ++i) {
            k.global[i] = kj.get("global")->items()[i].as_int();
            k.local[i] = kj.get("local")->items()[i].as_int();
        }
        if (const Json* a = kj.get("arithmetic"); a && a->is_string()) k.half_arithmetic = a->as_string() == "float16";
        if (p.target == "vulkan") {  // (check_kernel validated the span and the list)
            const Json* span = kj.get("shader");
            k.shader_begin = code_point_offset(source, int_value(span->get("offset")));
            k.shader_end = code_point_offset(source, int_value(span->get("offset")) + int_value(span->get("length")));
            for (const Json& b : kj.get("bindings")->items()) k.bindings.push_back(b.is_string() ? b.as_string() : b.repr());
            if (const Json* w = kj.get("workgroup_bytes"); w && w->is_int()) k.workgroup_bytes = w->as_int();
            if (const Json* n = kj.get("loop_iterations"); n && n->is_int()) k.loop_iterations = n->as_int();
        }
        p.kernel_index[k.name] = p.kernels.size();
        p.kernels.push_back(k);
    }
    for (const Json& sj : j.get("steps")->items()) {
        Step s;
        if (sj.get("op")->as_string() == "launch") {
            s.op = Step::Launch;
            s.kernel = sj.get("kernel")->as_string();
            for (const Json& a : sj.get("args")->items()) s.args.push_back(static_cast<int>(a.as_int()));
            if (const Json* scalars = sj.get("scalars"); scalars && scalars->is_array())
                for (const Json& sc : scalars->items()) {
                    // a texture's origin: the tensor's own (validated: the tensor is placed and bound by this step)
                    const Json* origin = sc.get("origin");
                    ShapeExpr value = ShapeExpr::constant(0);
                    if (origin) {  // (texture_origins.py: y0 << 16 | x0)
                        const Tensor& t = p.tensors[static_cast<size_t>(origin->as_int())];
                        value = ShapeExpr::constant(t.origin[1] * 65536 + t.origin[0]);
                    } else {
                        value = ShapeExpr::parse(*sc.get("value"), dims);
                    }
                    s.scalars.push_back({static_cast<int>(sc.get("index")->as_int()), dtype_from_name(sc.get("dtype")->as_string()), value});
                }
            if (const Json* global = sj.get("global"); global && global->is_array())
                for (const Json& g : global->items()) s.global.push_back(ShapeExpr::parse(g, dims));
            if (const Json* loops = sj.get("loop_iterations"); loops && !loops->is_null()) s.loop_iterations.push_back(ShapeExpr::parse(*loops, dims));
        } else {
            s.op = Step::Copy;
            s.src = static_cast<int>(sj.get("src")->as_int());
            s.dst = static_cast<int>(sj.get("dst")->as_int());
        }
        p.steps.push_back(s);
    }
    if (const Json* states = j.get("states"); states && states->is_array())
        for (const Json& sj : states->items())
            p.states.push_back({static_cast<int>(sj.get("tensor")->as_int()), static_cast<int>(sj.get("update")->as_int()),
                                ShapeExpr::parse(*sj.get("offset"), dims)});
    for (const Json& i : j.get("inputs")->items()) p.inputs.push_back(static_cast<int>(i.as_int()));
    for (const Json& o : j.get("outputs")->items()) p.outputs.push_back(static_cast<int>(o.as_int()));
    if (const Json* storage = j.get("storage")) {
        p.has_storage = true;
        for (const Json& aj : storage->items()) {
            Allocation a;
            a.bytes = int_value(aj.get("bytes"));
            const Json* image = aj.get("image");
            a.is_image = image && !image->is_null();
            if (a.is_image) {
                for (size_t i = 0; i < 3; ++i) a.image[i] = int_value(&image->items()[i]);
                a.dtype = aj.get("dtype")->as_string();
            }
            p.storage.push_back(a);
        }
    }
    return p;
}

// strict UTF-8 (Python's bytes.decode()): no overlongs, no surrogates, nothing above U+10FFFF
bool valid_utf8(const uint8_t* s, size_t n, size_t* bad) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            *bad = i;
            return false;
        }
        if (i + len > n) {
            *bad = i;
            return false;
        }
        for (size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) {
                *bad = i;
                return false;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
            *bad = i;
            return false;
        }
        i += len;
    }
    return true;
}

}  // namespace

// ------------------------------------------------------------------------------- public
std::string list_repr(const int64_t* v, size_t n) {
    std::string out = "[";
    for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "]";
}

int64_t Tensor::elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // validated: no overflow (bytes = elements * itemsize fits)
    return n;
}

const char* Tensor::texel_dtype() const { return texel.empty() ? dtype_name(dtype) : texel.c_str(); }

int64_t Tensor::stored_bytes() const { return is_image ? image_bytes(image, texel_dtype()) : bytes; }

const Kernel* Program::kernel(const std::string& name) const {
    auto it = kernel_index.find(name);
    return it == kernel_index.end() ? nullptr : &kernels[it->second];
}

size_t texel_itemsize(const std::string& texel) { return texel == "float16" ? 2 : texel == "snorm8" ? 1 : 4; }

void convert_texels(const std::string& texel, const void* src, DType d, void* dst, size_t n) {
    if (texel != "snorm8") {
        convert(dtype_from_name(texel), src, d, dst, n);
        return;
    }
    std::vector<float> values(n);
    const int8_t* k = static_cast<const int8_t*>(src);
    for (size_t i = 0; i < n; ++i) values[i] = std::max(-1.0f, static_cast<float>(k[i]) / 127.0f);
    convert(DType::F32, values.data(), d, dst, n);
}

const void* constant_upload(const Tensor& t, const Constant& c, const void* data, std::vector<uint8_t>& scratch, bool* as_texels) {
    *as_texels = false;
    if (c.dtype == t.dtype) return data;
    // snorm8 bytes of a float32 tensor (validate_program holds that nothing else differs)
    if (t.texel == "snorm8") {
        *as_texels = true;
        return data;
    }
    size_t n = static_cast<size_t>(t.elements());
    scratch.resize(n * sizeof(float));
    convert_texels("snorm8", data, DType::F32, scratch.data(), n);
    return scratch.data();
}

int64_t image_bytes(const Extents& image, const std::string& dtype) {
    int64_t n = dtype == "float16" ? 8 : dtype == "snorm8" ? 4 : 16;
    for (int64_t v : image)
        if (!mul_ok(n, v, &n)) return -1;
    return n;
}

uint32_t crc32(const uint8_t* data, size_t size) {
    static uint32_t table[256];
    static bool ready = [] {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        return true;
    }();
    (void)ready;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

// The shape variants of `program` (relax_vk.serialization.artifact.with_variants), each parsed as an
// artifact of its own and checked against the generic program: every dim given once, in its range
// and on its step, no two variants at the same dims; the variant's dims all fixed, no states, the
// same target, and inputs and outputs of the generic program's dtypes and of its shapes at `dims`.
static std::vector<Variant> parse_variants(const Json& program, const Artifact& generic, const std::string& what) {
    std::vector<Variant> out;
    const Json* list = program.get("variants");
    if (!list || list->is_null()) return out;
    auto fail = [&](const std::string& message) -> Error { return Error(RVK_ERROR_ARTIFACT, what + ": invalid program: " + message); };
    const Program& p = generic.program;
    if (!list->is_array()) throw fail("variants " + list->repr() + " is not a list");
    if (p.dims.empty() && !list->items().empty()) throw fail("shape variants in a program without run-time dims");
    if (!p.states.empty() && !list->items().empty()) throw fail("shape variants in a program with states");
    for (size_t i = 0; i < list->items().size(); ++i) {
        const Json& entry = list->items()[i];
        std::string at = "variant " + std::to_string(i);
        const Json* dims = entry.is_object() ? entry.get("dims") : nullptr;
        const Json* constant = entry.is_object() ? entry.get("constant") : nullptr;
        if (!dims || !dims->is_object() || !constant || !constant->is_string()) throw fail(at + ": " + entry.repr() + " is not {dims, constant}");
        Variant v;
        for (const DimRange& d : p.dims) {
            const Json* value = dims->get(d.name);
            if (!strict_int(value)) throw fail(at + ": no integer value for dim " + d.name);
            int64_t x = value->as_int();
            if (x < d.min || x > d.max || x % d.step)
                throw fail(at + ": " + d.name + " = " + std::to_string(x) + " is outside its range " + std::to_string(d.min) + ".." +
                           std::to_string(d.max) + (d.step > 1 ? " or off its step " + std::to_string(d.step) : ""));
            v.dims.push_back(x);
        }
        if (dims->members().size() != p.dims.size()) throw fail(at + ": dims " + dims->repr() + " name a dim the program does not have");
        for (const Variant& other : out)
            if (other.dims == v.dims) throw fail(at + ": a second variant at " + dims->repr());
        auto it = generic.constant_table.find(constant->as_string());
        if (it == generic.constant_table.end() || it->second.dtype != DType::U8)
            throw fail(at + ": constant " + repr(constant) + " is not a uint8 constant of the artifact");
        v.artifact = parse_artifact(reinterpret_cast<const uint8_t*>(generic.constants.data()) + it->second.offset, it->second.nbytes,
                                    what + " (" + at + ", " + dims->repr() + ")");
        const Program& q = v.artifact->program;
        if (!q.dims.empty() || !q.states.empty() || !v.artifact->variants.empty() || q.target != p.target)
            throw fail(at + ": a variant is a " + p.target + " program with every dim fixed, no states and no variants of its own");
        for (const char* side : {"input", "output"}) {
            const std::vector<int>& mine = std::string(side) == "input" ? p.inputs : p.outputs;
            const std::vector<int>& theirs = std::string(side) == "input" ? q.inputs : q.outputs;
            if (mine.size() != theirs.size())
                throw fail(at + ": " + std::to_string(theirs.size()) + " " + side + "s, the program has " + std::to_string(mine.size()));
            for (size_t k = 0; k < mine.size(); ++k) {
                const Tensor& a = p.tensors[static_cast<size_t>(mine[k])];
                const Tensor& b = q.tensors[static_cast<size_t>(theirs[k])];
                std::vector<int64_t> shape = a.shape;
                try {
                    for (size_t ax = 0; ax < a.shape_expr.size(); ++ax) shape[ax] = a.shape_expr[ax].eval(v.dims);
                } catch (const std::exception&) {
                    throw fail(at + ": " + side + " " + a.name + "'s shape cannot be computed at " + dims->repr());
                }
                if (b.shape != shape || b.dtype != a.dtype || b.host_dtype != a.host_dtype)
                    throw fail(at + ": " + side + " " + std::to_string(k) + " is " + list_repr(b.shape) + " " + dtype_name(b.dtype) + ", the program's is " +
                               list_repr(shape) + " " + dtype_name(a.dtype) + " at " + dims->repr());
            }
        }
        out.push_back(std::move(v));
    }
    return out;
}

std::shared_ptr<const Artifact> parse_artifact(const uint8_t* data, size_t size, const std::string& what) {
    auto fail = [&](const std::string& message) -> Error { return Error(RVK_ERROR_ARTIFACT, what + ": " + message); };
    if (size < kHeaderSize)
        throw fail("truncated: " + std::to_string(size) + " bytes, the header alone is " + std::to_string(kHeaderSize));
    if (std::memcmp(data, kMagic, 8) != 0) {
        std::string magic = "b'";
        for (size_t i = 0; i < 8; ++i) {
            unsigned char c = data[i];
            char buf[8];
            if (c == '\\' || c == '\'') magic += std::string("\\") + static_cast<char>(c);
            else if (c >= 0x20 && c < 0x7F) magic += static_cast<char>(c);
            else {
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                magic += buf;
            }
        }
        throw fail("not a relax_vk artifact (magic " + magic + "', expected b'RELAXVK\\x00')");
    }
    uint32_t version = u32(data + 8), count = u32(data + 12);
    if (version != kVersion)
        throw fail("format version " + std::to_string(version) + ", this relax_vk reads version " + std::to_string(kVersion) + "; rebuild the model");
    if (count != 3) throw fail(std::to_string(count) + " sections, expected 3");
    std::string parts[3];
    uint64_t end = kHeaderSize;
    for (size_t i = 0; i < 3; ++i) {
        const uint8_t* entry = data + 16 + 24 * i;
        uint64_t offset = u64(entry), length = u64(entry + 8);
        uint32_t crc = u32(entry + 16);
        if (offset < end || offset > size || length > size - offset) {
            // Python prints offset + size as an exact integer
            unsigned __int128 past = static_cast<unsigned __int128>(offset) + length;
            std::string past_text;
            do {
                past_text.insert(past_text.begin(), static_cast<char>('0' + static_cast<int>(past % 10)));
                past /= 10;
            } while (past);
            throw fail(std::string("section '") + kSections[i] + "' [" + std::to_string(offset) + ", " + past_text + ") lies outside the file (" +
                       std::to_string(size) + " bytes): truncated?");
        }
        for (uint64_t k = end; k < offset; ++k)
            if (data[k]) throw fail(std::string("padding before section '") + kSections[i] + "' is corrupted (not zero)");
        end = offset + length;
        if (crc32(data + offset, length) != crc) throw fail(std::string("section '") + kSections[i] + "' is corrupted (CRC32 mismatch)");
        parts[i].assign(reinterpret_cast<const char*>(data + offset), length);
    }
    if (end != size) throw fail(std::to_string(size - end) + " unexpected bytes after the last section");
    size_t bad;
    for (size_t i = 0; i < 2; ++i)
        if (!valid_utf8(reinterpret_cast<const uint8_t*>(parts[i].data()), parts[i].size(), &bad))
            throw fail(std::string("unreadable program section: ") + "'utf-8' codec can't decode the " + kSections[i] + " section at byte " +
                       std::to_string(bad));
    Json program;
    try {
        program = Json::parse(parts[0]);
    } catch (const JsonError& err) {
        throw fail(std::string("unreadable program section: ") + err.what());
    }
    auto artifact = std::make_shared<Artifact>();
    artifact->source = parts[1];
    artifact->constants = parts[2];
    // the constant table (Artifact.from_bytes): every constant inside its section, 16-byte aligned
    const Json* table = program.is_object() ? program.get("constants") : nullptr;
    if (table && !table->is_array()) throw fail("invalid program: the constant table is not a list");
    if (table) {
        for (const Json& entry : table->items()) {
            const Json* name = entry.get("name");
            const Json* offset = entry.get("offset");
            const Json* nbytes = entry.get("nbytes");
            const Json* shape = entry.get("shape");
            if (!entry.is_object() || !name || !name->is_string() || !strict_int(offset) || !strict_int(nbytes) || !ints(shape, 0, false) ||
                offset->as_int() < 0 || nbytes->as_int() < 0)
                throw fail("invalid program: constant table entry " + entry.repr() + " is malformed");
            DType dtype = dtype_from_name(entry.get("dtype") && entry.get("dtype")->is_string() ? entry.get("dtype")->as_string() : "");
            if (dtype == DType::Invalid) throw fail("invalid program: constant " + name->as_string() + ": unknown dtype " + repr(entry.get("dtype")));
            uint64_t start = static_cast<uint64_t>(offset->as_int()), n = static_cast<uint64_t>(nbytes->as_int());
            if (start % kAlign || start > parts[2].size() || n > parts[2].size() - start)
                throw fail("constant " + name->as_string() + " at [" + std::to_string(start) + ", " + std::to_string(start + n) +
                           ") is misaligned or outside its section");
            std::vector<int64_t> dims = int_list(*shape);
            int64_t elements = 0;
            uint64_t count = n / dtype_size(dtype);
            if (!product(dims, 0, dims.size(), &elements) || static_cast<uint64_t>(elements) != count)
                throw fail("constant " + name->as_string() + ": " + std::to_string(n) + " bytes of " + dtype_name(dtype) + " do not hold shape " +
                           list_repr(dims));
            artifact->constant_table[name->as_string()] = Constant{dtype, dims, static_cast<size_t>(start), static_cast<size_t>(count * dtype_size(dtype))};
        }
    }
    try {
        validate_program(program, artifact->source, artifact->constant_table);
        if (program.get("target")->as_string() == "opencl") check_launch_signatures(program, artifact->source);
    } catch (const Invalid& err) {
        throw fail(std::string("invalid program: ") + err.what());
    }
    artifact->program = to_program(program, artifact->source);
    artifact->variants = parse_variants(program, *artifact, what);
    return artifact;
}

Program with_float_texels(const Program& p, const std::string& texel) {
    Program out = p;
    for (Tensor& t : out.tensors)
        if (t.texel == texel) t.texel.clear();
    for (Allocation& a : out.storage)
        if (a.is_image && a.dtype == texel) {
            a.dtype = "float32";
            a.bytes = image_bytes(a.image, "float32");
        }
    return out;
}

void allocations(const Program& p, std::vector<Allocation>& objects, std::vector<Place>& places) {
    objects.clear();
    places.clear();
    if (!p.has_storage) {
        for (const Tensor& t : p.tensors) {
            Allocation a;
            a.bytes = t.stored_bytes();
            a.is_image = t.is_image;
            a.image = t.image;
            if (t.is_image) a.dtype = t.texel_dtype();
            objects.push_back(a);
            places.push_back({t.id, 0});
        }
        return;
    }
    objects = p.storage;
    for (const Tensor& t : p.tensors) places.push_back({t.storage, t.offset});
}

Placement device_placement(const Program& p, int64_t alignment, int64_t max_alloc_bytes) {
    std::vector<Allocation> objects;
    std::vector<Place> places;
    allocations(p, objects, places);
    std::vector<int> users(objects.size(), 0);
    for (const Place& pl : places) ++users[static_cast<size_t>(pl.allocation)];
    Placement out;
    for (size_t k = 0; k < objects.size(); ++k) {
        const Allocation& a = objects[k];
        if (!a.is_image && users[k] > 1 && a.bytes > max_alloc_bytes) out.allocations.push_back(std::nullopt);
        else out.allocations.push_back(a);
        if (out.allocations.back()) out.device_bytes += a.bytes;
        out.shared.push_back(users[k] > 1);
    }
    for (size_t i = 0; i < p.tensors.size(); ++i) {
        const Place& pl = places[i];
        if (!out.allocations[static_cast<size_t>(pl.allocation)] || pl.offset % alignment) {
            out.places.push_back(std::nullopt);
            out.device_bytes += p.tensors[i].bytes;
        } else {
            out.places.push_back(pl);
        }
    }
    return out;
}

int64_t allocated_bytes(const Program& p) {
    std::vector<Allocation> objects;
    std::vector<Place> places;
    allocations(p, objects, places);
    int64_t total = 0;
    for (const Allocation& a : objects) total += a.bytes;
    return total;
}

}  // namespace rvk
