// reference: the checked program evaluated on the CPU in float64, from the same node list the
// emitter prints, with the builtins' float64 definitions. It is what GPU results are tested against
// and what `lossjit run` uses where there is no GPU. Inputs of any dtype are widened as a kernel
// widens them, and outputs rounded as a kernel rounds them (lossjit/dtype.hpp), so the two see the
// same data. Evaluation is column-at-a-time over chunks, so a billion elements take seconds, not
// minutes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "util/numeric.hpp"

namespace lossjit {
namespace {

using util::CompensatedSum;

constexpr std::int64_t kChunk = 2048;

// A power whose exponent is a constant node: torch's forms for the small exponents (power_by_constant),
// as the kernels print them.
bool constant_exponent(const ir::Program& program, const ir::Node& n) {
    return n.kind == ir::NodeKind::Apply && n.fn == Builtin::Pow && program.node(n.args[1]).kind == ir::NodeKind::Constant;
}

static_assert(std::numeric_limits<float>::is_iec559, "out-of-range double -> float must give inf, as on the GPU");
double as_float32(double v) { return static_cast<double>(static_cast<float>(v)); }

// What the kernel for these operands computes in (emit: Element::Value), from the dtypes of the
// inputs the program as written reads (and a map's upstream gradient).
DType program_compute(const ir::Program& program, std::span<const HostOperand> inputs) {
    std::vector<DType> by_slot;
    for (const auto& input : inputs) by_slot.push_back(input.dtype);
    const bool upstream = inputs.size() > program.inputs.size();
    return program_compute_dtype(program, by_slot, upstream ? std::optional(inputs.back().dtype) : std::nullopt);
}

// Walks linear element indices of one operand, turning them into memory offsets without a division
// per element (a carry-propagating counter over the collapsed dims).
class OffsetWalker {
public:
    OffsetWalker(const Layout& layout, const OperandAccess& access, std::int64_t start)
        : dims_(layout.dims), access_(access), coords_(layout.dims.size(), 0) {
        if (access.contiguous) {
            offset_ = start;
            return;
        }
        std::int64_t rest = start;
        for (std::size_t d = dims_.size(); d-- > 0;) {
            coords_[d] = dims_[d] == 0 ? 0 : rest % dims_[d];
            rest = dims_[d] == 0 ? 0 : rest / dims_[d];
            offset_ += coords_[d] * access.strides[d];
        }
    }
    std::int64_t offset() const { return offset_; }
    void next() {
        if (access_.contiguous) {
            ++offset_;
            return;
        }
        for (std::size_t d = dims_.size(); d-- > 0;) {
            offset_ += access_.strides[d];
            if (++coords_[d] < dims_[d]) return;
            offset_ -= coords_[d] * access_.strides[d];
            coords_[d] = 0;
        }
    }

private:
    const std::vector<std::int64_t>& dims_;
    const OperandAccess& access_;
    std::vector<std::int64_t> coords_;
    std::int64_t offset_ = 0;
};

class ChunkEvaluator {
public:
    // `elements`: how many this evaluator will see in all; small tensors get small columns, which
    // matters when a program has thousands of nodes and the tensors a handful of elements.
    ChunkEvaluator(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                   std::span<const double> params, std::int64_t elements)
        : program_(program), layout_(layout), inputs_(inputs), params_(params),
          float64_(program_compute(program, inputs) == DType::float64),
          live_(program.nodes.size(), false), source_(program.nodes.size()), columns_(program.nodes.size()) {
        // Both passes are loops, not recursion: a program of 50 000 chained bindings is legal and
        // must not cost 50 000 stack frames. They rely on arguments (and bound values) coming
        // before the nodes that use them.
        for (std::size_t id = 0; id < program.nodes.size(); ++id) {
            const ir::Node& n = program.nodes[id];
            source_[id] = n.kind == ir::NodeKind::Binding
                              ? source_[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)]
                              : id;
        }
        live_[source_[static_cast<std::size_t>(program.body)]] = true;
        for (const auto& d : program.derivatives) live_[source_[static_cast<std::size_t>(d.node)]] = true;
        for (std::size_t id = program.nodes.size(); id-- > 0;) {
            if (!live_[id]) continue;
            const ir::Node& n = program.nodes[id];
            for (int i = 0; i < n.arity; ++i) live_[source_[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])]] = true;
        }
        const auto length = static_cast<std::size_t>(std::clamp<std::int64_t>(elements, 1, kChunk));
        for (std::size_t i = 0; i < program.nodes.size(); ++i)
            if (live_[i]) columns_[i].resize(length);
    }

    // Evaluates elements [start, start + count) and returns the body's column. `seed`: a
    // differentiated program's Seed at each of them (its upstream gradient, scaled).
    const double* evaluate(std::int64_t start, std::int64_t count, const double* seed = nullptr) {
        for (std::size_t id = 0; id < program_.nodes.size(); ++id) {
            if (!live_[id]) continue;
            const ir::Node& n = program_.nodes[id];
            double* out = columns_[id].data();
            switch (n.kind) {
                // Constants and parameters reach a float32 kernel as float32 (a literal, a value of the
                // element functor), so they meet the data rounded; folded constants beyond float32's
                // range become inf there. A float64 kernel keeps them as they are.
                case ir::NodeKind::Constant: std::fill_n(out, count, rounded(n.value)); break;
                case ir::NodeKind::Param: std::fill_n(out, count, rounded(params_[static_cast<std::size_t>(n.slot)])); break;
                case ir::NodeKind::Input: {
                    const HostOperand& input = inputs_[static_cast<std::size_t>(n.slot)];
                    OffsetWalker walk(layout_, layout_.inputs[static_cast<std::size_t>(n.slot)], start);
                    if (input.dtype == DType::float32) {  // the common case, without a dtype switch per element
                        const auto* base = static_cast<const float*>(input.data);
                        for (std::int64_t i = 0; i < count; ++i, walk.next()) out[i] = base[walk.offset()];
                    } else {
                        const DType compute = float64_ ? DType::float64 : DType::float32;
                        for (std::int64_t i = 0; i < count; ++i, walk.next())
                            out[i] = load_as_double(input.data, input.dtype, walk.offset(), compute);
                    }
                    break;
                }
                case ir::NodeKind::Binding: break;  // never live: read through source_
                case ir::NodeKind::Apply: {
                    const double* a = column(n.args[0]);
                    const double* b = n.arity > 1 ? column(n.args[1]) : a;
                    const double* c = n.arity > 2 ? column(n.args[2]) : a;
                    if (constant_exponent(program_, n)) {
                        for (std::int64_t i = 0; i < count; ++i) out[i] = power_by_constant(a[i], b[i]);
                    } else {
                        for (std::int64_t i = 0; i < count; ++i) out[i] = apply_builtin(n.fn, a[i], b[i], c[i]);
                    }
                    break;
                }
                case ir::NodeKind::Seed:
                    if (!seed) throw InternalError("a derivative evaluated without its seed");
                    std::copy_n(seed, count, out);
                    break;
                case ir::NodeKind::RowReduce: case ir::NodeKind::Take: case ir::NodeKind::Total:
                case ir::NodeKind::RowLength: case ir::NodeKind::OneHot: case ir::NodeKind::TakeCount:
                case ir::NodeKind::InRow: case ir::NodeKind::ScatterAdd:
                    throw InternalError("a program that reduces along rows in the elementwise evaluator");
            }
        }
        return column(program_.body);
    }

    // Any live node's values for the last evaluated chunk (a binding reads its bound value's).
    const double* column(int id) const { return columns_[source_[static_cast<std::size_t>(id)]].data(); }

private:
    double rounded(double v) const { return float64_ ? v : as_float32(v); }

    const ir::Program& program_;
    const Layout& layout_;
    std::span<const HostOperand> inputs_;
    std::span<const double> params_;
    bool float64_;
    std::vector<bool> live_;            // never true for a Binding node: its source_ is live instead
    std::vector<std::size_t> source_;   // the node whose column holds this node's values
    std::vector<std::vector<double>> columns_;
};


// Splits [0, count) into one contiguous range per thread; `work(begin, end, index)`.
template <typename Work>
void parallel_ranges(std::int64_t count, Work work, std::size_t* used_threads) {
    const std::int64_t per_thread_minimum = 1 << 16;
    std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
    threads = static_cast<std::size_t>(std::clamp<std::int64_t>(count / per_thread_minimum, 1, static_cast<std::int64_t>(threads)));
    *used_threads = threads;
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(threads);
    for (std::size_t t = 0; t < threads; ++t) {
        const std::int64_t begin = count * static_cast<std::int64_t>(t) / static_cast<std::int64_t>(threads);
        const std::int64_t end = count * static_cast<std::int64_t>(t + 1) / static_cast<std::int64_t>(threads);
        auto run = [&, begin, end, t] {
            try {
                work(begin, end, t);
            } catch (...) {
                errors[t] = std::current_exception();
            }
        };
        if (threads == 1) run();
        else pool.emplace_back(run);
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// ---- programs that reduce along rows ------------------------------------------------------------
// Row by row: every live node's values along one row, or its single value where it is one per row
// (per_row_nodes). Row reductions add in float64 with compensation; a take reads its index exactly.
class RowEvaluator {
public:
    // `seeds`: a differentiated program's Seed nodes' values, by slot (its upstream gradient, scaled:
    // one value for each reduction differentiated).
    RowEvaluator(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                 std::span<const double> params, std::span<const double> seeds)
        : program_(program), layout_(layout), inputs_(inputs), params_(params), seeds_(seeds.begin(), seeds.end()),
          float64_(program_compute(program, inputs) == DType::float64),
          index_(program.index_inputs()),
          per_row_(per_row_nodes(program, per_row_inputs(program, layout))),
          k_level_(k_level_nodes(program, k_inputs(layout))),
          columns_(layout.dims.back()), k_columns_(layout.k_columns), live_(program.nodes.size(), false),
          values_(program.nodes.size()) {
        std::vector<int> roots;
        if (program.reduction != ir::Reduction::Composite) roots.push_back(program.body);
        if (program.is_map())
            for (int r : program.result_nodes()) roots.push_back(r);
        for (const auto& t : row_totals(program)) roots.push_back(t.argument);
        for (const auto& d : program.derivatives) {
            roots.push_back(d.node);
            if (d.scatters()) roots.push_back(d.scatter_node);
        }
        for (int root : roots) live_[static_cast<std::size_t>(root)] = true;
        for (std::size_t id = program.nodes.size(); id-- > 0;) {
            if (!live_[id]) continue;
            const ir::Node& n = program.nodes[id];
            if (n.kind == ir::NodeKind::Binding)
                live_[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)] = true;
            for (int i = 0; i < n.arity; ++i) live_[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])] = true;
        }
    }

    bool per_row(int id) const { return per_row_[static_cast<std::size_t>(id)]; }
    bool k_level(int id) const { return k_level_[static_cast<std::size_t>(id)]; }
    std::int64_t k_columns() const { return k_columns_; }
    std::int64_t columns() const { return columns_; }
    double at(int id, std::int64_t column) const {
        const auto& v = values_[static_cast<std::size_t>(source(id))];
        return v.size() == 1 && per_row(id) ? v[0] : v[static_cast<std::size_t>(column)];
    }

    // The offset of row `row`'s first element in an operand walked by `strides`.
    std::int64_t row_offset(std::int64_t row, const OperandAccess& access) const {
        std::int64_t offset = 0;
        for (std::size_t d = layout_.dims.size() - 1; d-- > 0;) {
            const std::int64_t extent = layout_.dims[d];
            offset += (row % extent) * access.strides[d];
            row /= extent;
        }
        return offset;
    }

    void evaluate(std::int64_t row) {
        for (std::size_t id = 0; id < program_.nodes.size(); ++id) {
            if (!live_[id]) continue;
            const ir::Node& n = program_.nodes[id];
            auto& out = values_[id];
            out.assign(per_row_[id] ? 1 : static_cast<std::size_t>(k_level_[id] ? k_columns_ : columns_), 0.0);
            switch (n.kind) {
                case ir::NodeKind::Constant: out[0] = rounded(n.value); break;
                case ir::NodeKind::Param: out[0] = rounded(params_[static_cast<std::size_t>(n.slot)]); break;
                case ir::NodeKind::Binding: break;  // read through source()
                case ir::NodeKind::Input: {
                    const auto slot = static_cast<std::size_t>(n.slot);
                    const HostOperand& input = inputs_[slot];
                    const OperandAccess& access = layout_.inputs[slot];
                    const std::int64_t base = row_offset(row, access);
                    const DType compute = float64_ ? DType::float64 : DType::float32;
                    for (std::size_t j = 0; j < out.size(); ++j) {
                        const auto c = static_cast<std::int64_t>(j);
                        const std::int64_t at = access.per_k ? c * access.k_stride : column_offset(layout_, access, c);
                        out[j] = load_as_double(input.data, input.dtype, base + at, compute);
                    }
                    break;
                }
                case ir::NodeKind::Apply:
                    for (std::size_t j = 0; j < out.size(); ++j) {
                        const auto c = static_cast<std::int64_t>(j);
                        const double a = at(n.args[0], c);
                        const double b = n.arity > 1 ? at(n.args[1], c) : 0.0;
                        const double d = n.arity > 2 ? at(n.args[2], c) : 0.0;
                        out[j] = constant_exponent(program_, n) ? power_by_constant(a, b) : apply_builtin(n.fn, a, b, d);
                    }
                    break;
                case ir::NodeKind::RowReduce: out[0] = reduce_row(static_cast<RowReduction>(n.slot), n.args[0]); break;
                case ir::NodeKind::Take:  // one value per row, or K (k_level)
                    for (std::size_t j = 0; j < out.size(); ++j) {
                        const double i = index_at(row, program_.node(n.args[1]).slot, static_cast<std::int64_t>(j));
                        out[j] = i >= 0 && i < static_cast<double>(columns_) ? at(n.args[0], static_cast<std::int64_t>(i))
                                                                            : std::numeric_limits<double>::quiet_NaN();
                    }
                    break;
                case ir::NodeKind::ScatterAdd:  // in index order: repeated columns add in that order
                    for (std::int64_t j = 0; j < k_columns_; ++j) {
                        const double i = index_at(row, program_.node(n.args[1]).slot, j);
                        if (i >= 0 && i < static_cast<double>(columns_)) out[static_cast<std::size_t>(i)] += at(n.args[0], j);
                    }
                    break;
                case ir::NodeKind::RowLength: out[0] = static_cast<double>(columns_); break;
                case ir::NodeKind::TakeCount: out[0] = static_cast<double>(k_columns_); break;
                case ir::NodeKind::Seed: out[0] = seeds_.at(static_cast<std::size_t>(std::max(n.slot, 0))); break;
                case ir::NodeKind::OneHot: {
                    const double i = index_at(row, program_.node(n.args[0]).slot);
                    for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<double>(j) == i ? 1.0 : 0.0;
                    break;
                }
                case ir::NodeKind::InRow: {
                    const double i = index_at(row, program_.node(n.args[0]).slot);
                    out[0] = i >= 0 && i < static_cast<double>(columns_) ? 1.0 : 0.0;
                    break;
                }
                case ir::NodeKind::Total: throw InternalError("a total inside a row's evaluation");
            }
        }
    }

    // An index exactly, as an integer: any index a float64 holds exactly (every int32; int64 to 2^53).
    // `j`: which of the row's K, for an index of K per row.
    double index_at(std::int64_t row, int slot, std::int64_t j = 0) const {
        const auto k = static_cast<std::size_t>(slot);
        const OperandAccess& access = layout_.inputs[k];
        return load_as_double(inputs_[k].data, inputs_[k].dtype, row_offset(row, access) + j * access.k_stride,
                              DType::float64);
    }

private:
    std::size_t source(int id) const {
        const ir::Node* n = &program_.node(id);
        while (n->kind == ir::NodeKind::Binding) {
            id = program_.bindings[static_cast<std::size_t>(n->slot)].node;
            n = &program_.node(id);
        }
        return static_cast<std::size_t>(id);
    }
    double rounded(double v) const { return float64_ ? v : as_float32(v); }

    // The table's float64 meaning over the row's values of `argument` (a per-row value repeats C times),
    // or over its K values.
    double reduce_row(RowReduction how, int argument) const {
        const RowReductionInfo& info = row_reduction_info(how);
        if (!info.reference) throw InternalError(fmt::format("'{}' should have been expanded by the checker", info.name));
        const std::int64_t length = k_level(argument) ? k_columns_ : columns_;
        row_.resize(static_cast<std::size_t>(length));
        for (std::int64_t j = 0; j < length; ++j) row_[static_cast<std::size_t>(j)] = at(argument, j);
        return info.reference(row_);
    }

    const ir::Program& program_;
    const Layout& layout_;
    std::span<const HostOperand> inputs_;
    std::span<const double> params_;
    std::vector<double> seeds_;
    bool float64_;
    std::vector<bool> index_;
    std::vector<bool> per_row_;
    std::vector<bool> k_level_;
    std::int64_t columns_;
    std::int64_t k_columns_;
    std::vector<bool> live_;
    std::vector<std::vector<double>> values_;
    mutable std::vector<double> row_;  // reduce_row's gather buffer
};

// Evaluates every row, the rows split among threads (one RowEvaluator each), and calls
// `use(eval, row, thread)` after each; returns how many threads ran.
template <typename Use>
std::size_t for_each_row(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                         std::span<const double> params, Use use, std::span<const double> seeds = {}) {
    std::size_t threads = 0;
    parallel_ranges(
        layout.rows,
        [&](std::int64_t begin, std::int64_t end, std::size_t t) {
            RowEvaluator eval(program, layout, inputs, params, seeds);
            for (std::int64_t row = begin; row < end; ++row) {
                eval.evaluate(row);
                use(static_cast<const RowEvaluator&>(eval), row, t);
            }
        },
        &threads);
    return threads;
}

// A Composite program's results: each over the totals (each divided by its divisor), parameters
// and constants, in float64 as the kernel's finish computes them.
std::vector<double> composite_values(const ir::Program& program, std::span<const double> totals, std::span<const double> params) {
    std::vector<double> value(program.nodes.size(), 0.0);
    const auto listed = row_totals(program);  // `totals` in this order
    for (std::size_t k = 0; k < listed.size(); ++k) value[static_cast<std::size_t>(listed[k].node)] = totals[k];
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        switch (n.kind) {
            case ir::NodeKind::Constant: value[id] = n.value; break;
            case ir::NodeKind::Param: value[id] = params[static_cast<std::size_t>(n.slot)]; break;
            case ir::NodeKind::Binding: value[id] = value[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)]; break;
            case ir::NodeKind::Total: break;  // set above (0 for one the body never reaches)
            case ir::NodeKind::Apply:
                value[id] = constant_exponent(program, n)
                                ? power_by_constant(value[static_cast<std::size_t>(n.args[0])], value[static_cast<std::size_t>(n.args[1])])
                                : apply_builtin(n.fn, value[static_cast<std::size_t>(n.args[0])],
                                          n.arity > 1 ? value[static_cast<std::size_t>(n.args[1])] : 0.0,
                                          n.arity > 2 ? value[static_cast<std::size_t>(n.args[2])] : 0.0);
                break;
            default: break;  // per element or per row: never part of the final expression
        }
    }
    std::vector<double> out;
    for (int node : program.result_nodes()) out.push_back(value[static_cast<std::size_t>(node)]);
    return out;
}

std::vector<double> reference_results_rows(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                                           std::span<const double> params) {
    const auto totals = row_totals(program);
    const std::size_t max_threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::vector<CompensatedSum>> partial(max_threads, std::vector<CompensatedSum>(totals.size()));
    const std::size_t threads = for_each_row(program, layout, inputs, params,
                                             [&](const RowEvaluator& eval, std::int64_t, std::size_t t) {
        for (std::size_t k = 0; k < totals.size(); ++k) {
            const int argument = totals[k].argument;
            if (eval.per_row(argument)) {
                partial[t][k].add(eval.at(argument, 0));
            } else if (eval.k_level(argument)) {
                for (std::int64_t j = 0; j < eval.k_columns(); ++j) partial[t][k].add(eval.at(argument, j));
            } else {
                for (std::int64_t j = 0; j < eval.columns(); ++j) partial[t][k].add(eval.at(argument, j));
            }
        }
    });
    const auto divisors = total_divisors(program, layout);
    std::vector<double> values;
    for (std::size_t k = 0; k < totals.size(); ++k) {
        CompensatedSum total;
        for (std::size_t t = 0; t < threads; ++t) {
            total.add(partial[t][k].sum);
            total.add(partial[t][k].compensation);
        }
        values.push_back(total.value() / divisors[k]);
    }
    if (program.reduction != ir::Reduction::Composite) return {values.at(0)};
    return composite_values(program, values, params);
}

void reference_map_rows(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                        std::span<const double> params, HostOutput output) {
    const std::size_t last = layout.dims.size() - 1;
    const std::vector<int> results = program.result_nodes();
    for_each_row(program, layout, inputs, params, [&](const RowEvaluator& eval, std::int64_t row, std::size_t) {
        const std::int64_t base = eval.row_offset(row, layout.output);
        if (eval.per_row(program.body)) {
            // Several results: result r at r times the output's stride along the row (plan_program_layout).
            for (std::size_t r = 0; r < results.size(); ++r)
                store_from_double(output.data, output.dtype, base + static_cast<std::int64_t>(r) * layout.output.strides[last],
                                  eval.at(results[r], 0));
        } else {
            for (std::int64_t j = 0; j < eval.columns(); ++j)
                store_from_double(output.data, output.dtype, base + column_offset(layout, layout.output, j),
                                  eval.at(program.body, j));
        }
    });
}

}  // namespace

std::vector<double> reference_results(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                                      std::span<const double> params) {
    if (program.by_rows()) return reference_results_rows(program, layout, inputs, params);
    return {reference_reduce(program, layout, inputs, params)};
}

double reference_reduce(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                        std::span<const double> params) {
    if (program.by_rows()) return reference_results_rows(program, layout, inputs, params).at(0);
    std::vector<CompensatedSum> partial(std::max(1u, std::thread::hardware_concurrency()));
    std::size_t threads = 0;
    parallel_ranges(
        layout.count,
        [&](std::int64_t begin, std::int64_t end, std::size_t t) {
            ChunkEvaluator eval(program, layout, inputs, params, end - begin);
            for (std::int64_t s = begin; s < end; s += kChunk) {
                const std::int64_t n = std::min(kChunk, end - s);
                const double* values = eval.evaluate(s, n);
                double chunk = 0.0;
                for (std::int64_t i = 0; i < n; ++i) chunk += values[i];
                partial[t].add(chunk);
            }
        },
        &threads);
    CompensatedSum total;
    for (std::size_t t = 0; t < threads; ++t) {
        total.add(partial[t].sum);
        total.add(partial[t].compensation);
    }
    return total.value() / reduction_divisor(program, layout.shape);
}

void reference_map(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                   std::span<const double> params, HostOutput output) {
    if (program.by_rows()) return reference_map_rows(program, layout, inputs, params, output);
    std::size_t threads = 0;
    parallel_ranges(
        layout.count,
        [&](std::int64_t begin, std::int64_t end, std::size_t) {
            ChunkEvaluator eval(program, layout, inputs, params, end - begin);
            OffsetWalker out(layout, layout.output, begin);
            for (std::int64_t s = begin; s < end; s += kChunk) {
                const std::int64_t n = std::min(kChunk, end - s);
                const double* values = eval.evaluate(s, n);
                for (std::int64_t i = 0; i < n; ++i, out.next())
                    store_from_double(output.data, output.dtype, out.offset(), values[i]);
            }
        },
        &threads);
}

// The gradients of a differentiated program that reduces along rows, each derivative evaluated per
// row and added into a buffer of its input's own shape (plan_row_gradient_layout: the input's own
// walk is read.inputs[N + k]). A per-row input's derivative is one value per row, already the sum
// along its row (differentiate()): it is added once. Where an input is broadcast, several rows add
// into one element: each thread sums apart, then the threads' sums are added in thread order.
std::vector<std::vector<double>> reference_gradients_rows(const ir::Program& program, const GradientLayout& gradient,
                                                          std::span<const HostOperand> inputs,
                                                          std::span<const double> params, double upstream,
                                                          std::span<const double> factors) {
    const Layout& layout = gradient.read;
    const std::size_t n = program.inputs.size();
    if (layout.inputs.size() != 2 * n || gradient.sizes.size() != n)
        throw InternalError("reference_gradients for rows needs plan_row_gradient_layout's layout");
    if (!factors.empty() && factors.size() != program.gradient_totals.size())
        throw InternalError("reference_gradients: a factor per reduction differentiated");
    // Seed j: what the elements of reduction gradient_totals[j] get.
    const std::vector<double> divisors = total_divisors(program, layout);
    std::vector<double> seeds;
    for (std::size_t j = 0; j < program.gradient_totals.size(); ++j)
        seeds.push_back(upstream * (factors.empty() ? 1.0 : factors[j]) /
                        divisors.at(static_cast<std::size_t>(program.gradient_totals[j])));
    if (seeds.empty()) seeds.push_back(upstream);  // a map's weighted sum: its upstream is an input
    const std::size_t count = program.derivatives.size();
    std::vector<std::vector<double>> grads(count);
    std::vector<bool> broadcast(count), scattered(count);
    for (std::size_t k = 0; k < count; ++k) {
        const auto slot = static_cast<std::size_t>(program.derivatives[k].input);
        grads[k].assign(static_cast<std::size_t>(gradient.sizes[slot]), 0.0);
        broadcast[k] = gradient.sizes[slot] < layout.count;
        // As the kernels: each row's one value added at its index (the one-hot derivative's only
        // nonzero column).
        scattered[k] = row_gradient_kind(program, layout, k) == RowGradient::Scattered;
    }
    const std::size_t max_threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::vector<std::vector<double>>> partial(max_threads, std::vector<std::vector<double>>(count));
    const std::size_t threads = for_each_row(
        program, layout, inputs, params,
        [&](const RowEvaluator& eval, std::int64_t row, std::size_t t) {
            for (std::size_t k = 0; k < count; ++k) {
                const auto slot = static_cast<std::size_t>(program.derivatives[k].input);
                const int node = program.derivatives[k].node;
                const OperandAccess& into = layout.inputs[n + slot];
                auto& out = broadcast[k] ? partial[t][k] : grads[k];
                if (out.empty()) out.assign(grads[k].size(), 0.0);
                const std::int64_t base = eval.row_offset(row, into);
                if (scattered[k]) {
                    const ir::Derivative& d = program.derivatives[k];
                    const double i = eval.index_at(row, d.scatter_index);
                    if (i >= 0 && i < static_cast<double>(eval.columns()))
                        out[static_cast<std::size_t>(base + column_offset(layout, into, static_cast<std::int64_t>(i)))] +=
                            eval.at(d.scatter_node, 0);
                    continue;
                }
                if (layout.inputs[slot].per_k) {  // K values per row: the derivative's K (or one per row)
                    for (std::int64_t j = 0; j < eval.k_columns(); ++j)
                        out[static_cast<std::size_t>(base + j * into.k_stride)] += eval.at(node, j);
                    continue;
                }
                if (layout.inputs[slot].per_row) {
                    if (!eval.per_row(node))
                        throw InternalError("the derivative of a per-row input is not one value per row");
                    out[static_cast<std::size_t>(base)] += eval.at(node, 0);
                    continue;
                }
                for (std::int64_t j = 0; j < eval.columns(); ++j)
                    out[static_cast<std::size_t>(base + column_offset(layout, into, j))] += eval.at(node, j);
            }
        },
        seeds);
    for (std::size_t k = 0; k < count; ++k) {
        if (!broadcast[k]) continue;
        for (std::size_t t = 0; t < threads; ++t)
            for (std::size_t i = 0; i < partial[t][k].size(); ++i) grads[k][i] += partial[t][k][i];
    }
    return grads;
}

std::vector<std::vector<double>> reference_gradients(const ir::Program& program, const GradientLayout& layout,
                                                     std::span<const HostOperand> inputs,
                                                     std::span<const double> params, double upstream,
                                                     std::span<const double> factors) {
    if (program.by_rows()) return reference_gradients_rows(program, layout, inputs, params, upstream, factors);
    if (!factors.empty()) throw InternalError("reference_gradients: factors for a program that is not Composite");
    const Layout& read = layout.read;
    const Layout& write = layout.write;
    if (program.is_map() != (inputs.size() == program.inputs.size() + 1) ||
        read.inputs.size() != inputs.size())
        throw InternalError("reference_gradients: a map, and only a map, has its upstream gradient as the last operand");
    // Each element's seed (ir::NodeKind::Seed): a map's upstream element, or upstream / divisor.
    const double scale = program.is_map() ? 1.0 : upstream * gradient_scale(program, read.shape);

    const std::size_t count = program.derivatives.size();
    std::vector<std::vector<double>> grads(count);
    std::vector<bool> broadcast(count);
    for (std::size_t k = 0; k < count; ++k) {
        const auto slot = static_cast<std::size_t>(program.derivatives[k].input);
        const std::int64_t size = layout.sizes.at(slot);
        grads[k].assign(static_cast<std::size_t>(size), 0.0);
        broadcast[k] = size < write.count;  // several elements add into one: each thread sums apart
    }

    const std::size_t max_threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::vector<std::vector<double>>> partial(max_threads);
    std::size_t threads = 0;
    parallel_ranges(
        read.count,
        [&](std::int64_t begin, std::int64_t end, std::size_t t) {
            ChunkEvaluator eval(program, read, inputs, params, end - begin);
            std::vector<double> factor(static_cast<std::size_t>(kChunk), scale);
            std::optional<OffsetWalker> up;
            if (program.is_map()) up.emplace(read, read.inputs.back(), begin);
            const DType compute = program_compute(program, inputs);
            std::vector<OffsetWalker> targets;
            auto& mine = partial[t];
            mine.resize(count);
            for (std::size_t k = 0; k < count; ++k) {
                const auto slot = static_cast<std::size_t>(program.derivatives[k].input);
                targets.emplace_back(write, write.inputs[slot], begin);
                if (broadcast[k]) mine[k].assign(grads[k].size(), 0.0);
            }
            for (std::int64_t s = begin; s < end; s += kChunk) {
                const std::int64_t n = std::min(kChunk, end - s);
                if (up)
                    for (std::int64_t i = 0; i < n; ++i, up->next())
                        factor[static_cast<std::size_t>(i)] =
                            load_as_double(inputs.back().data, inputs.back().dtype, up->offset(), compute);
                eval.evaluate(s, n, factor.data());
                for (std::size_t k = 0; k < count; ++k) {
                    const double* d = eval.column(program.derivatives[k].node);
                    double* out = broadcast[k] ? mine[k].data() : grads[k].data();
                    auto& walk = targets[k];
                    for (std::int64_t i = 0; i < n; ++i, walk.next()) out[walk.offset()] += d[i];
                }
            }
        },
        &threads);
    for (std::size_t k = 0; k < count; ++k) {
        if (!broadcast[k]) continue;
        for (std::size_t t = 0; t < threads; ++t)
            for (std::size_t i = 0; i < grads[k].size(); ++i) grads[k][i] += partial[t][k][i];
    }
    return grads;
}

std::vector<double> reference_statistics(const ir::Program& program, std::span<const OperandShape> inputs,
                                         std::span<const HostOperand> data, std::span<const double> params) {
    std::vector<double> values;
    for (const auto& statistic : program.statistics) {
        const Layout layout = plan_program_layout(*statistic, inputs.first(statistic->inputs.size()), nullptr);
        values.push_back(reference_reduce(*statistic, layout, data.first(statistic->inputs.size()),
                                          parameter_values(*statistic, params, values)));
    }
    return values;
}

}  // namespace lossjit
