// Run-time dims (relax_vk/codegen/run_time_shapes.py): the integer expressions an artifact carries
// for tensor shapes, kernel scalar arguments and grids, evaluated once per input shape, and the
// binding of the dims from the inputs' shapes with their declared ranges checked.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "json.hpp"

namespace rvk {

struct DimRange {
    std::string name;
    int64_t min = 1, max = 1;
    int64_t step = 1;  // every size a multiple of it (min and max are)
};

// One expression, flattened in prefix order: an integer, a dim (by index) or an operator node
// whose two operands follow it.
class ShapeExpr {
public:
    enum Kind : uint8_t { Const, Dim, Add, Sub, Mul, FloorDiv, FloorMod, TruncDiv, TruncMod, Min, Max };
    struct Node {
        Kind kind;
        int64_t value;  // Const: the value; Dim: the dim's index
    };
    // Parses the JSON form (an integer, a dim's name, [op, a, b]). Throws std::invalid_argument
    // naming what is wrong (an unknown dim or operator, a malformed node).
    static ShapeExpr parse(const Json& j, const std::map<std::string, int>& dims);
    static ShapeExpr constant(int64_t v) { return ShapeExpr({{Const, v}}); }
    bool is_const() const { return nodes_.size() == 1 && nodes_[0].kind == Const; }
    // A dim on its own: its index; else -1.
    int dim() const { return nodes_.size() == 1 && nodes_[0].kind == Dim ? static_cast<int>(nodes_[0].value) : -1; }
    // The value at `dims`; throws std::domain_error on a division by zero or an int64 overflow.
    int64_t eval(const std::vector<int64_t>& dims) const;
    std::string repr(const std::vector<DimRange>& dims) const;
    // An order on expressions (node by node): equal expressions are equivalent (ShapePlan's interning).
    bool operator<(const ShapeExpr& other) const {
        return std::lexicographical_compare(nodes_.begin(), nodes_.end(), other.nodes_.begin(), other.nodes_.end(),
                                            [](const Node& a, const Node& b) { return a.kind != b.kind ? a.kind < b.kind : a.value < b.value; });
    }

private:
    explicit ShapeExpr(std::vector<Node> nodes) : nodes_(std::move(nodes)) {}
    ShapeExpr() = default;
    int64_t eval_at(size_t& i, const std::vector<int64_t>& dims) const;
    std::string repr_at(size_t& i, const std::vector<DimRange>& dims) const;
    std::vector<Node> nodes_;
};

}  // namespace rvk
