#include "run_time_shapes.hpp"

#include <stdexcept>

namespace rvk {

namespace {

const std::map<std::string, ShapeExpr::Kind>& operators() {
    static const std::map<std::string, ShapeExpr::Kind> ops = {
        {"+", ShapeExpr::Add},           {"-", ShapeExpr::Sub},           {"*", ShapeExpr::Mul},
        {"floordiv", ShapeExpr::FloorDiv}, {"floormod", ShapeExpr::FloorMod}, {"truncdiv", ShapeExpr::TruncDiv},
        {"truncmod", ShapeExpr::TruncMod}, {"min", ShapeExpr::Min},         {"max", ShapeExpr::Max}};
    return ops;
}

void parse_into(const Json& j, const std::map<std::string, int>& dims, std::vector<ShapeExpr::Node>& out, int depth) {
    if (depth > 64) throw std::invalid_argument("an expression nested deeper than 64");
    if (j.is_int()) {
        out.push_back({ShapeExpr::Const, j.as_int()});
    } else if (j.is_string()) {
        auto it = dims.find(j.as_string());
        if (it == dims.end()) throw std::invalid_argument("names " + j.repr() + ", which is not a dim of the program");
        out.push_back({ShapeExpr::Dim, it->second});
    } else if (j.is_array() && j.items().size() == 3 && j.items()[0].is_string() && operators().count(j.items()[0].as_string())) {
        out.push_back({operators().at(j.items()[0].as_string()), 0});
        parse_into(j.items()[1], dims, out, depth + 1);
        parse_into(j.items()[2], dims, out, depth + 1);
    } else {
        throw std::invalid_argument("expression " + j.repr() + " is not an integer, a dim or [op, a, b]");
    }
}

int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

ShapeExpr ShapeExpr::parse(const Json& j, const std::map<std::string, int>& dims) {
    ShapeExpr e;
    parse_into(j, dims, e.nodes_, 0);
    return e;
}

int64_t ShapeExpr::eval(const std::vector<int64_t>& dims) const {
    size_t i = 0;
    return eval_at(i, dims);
}

int64_t ShapeExpr::eval_at(size_t& i, const std::vector<int64_t>& dims) const {
    const Node& n = nodes_[i++];
    if (n.kind == Const) return n.value;
    if (n.kind == Dim) return dims.at(static_cast<size_t>(n.value));
    int64_t a = eval_at(i, dims), b = eval_at(i, dims), r = 0;
    bool overflow = false;
    switch (n.kind) {
        case Add: overflow = __builtin_add_overflow(a, b, &r); break;
        case Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
        case Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
        case Min: r = a < b ? a : b; break;
        case Max: r = a > b ? a : b; break;
        default:
            if (b == 0) throw std::domain_error("a division by zero");
            if (a == INT64_MIN && b == -1) throw std::domain_error("an int64 overflow");
            r = n.kind == FloorDiv ? floor_div(a, b) : n.kind == FloorMod ? a - floor_div(a, b) * b : n.kind == TruncDiv ? a / b : a % b;
    }
    if (overflow) throw std::domain_error("an int64 overflow");
    return r;
}

std::string ShapeExpr::repr(const std::vector<DimRange>& dims) const {
    size_t i = 0;
    return repr_at(i, dims);
}

std::string ShapeExpr::repr_at(size_t& i, const std::vector<DimRange>& dims) const {
    const Node& n = nodes_[i++];
    if (n.kind == Const) return std::to_string(n.value);
    if (n.kind == Dim) return dims.at(static_cast<size_t>(n.value)).name;
    std::string a = repr_at(i, dims), b = repr_at(i, dims);
    for (const auto& [name, kind] : operators())
        if (kind == n.kind) return name.size() == 1 ? "(" + a + " " + name + " " + b + ")" : name + "(" + a + ", " + b + ")";
    return "?";
}

}  // namespace rvk
