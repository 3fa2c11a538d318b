#include "session.hpp"

#include <cstdio>

#include <algorithm>
#include <climits>
#include <map>
#include <stdexcept>

namespace rvk {

void half_arithmetic_problem(const Program& program, bool has_half, const std::string& device, const std::string& feature) {
    if (has_half) return;
    for (const Tensor& t : program.tensors)  // (a half texture is read and written as float: images need no half arithmetic)
        if (!t.is_image && t.dtype == DType::F16)
            throw Error(RVK_ERROR_LIMIT, "tensor " + t.name + " is float16 in a buffer, which kernels compute on in float16, and " + device + " lacks " +
                                             feature + ": build the model in float32 for this device (a decoder: without --fp16)");
    for (const Kernel& k : program.kernels)
        if (k.half_arithmetic)
            throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + " computes in float16 (half arithmetic) and " + device + " lacks " + feature +
                                             ": rebuild it with ScopeOptions(arithmetic='fp32') (precision='fp16' still stores half texels)");
}

namespace {
//: the most host bytes an input or output of run-time shape is held at from load (its bound's)
constexpr int64_t kHeldHostBytes = int64_t{64} << 20;
}  // namespace

void step_times(const std::vector<std::string>& names, const std::vector<uint64_t>& begins, const std::vector<uint64_t>& ends,
                std::vector<ProfileEntry>& profile, double& span_ms) {
    profile.clear();
    bool any = false;
    uint64_t last_end = 0;
    for (size_t i = 0; i < names.size(); ++i) {
        uint64_t start = any ? std::max(begins[i], last_end) : begins[i];
        uint64_t e = std::max(ends[i], start);
        profile.push_back({names[i], static_cast<double>(e - start) * 1e-6, static_cast<double>(start - begins[0]) * 1e-6});
        last_end = e;
        any = true;
    }
    span_ms = any ? static_cast<double>(last_end - begins[0]) * 1e-6 : 0.0;
}

namespace {

std::string dim_value_repr(const Program& p, const std::vector<int64_t>& dims) {
    std::string out;
    for (size_t i = 0; i < p.dims.size(); ++i) out += (i ? ", " : "") + p.dims[i].name + "=" + std::to_string(dims[i]);
    return out;
}

// `what()` names the value in an error (made only then: a decoder evaluates thousands per token)
template <typename What>
int64_t eval_or_throw(const ShapeExpr& e, const Program& p, const std::vector<int64_t>& dims, What what) {
    try {
        return e.eval(dims);
    } catch (const std::domain_error& err) {
        throw Error(RVK_ERROR_ARGUMENT, what() + ": " + e.repr(p.dims) + " at " + dim_value_repr(p, dims) + " is " + err.what());
    }
}

}  // namespace

ShapePlan::ShapePlan(const Program& p) {
    std::map<ShapeExpr, int> index;
    auto intern = [&](const ShapeExpr& e) {
        auto [at, fresh] = index.emplace(e, static_cast<int>(exprs.size()));
        if (fresh) exprs.push_back(e);
        return at->second;
    };
    for (const Tensor& t : p.tensors) {
        axes.emplace_back();
        for (const ShapeExpr& e : t.shape_expr) axes.back().push_back(intern(e));
    }
    for (const Step& s : p.steps) {
        scalars.emplace_back();
        global.emplace_back();
        const Kernel* k = s.op == Step::Launch ? p.kernel(s.kernel) : nullptr;
        kernels.push_back(k ? static_cast<int>(k - p.kernels.data()) : -1);
        if (s.op != Step::Launch) continue;
        for (const ScalarArg& a : s.scalars) scalars.back().push_back(intern(a.value));
        for (const ShapeExpr& e : s.global) global.back().push_back(intern(e));
    }
}

void evaluate_shapes(const Program& p, const ShapePlan& plan, const std::vector<int64_t>& dims, RunShapes& r) {
    bool fresh = r.shapes.size() != p.tensors.size() || r.global.size() != p.steps.size();
    if (fresh) {  // (sized once; later calls overwrite what depends on the dims, allocating nothing)
        r = RunShapes();
        r.shapes.resize(p.tensors.size());
        r.bytes.resize(p.tensors.size());
        r.scalars.resize(p.steps.size());
        r.global.assign(p.steps.size(), {1, 1, 1});
    }
    r.dims = dims;
    // every distinct expression once; one that cannot be computed is evaluated again where it is
    // first used, for the error that names that use
    std::vector<int64_t> values(plan.exprs.size());
    std::vector<char> failed(plan.exprs.size(), 0);
    for (size_t j = 0; j < plan.exprs.size(); ++j) {
        try {
            values[j] = plan.exprs[j].eval(dims);
        } catch (const std::domain_error&) {
            failed[j] = 1;
        }
    }
    auto value = [&](int j, auto what) { return failed[static_cast<size_t>(j)] ? eval_or_throw(plan.exprs[static_cast<size_t>(j)], p, dims, what) : values[static_cast<size_t>(j)]; };
    for (size_t ti = 0; ti < p.tensors.size(); ++ti) {
        const Tensor& t = p.tensors[ti];
        std::vector<int64_t>& shape = r.shapes[ti];
        const std::vector<int>& axes = plan.axes[ti];
        if (axes.empty()) {
            if (fresh) {
                shape = t.shape;
                r.bytes[ti] = t.bytes;
            }
            continue;
        }
        shape.resize(axes.size());
        int64_t n = static_cast<int64_t>(dtype_size(t.dtype));
        for (size_t a = 0; a < shape.size(); ++a) {
            shape[a] = value(axes[a], [&] { return "tensor " + t.name + " axis " + std::to_string(a); });
            if (shape[a] < 0 || __builtin_mul_overflow(n, shape[a], &n))
                throw Error(RVK_ERROR_ARGUMENT, "tensor " + t.name + ": shape " + list_repr(shape) + " at " + dim_value_repr(p, dims));
        }
        if (n > t.bytes)  // never: the exporter plans at the bound; a wrong bound must not write past the storage
            throw Error(RVK_ERROR_ARGUMENT, "tensor " + t.name + ": shape " + list_repr(shape) + " at " + dim_value_repr(p, dims) +
                                                " is larger than the " + list_repr(t.shape) + " its storage is planned for");
        r.bytes[ti] = n;
    }
    for (size_t si = 0; si < p.steps.size(); ++si) {
        const Step& s = p.steps[si];
        if (plan.kernels[si] < 0) continue;
        const Kernel* k = &p.kernels[static_cast<size_t>(plan.kernels[si])];
        std::vector<int64_t>& scalars = r.scalars[si];
        scalars.resize(s.scalars.size());
        for (size_t i = 0; i < s.scalars.size(); ++i) {
            const ScalarArg& a = s.scalars[i];
            int64_t v = value(plan.scalars[si][i], [&] { return "kernel " + s.kernel + " argument " + std::to_string(a.index); });
            if (a.dtype == DType::I32 && (v < INT32_MIN || v > INT32_MAX))
                throw Error(RVK_ERROR_ARGUMENT, "kernel " + s.kernel + " argument " + std::to_string(a.index) + ": " + std::to_string(v) +
                                                    " does not fit its int32 at " + dim_value_repr(p, dims));
            scalars[i] = v;
        }
        for (size_t i = 0; i < 3; ++i) {
            int64_t g = plan.global[si].empty() ? k->global[i] : value(plan.global[si][i], [&] { return "kernel " + s.kernel + " global size"; });
            if (g < 0 || (k->local[i] && g % k->local[i]))
                throw Error(RVK_ERROR_ARGUMENT, "kernel " + s.kernel + ": global size " + std::to_string(g) + " at " + dim_value_repr(p, dims) +
                                                    " is not a multiple of its local size " + std::to_string(k->local[i]));
            r.global[si][i] = static_cast<size_t>(g);
        }
    }
}

Session::Session(std::shared_ptr<const Artifact> artifact) : artifact_(std::move(artifact)), program_(artifact_->program) {
    for (const State& st : program_.states) {  // the caller neither sets a state nor reads its update
        program_.inputs.erase(std::find(program_.inputs.begin(), program_.inputs.end(), st.tensor));
        program_.outputs.erase(std::find(program_.outputs.begin(), program_.outputs.end(), st.update));
    }
    inputs_.resize(program_.inputs.size());
    input_shapes_.resize(program_.inputs.size());
    input_set_.resize(program_.inputs.size());
    // An input or output of run-time shape is sized by each run, within host memory held at its
    // bound from here (made and touched once, up to kHeldHostBytes a tensor): a first run at a
    // larger size than any before allocated it and faulted its pages in, part of the 2-3x a
    // first run at a new widest size cost on the H200 (PP-OCR rec at 640 and 1280).
    auto hold = [](std::vector<uint8_t>& v, int64_t bytes) {
        if (bytes > 0 && bytes <= kHeldHostBytes) {
            v.assign(static_cast<size_t>(bytes), 0);
            v.clear();
        }
    };
    for (size_t i = 0; i < inputs_.size(); ++i) {
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[i])];
        if (!t.shape_expr.empty()) hold(inputs_[i], t.bytes);
    }
    clear_inputs();
    for (int tid : program_.outputs) {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        size_t elements = t.shape_expr.empty() ? static_cast<size_t>(t.elements()) : 0;  // (run-time shapes: sized by each run)
        outputs_device_.emplace_back(elements * dtype_size(t.dtype));
        outputs_host_.emplace_back(elements * dtype_size(t.host_dtype));
        if (!t.shape_expr.empty()) {
            hold(outputs_device_.back(), t.bytes);
            hold(outputs_host_.back(), t.elements() * static_cast<int64_t>(dtype_size(t.host_dtype)));
        }
    }
    plan_ = ShapePlan(program_);
    if (program_.dims.empty()) evaluate_shapes(program_, plan_, {}, shapes_);
}

// relax_vk.runtime.session.Session.check_inputs, for one input
void Session::set_input(int index, const void* data, size_t size, const char* dtype, const int64_t* shape, int rank) {
    if (index < 0 || index >= static_cast<int>(inputs_.size()))
        throw Error(RVK_ERROR_ARGUMENT, "input index " + std::to_string(index) + " out of range (the model takes " +
                                            std::to_string(inputs_.size()) + " inputs)");
    const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[static_cast<size_t>(index)])];
    std::vector<int64_t> given_shape = t.shape;
    if (shape || rank) {
        if (rank < 0 || (rank > 0 && !shape)) throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": a shape of rank " + std::to_string(rank) + " and no extents");
        given_shape.assign(shape, shape + rank);
        if (t.shape_expr.empty() && given_shape != t.shape)
            throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": shape " + list_repr(given_shape) + ", expected " + list_repr(t.shape));
    } else if (!t.shape_expr.empty()) {
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + " has run-time dims: pass its shape");
    }
    if (!t.shape_expr.empty()) {  // each axis: a fixed size, or a dim within its range
        bool ok = given_shape.size() == t.shape.size();
        std::string expected = "[";
        for (size_t a = 0; a < t.shape_expr.size(); ++a) expected += (a ? ", " : "") + t.shape_expr[a].repr(program_.dims);
        expected += "]";
        if (!ok) throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": shape " + list_repr(given_shape) + ", expected " + expected);
        for (size_t a = 0; a < given_shape.size(); ++a) {
            const ShapeExpr& e = t.shape_expr[a];
            int d = e.dim();
            if (e.is_const() && e.eval({}) != given_shape[a])
                throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": shape " + list_repr(given_shape) + ", expected " + expected);
            if (d >= 0) {
                const DimRange& r = program_.dims[static_cast<size_t>(d)];
                const int64_t v = given_shape[a];
                auto refuse = [&](const std::string& why) {
                    return Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": axis " + std::to_string(a) + " (" + r.name + ") is " +
                                                         std::to_string(v) + ", " + why);
                };
                auto range = [&] { return std::to_string(r.min) + ".." + std::to_string(r.max); };  // (text made only to throw)
                if (v < r.min || v > r.max) throw refuse("outside " + r.name + "'s declared range " + range());
                if (v % r.step != 0) throw refuse("not a multiple of " + r.name + "'s step " + std::to_string(r.step) + " (declared range " + range() + ")");
            }
        }
    }
    int64_t elements = 1;
    for (int64_t v : given_shape) elements *= v;  // (within the bound: no overflow)
    DType given = dtype ? dtype_from_name(dtype) : t.host_dtype;
    if (given == DType::Invalid || (given != t.host_dtype && given != t.dtype))
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": dtype " + (dtype ? dtype : "?") + ", expected " + dtype_name(t.host_dtype));
    size_t expected = static_cast<size_t>(elements) * dtype_size(given);
    if (size != expected || (!data && size))
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": " + std::to_string(size) + " bytes, expected " + std::to_string(expected) + " (" +
                                            list_repr(given_shape) + " " + dtype_name(given) + ")");
    input_set_[static_cast<size_t>(index)] = false;
    std::vector<uint8_t>& buffer = inputs_[static_cast<size_t>(index)];
    buffer.resize(static_cast<size_t>(elements) * dtype_size(t.dtype));
    if (!convert(given, data, t.dtype, buffer.data(), static_cast<size_t>(elements)))
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": " + dtype_name(t.host_dtype) + " values outside the " + dtype_name(t.dtype) +
                                            " range the device holds them in");
    if (t.has_index_range) check_index_values(t, buffer.data(), given_shape);
    input_shapes_[static_cast<size_t>(index)] = given_shape;
    input_set_[static_cast<size_t>(index)] = true;
}

// An input whose values index a table (Tensor::index_range): the first value outside the range is
// refused by name and position, before anything runs (the kernel would read past the table).
void Session::check_index_values(const Tensor& t, const uint8_t* data, const std::vector<int64_t>& shape) const {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    const size_t ranges = t.index_range.size();
    for (int64_t i = 0; i < n; ++i) {
        const int64_t lo = t.index_range[static_cast<size_t>(i) % ranges][0], hi = t.index_range[static_cast<size_t>(i) % ranges][1];
        int64_t v = 0;
        switch (t.dtype) {
            case DType::I8: v = reinterpret_cast<const int8_t*>(data)[i]; break;
            case DType::I16: v = reinterpret_cast<const int16_t*>(data)[i]; break;
            case DType::I32: v = reinterpret_cast<const int32_t*>(data)[i]; break;
            case DType::I64: v = reinterpret_cast<const int64_t*>(data)[i]; break;
            case DType::U8: v = reinterpret_cast<const uint8_t*>(data)[i]; break;
            case DType::U16: v = reinterpret_cast<const uint16_t*>(data)[i]; break;
            case DType::U32: v = reinterpret_cast<const uint32_t*>(data)[i]; break;
            case DType::U64: {
                uint64_t u = reinterpret_cast<const uint64_t*>(data)[i];
                v = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
                break;
            }
            default: return;  // (check_tensor: an integer input)
        }
        if (v >= lo && v <= hi) continue;
        std::vector<int64_t> at(shape.size());
        int64_t rest = i;
        for (size_t a = shape.size(); a-- > 0;) {
            at[a] = shape[a] ? rest % shape[a] : 0;
            rest = shape[a] ? rest / shape[a] : 0;
        }
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": value " + std::to_string(v) + " at " + list_repr(at) + " is outside " +
                                            std::to_string(lo) + ".." + std::to_string(hi) + ", the indices of the " +
                                            (ranges > 1 ? "axis it selects along (" : "table it selects from (") + std::to_string(hi + 1) +
                                            (ranges > 1 ? " entries)" : " rows)"));
    }
}

// The run-time dims' values from the inputs set (each in its range: set_input checked), every
// input's other axes checked against them.
std::vector<int64_t> Session::bind_dims() const {
    std::vector<int64_t> dims(program_.dims.size(), -1);
    std::vector<std::string> from(dims.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[i])];
        for (size_t a = 0; a < t.shape_expr.size(); ++a) {
            int d = t.shape_expr[a].dim();
            if (d < 0) continue;
            int64_t v = input_shapes_[i][a];
            if (dims[static_cast<size_t>(d)] >= 0 && dims[static_cast<size_t>(d)] != v)
                throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": axis " + std::to_string(a) + " (" + program_.dims[static_cast<size_t>(d)].name +
                                                    ") is " + std::to_string(v) + ", but input " + from[static_cast<size_t>(d)] + " gives " +
                                                    program_.dims[static_cast<size_t>(d)].name + " = " + std::to_string(dims[static_cast<size_t>(d)]));
            dims[static_cast<size_t>(d)] = v;
            from[static_cast<size_t>(d)] = t.name;
        }
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {  // axes that are expressions of the dims
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[i])];
        for (size_t a = 0; a < t.shape_expr.size(); ++a) {
            if (t.shape_expr[a].dim() >= 0 || t.shape_expr[a].is_const()) continue;
            int64_t want = eval_or_throw(t.shape_expr[a], program_, dims, [&] { return "input " + t.name + " axis " + std::to_string(a); });
            if (want != input_shapes_[i][a])
                throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": axis " + std::to_string(a) + " is " + std::to_string(input_shapes_[i][a]) +
                                                    "; " + t.shape_expr[a].repr(program_.dims) + " = " + std::to_string(want) + " at " +
                                                    dim_value_repr(program_, dims));
        }
    }
    return dims;
}

int64_t Session::bytes_now(int tid) const {
    const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
    return t.shape_expr.empty() || shapes_.bytes.empty() ? t.bytes : shapes_.bytes[static_cast<size_t>(tid)];
}

std::string Session::dims_text() const { return shapes_.dims.empty() ? "" : " at " + dim_value_repr(program_, shapes_.dims); }

std::vector<int64_t> Session::current_shape(int tid) const {
    const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
    if (t.shape_expr.empty()) return t.shape;
    for (size_t i = 0; i < program_.inputs.size(); ++i)
        if (program_.inputs[i] == tid && input_set_[i]) return input_shapes_[i];
    if (!shapes_.shapes.empty()) return shapes_.shapes[static_cast<size_t>(tid)];
    std::vector<int64_t> out;
    for (const ShapeExpr& e : t.shape_expr) out.push_back(e.is_const() ? e.eval({}) : -1);
    return out;
}

void Session::run() {
    for (size_t i = 0; i < inputs_.size(); ++i)
        if (!input_set_[i])
            throw Error(RVK_ERROR_ARGUMENT, "input " + program_.tensors[static_cast<size_t>(program_.inputs[i])].name + " is not set");
    if (!program_.dims.empty()) {
        std::vector<int64_t> dims = bind_dims();
        if (shapes_.shapes.empty() || dims != shapes_.dims) {
            evaluate_shapes(program_, plan_, dims, next_shapes_);  // (a refusal leaves shapes_ as it was)
            std::swap(shapes_, next_shapes_);
            shapes_ready_ = false;
        }
    }
    last_variant_ = -1;
    for (size_t v = 0; v < variants_.size(); ++v)
        if (variants_[v].dims == shapes_.dims) {
            run_variant(static_cast<int>(v));
            return;
        }
    if (!shapes_ready_) {
        shapes_changed();
        shapes_ready_ = true;
    }
    state_copies_.clear();
    for (const State& st : program_.states) {  // checked before anything runs: a refused run leaves the states as they were
        const Tensor& t = program_.tensors[static_cast<size_t>(st.tensor)];
        const Tensor& u = program_.tensors[static_cast<size_t>(st.update)];
        int64_t offset = eval_or_throw(st.offset, program_, shapes_.dims, [&] { return "state " + t.name + " offset"; });
        int64_t rows = shapes_.shapes[static_cast<size_t>(u.id)][0];
        if (offset < 0 || rows > t.shape[0] - offset)
            throw Error(RVK_ERROR_ARGUMENT, "state " + t.name + ": this run's " + u.name + " goes to rows " + std::to_string(offset) + ".." +
                                                std::to_string(offset + rows - 1) + ", outside its " + std::to_string(t.shape[0]) + " rows" + dims_text());
        int64_t row_bytes = t.shape[0] ? t.bytes / t.shape[0] : 0;
        state_copies_.push_back({u.id, t.id, offset * row_bytes, rows * row_bytes});
    }
    for (size_t i = 0; i < outputs_device_.size(); ++i) {
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.outputs[i])];
        int64_t bytes = shapes_.bytes[static_cast<size_t>(t.id)];
        outputs_device_[i].resize(static_cast<size_t>(bytes));
        outputs_host_[i].resize(static_cast<size_t>(bytes / static_cast<int64_t>(dtype_size(t.dtype))) * dtype_size(t.host_dtype));
    }
    execute(inputs_, outputs_device_);
    for (size_t i = 0; i < outputs_host_.size(); ++i) {  // Session.to_host
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.outputs[i])];
        convert(t.dtype, outputs_device_[i].data(), t.host_dtype, outputs_host_[i].data(), outputs_device_[i].size() / dtype_size(t.dtype));
    }
}

void Session::run_variant(int index) {
    Session& v = *variants_[static_cast<size_t>(index)].session;
    for (size_t i = 0; i < inputs_.size(); ++i) {  // (in the device dtype, which the variant's input has: parse_variants)
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[i])];
        v.set_input(static_cast<int>(i), inputs_[i].data(), inputs_[i].size(), dtype_name(t.dtype), input_shapes_[i].data(),
                    static_cast<int>(input_shapes_[i].size()));
    }
    v.run();
    for (size_t i = 0; i < outputs_host_.size(); ++i) {
        outputs_host_[i].resize(v.outputs_host_[i].size());
        std::copy(v.outputs_host_[i].begin(), v.outputs_host_[i].end(), outputs_host_[i].begin());
    }
    profile = v.profile;
    device_ms = v.device_ms;
    last_variant_ = index;
}

void Session::add_variant(std::vector<int64_t> dims, std::unique_ptr<Session> session) {
    device_bytes += session->device_bytes;
    device_objects += session->device_objects;
    if (!session->warnings.empty()) warnings += std::string(warnings.empty() ? "" : "\n") + "variant at " + dim_value_repr(program_, dims) + ": " + session->warnings;
    session->set_profiling(profiling_);
    variants_.push_back({std::move(dims), std::move(session)});
}

bool Session::warm_up_fixed(int runs) {
    if (!program_.dims.empty() || !program_.states.empty() || runs < 1) return false;
    const RunShapes fixed = shapes_;
    return run_zeros_at(std::vector<const RunShapes*>(static_cast<size_t>(runs), &fixed), "its fixed shape");
}

void Session::clear_inputs() {
    for (size_t i = 0; i < inputs_.size(); ++i) {
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[i])];
        inputs_[i].assign(t.shape_expr.empty() ? static_cast<size_t>(t.bytes) : 0, 0);
        input_shapes_[i] = t.shape_expr.empty() ? t.shape : std::vector<int64_t>{};
        input_set_[i] = false;
    }
}

bool Session::shapes_at_extreme(bool largest, RunShapes& out) const {
    std::vector<int64_t> values;
    for (const DimRange& d : program_.dims) values.push_back(largest ? d.max : d.min);
    try {
        evaluate_shapes(program_, plan_, values, out);
    } catch (const Error&) {
        return false;  // (dims whose extremes together are no valid run: no warm-up there)
    }
    return true;
}

bool Session::warm_up_across(size_t width) {
    if (program_.dims.empty() || !program_.states.empty()) return false;
    RunShapes small, large;
    if (!shapes_at_extreme(false, small) || !shapes_at_extreme(true, large)) return false;
    auto widest = [](const std::array<size_t, 3>& g) { return std::max(g[0], std::max(g[1], g[2])); };
    bool crosses = false;
    for (size_t i = 0; i < small.global.size() && i < large.global.size() && !crosses; ++i)
        crosses = (widest(small.global[i]) < width) != (widest(large.global[i]) < width);
    if (!crosses) return false;
    return run_zeros_at({&small, &large}, "the run-time dims' extremes");
}

bool Session::warm_up_at_smallest(int runs) {
    if (program_.dims.empty() || !program_.states.empty() || runs < 1) return false;
    RunShapes small;
    if (!shapes_at_extreme(false, small)) return false;
    return run_zeros_at(std::vector<const RunShapes*>(static_cast<size_t>(runs), &small), "the run-time dims' smallest values");
}

bool Session::run_zeros_at(const std::vector<const RunShapes*>& sizes, const char* what) {
    const RunShapes before = shapes_;  // (no run yet: its dims unbound, as a caller sees them after)
    bool ran = true;
    try {
        for (const RunShapes* at : sizes) {
            for (size_t i = 0; i < inputs_.size(); ++i) {
                const int tid = program_.inputs[i];
                inputs_[i].assign(static_cast<size_t>(at->bytes[static_cast<size_t>(tid)]), 0);
                input_shapes_[i] = at->shapes[static_cast<size_t>(tid)];
                input_set_[i] = true;
            }
            run();
        }
    } catch (const Error& e) {  // (a program refused there is refused at a user's run too, by name)
        warnings += std::string(warnings.empty() ? "" : "\n") + "no warm-up run at " + what + ": " + e.what();
        ran = false;
    }
    clear_inputs();
    for (auto& out : outputs_device_) out.clear();
    for (auto& out : outputs_host_) out.clear();
    shapes_ = before;
    shapes_ready_ = false;  // (the next run sets the launches' sizes again)
    profile.clear();
    device_ms = std::nan("");
    return ran;
}

void Session::reset_states() {
    for (const State& st : program_.states) zero_tensor(st.tensor);
}

void Session::get_output(int index, void* data, size_t size) const {
    if (index < 0 || index >= static_cast<int>(outputs_host_.size()))
        throw Error(RVK_ERROR_ARGUMENT, "output index " + std::to_string(index) + " out of range (the model has " +
                                            std::to_string(outputs_host_.size()) + " outputs)");
    const std::vector<uint8_t>& out = outputs_host_[static_cast<size_t>(index)];
    if (size != out.size() || (!data && size))
        throw Error(RVK_ERROR_ARGUMENT, "output " + program_.tensors[static_cast<size_t>(program_.outputs[static_cast<size_t>(index)])].name +
                                            ": " + std::to_string(size) + " bytes asked, it has " + std::to_string(out.size()));
    std::copy(out.begin(), out.end(), static_cast<uint8_t*>(data));
}

void Session::read_tensor(int tid, void* data, size_t size) {
    if (tid < 0 || tid >= static_cast<int>(program_.tensors.size()))
        throw Error(RVK_ERROR_ARGUMENT, "tensor " + std::to_string(tid) + " out of range (the program has " + std::to_string(program_.tensors.size()) + " tensors)");
    const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
    if (shapes_.bytes.empty())
        throw Error(RVK_ERROR_ARGUMENT, "tensor " + t.name + ": its shape depends on run-time dims and the session has not run yet");
    if (last_variant_ >= 0)
        throw Error(RVK_ERROR_ARGUMENT, "tensor " + t.name + ": the last run" + dims_text() + " ran the shape variant fixed to those dims, whose tensors are its own; " +
                                            "build without --specialize to read the program's intermediates");
    size_t expected = static_cast<size_t>(shapes_.bytes[static_cast<size_t>(tid)]);
    if (size != expected || (!data && size))
        throw Error(RVK_ERROR_ARGUMENT, "tensor " + t.name + ": " + std::to_string(size) + " bytes asked, it has " + std::to_string(expected));
    if (size) read_device(tid, data);
}

std::string strip(std::string s) {
    size_t a = s.find_first_not_of(" \t\n\r\f\v");
    size_t b = s.find_last_not_of(" \t\n\r\f\v");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string device_row_json(const DeviceRow& r) {
    auto num = [](int64_t v) { return std::to_string(v); };
    auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
    std::string limits = "{\"image_width\": " + num(r.image_width) + ", \"image_height\": " + num(r.image_height) + ", \"image_layers\": " +
                         num(r.image_layers) + ", \"max_buffer_bytes\": " + num(r.max_buffer_bytes) + ", \"max_alloc_bytes\": " + num(r.max_alloc_bytes) +
                         ", \"max_workgroups\": " + num(r.max_workgroups) + ", \"max_workgroup_size\": " + num(r.max_workgroup_size) +
                         ", \"max_shared_bytes\": " + num(r.max_shared_bytes) + ", \"memory_bytes\": " + num(r.memory_bytes) +
                         ", \"source\": " + json_quote(r.source) + "}";
    return "{\"index\": " + json_quote(r.index) + ", \"platform\": " + json_quote(r.platform) + ", \"device\": " + json_quote(r.device) +
           ", \"type\": " + json_quote(r.type) + ", \"image_support\": " + flag(r.images) +
           ", \"image2d_max\": " + (r.images ? "[" + num(r.image_width) + ", " + num(r.image_height) + "]" : "null") +
           ", \"image_max_array_size\": " + (r.images ? num(r.image_layers) : "null") + ", \"usable\": " + flag(r.problem.empty()) +
           ", \"problem\": " + json_quote(r.problem) + ", \"limits\": " + limits + ", \"fp16\": {\"half_images\": " + flag(r.half_images) +
           ", \"half_arithmetic\": " + flag(r.half_arithmetic) + "}}";
}

void Session::set_profiling(bool enabled) {
    if (enabled && !can_profile_) throw Error(RVK_ERROR_ARGUMENT, "the session was created without RVK_SESSION_PROFILE");
    profiling_ = enabled;
    for (VariantSession& v : variants_) v.session->set_profiling(enabled);
}

static std::unique_ptr<Session> open_backend_session(std::shared_ptr<const Artifact> artifact, const char* device, uint32_t flags);

std::unique_ptr<Session> open_session(std::shared_ptr<const Artifact> artifact, const char* device, uint32_t flags) {
    std::unique_ptr<Session> session = open_backend_session(artifact, device, flags);
    for (const Variant& v : artifact->variants) {  // (each loaded, compiled and allocated now: a run compiles nothing)
        std::unique_ptr<Session> fixed = open_backend_session(v.artifact, device, flags);
        if (fixed->warm_up_runs() > 0) fixed->warm_up_fixed(fixed->warm_up_runs());
        session->add_variant(v.dims, std::move(fixed));
    }
    return session;
}

static std::unique_ptr<Session> open_backend_session(std::shared_ptr<const Artifact> artifact, const char* device, uint32_t flags) {
    bool profile = (flags & RVK_SESSION_PROFILE) != 0;
    uint32_t checks = flags & (RVK_SESSION_SHADER_CHECKS_LOOPS | RVK_SESSION_SHADER_CHECKS_NONE);
    if (checks == (RVK_SESSION_SHADER_CHECKS_LOOPS | RVK_SESSION_SHADER_CHECKS_NONE))
        throw Error(RVK_ERROR_ARGUMENT, "RVK_SESSION_SHADER_CHECKS_LOOPS and RVK_SESSION_SHADER_CHECKS_NONE exclude each other");
    if (artifact->program.target == "vulkan") return open_vulkan_session(std::move(artifact), device, profile, static_cast<int>(checks));
    if (checks) throw Error(RVK_ERROR_ARGUMENT, "shader checks apply to Vulkan artifacts only (this one targets " + artifact->program.target + ")");
    return open_opencl_session(std::move(artifact), device, profile);
}

#ifndef RVK_VULKAN
std::unique_ptr<Session> open_vulkan_session(std::shared_ptr<const Artifact>, const char*, bool, int) {
    throw Error(RVK_ERROR_UNSUPPORTED, "the artifact targets vulkan; this build of the native runtime has no Vulkan backend (configure it with wgpu-native's headers: -DRVK_WGPU_INCLUDE_DIR=)");
}
std::string vulkan_devices_json(const char*) {
    throw Error(RVK_ERROR_UNSUPPORTED, "this build of the native runtime has no Vulkan backend (configure it with wgpu-native's headers: -DRVK_WGPU_INCLUDE_DIR=)");
}
#endif

}  // namespace rvk
