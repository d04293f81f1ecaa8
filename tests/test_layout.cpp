// layout: broadcasting rules and dimension collapsing.
#include <algorithm>
#include <random>
#include <set>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

using namespace lossjit;

TEST_SUITE("layout") {

TEST_CASE("broadcast shapes follow NumPy") {
    struct Row {
        std::vector<Shape> inputs;
        Shape expected;
    };
    const Row table[] = {
        {{{32768, 32768}, {32768}}, {32768, 32768}},
        {{{4, 1, 3}, {5, 1}}, {4, 5, 3}},
        {{{}, {3}}, {3}},
        {{{2, 0}, {1}}, {2, 0}},
        {{{1}, {0}}, {0}},
        {{}, {}},
    };
    for (const auto& row : table) {
        std::vector<OperandShape> ops;
        for (const auto& s : row.inputs) ops.push_back({"x", s, {}});
        CHECK(broadcast_shapes(ops) == row.expected);
    }
}

TEST_CASE("incompatible shapes name both inputs and the dimension") {
    const std::vector<OperandShape> ops{{"p", {3, 4}, {}}, {"t", {3}, {}}};
    CHECK_THROWS_WITH_AS(broadcast_shapes(ops),
                         doctest::Contains("'p' [3, 4] and 't' [3] differ in dimension 1 from the end (4 vs 3)"),
                         UsageError);
}

TEST_CASE("collapsing") {
    SUBCASE("same-shape contiguous inputs become one flat dimension") {
        const std::vector<OperandShape> ops{{"p", {64, 32, 8}, {}}, {"t", {64, 32, 8}, {}}};
        const auto layout = plan_layout(ops, nullptr);
        CHECK(layout.dims == std::vector<std::int64_t>{64 * 32 * 8});
        CHECK(layout.count == 64 * 32 * 8);
        CHECK(layout.inputs[0].contiguous);
        CHECK(layout.inputs[1].contiguous);
    }
    SUBCASE("a row vector broadcast over rows stays two-dimensional, with stride 0 over rows") {
        const std::vector<OperandShape> ops{{"p", {32768, 32768}, {}}, {"t", {32768}, {}}};
        const auto layout = plan_layout(ops, nullptr);
        CHECK(layout.dims == std::vector<std::int64_t>{32768, 32768});
        CHECK(layout.inputs[0].contiguous);
        CHECK_FALSE(layout.inputs[1].contiguous);
        CHECK(layout.inputs[1].strides[0] == 0);
        CHECK(layout.inputs[1].strides[1] == 1);
    }
    SUBCASE("a column vector [N,1] broadcast over columns") {
        const std::vector<OperandShape> ops{{"p", {6, 4}, {}}, {"w", {6, 1}, {}}};
        const auto layout = plan_layout(ops, nullptr);
        CHECK(layout.dims == std::vector<std::int64_t>{6, 4});
        CHECK(layout.inputs[1].strides[0] == 1);
        CHECK(layout.inputs[1].strides[1] == 0);
    }
    SUBCASE("size-1 dimensions disappear") {
        const std::vector<OperandShape> ops{{"p", {1, 10, 1, 3}, {}}};
        const auto layout = plan_layout(ops, nullptr);
        CHECK(layout.dims == std::vector<std::int64_t>{30});
        CHECK(layout.inputs[0].contiguous);
    }
    SUBCASE("a transposed input keeps its strides") {
        const std::vector<OperandShape> ops{{"p", {3, 5}, {1, 3}}, {"t", {3, 5}, {}}};
        const auto layout = plan_layout(ops, nullptr);
        CHECK(layout.dims == std::vector<std::int64_t>{3, 5});
        CHECK_FALSE(layout.inputs[0].contiguous);
        CHECK(layout.inputs[0].strides[0] == 1);
        CHECK(layout.inputs[0].strides[1] == 3);
        CHECK(layout.inputs[1].contiguous);
    }
    SUBCASE("a scalar and an empty tensor") {
        const std::vector<OperandShape> scalar{{"s", {}, {}}};
        CHECK(plan_layout(scalar, nullptr).count == 1);
        const std::vector<OperandShape> empty{{"e", {0, 7}, {}}};
        const auto layout = plan_layout(empty, nullptr);
        CHECK(layout.count == 0);
        CHECK(layout.dims == std::vector<std::int64_t>{0});
    }
}

TEST_CASE("walked_dims_first: the outer dimensions one input walks come first, merged again where all allow") {
    struct Row {
        Shape w, full;
        std::vector<std::int64_t> dims, w_strides, p_strides;
    };
    const Row table[] = {
        // NCHW, one weight per channel: [C, N, H*W].
        {{1, 6, 1, 1}, {4, 6, 5, 32}, {6, 4, 160}, {1, 0, 0}, {160, 960, 1}},
        // one value per middle index: [M, N, C].
        {{6, 1}, {4, 6, 32}, {6, 4, 32}, {1, 0, 0}, {32, 192, 1}},
        // already outermost: unchanged.
        {{4, 1, 1}, {4, 6, 32}, {4, 192}, {1, 0}, {192, 1}},
        // two walked dimensions, [N, 1, H, 1] against [N, C, H, W]: [N, H, C, W] (p's N and H do not merge).
        {{4, 1, 5, 1}, {4, 6, 5, 32}, {4, 5, 6, 32}, {5, 1, 0, 0}, {960, 32, 160, 1}},
    };
    for (const auto& row : table) {
        CAPTURE(format_shape(row.w));
        const std::vector<OperandShape> shapes{{"w", row.w, {}}, {"p", row.full, {}}};
        const OperandShape out{"gradients", row.full, {}};
        const Layout l = walked_dims_first(plan_layout(shapes, &out), 0);
        CHECK(l.dims == row.dims);
        CHECK(l.shape == row.full);
        const std::size_t rank = l.dims.size();
        CHECK(std::vector<std::int64_t>(l.inputs[0].strides.begin(), l.inputs[0].strides.begin() + rank) == row.w_strides);
        CHECK(std::vector<std::int64_t>(l.inputs[1].strides.begin(), l.inputs[1].strides.begin() + rank) == row.p_strides);
        CHECK(std::vector<std::int64_t>(l.output.strides.begin(), l.output.strides.begin() + rank) == row.p_strides);
        CHECK(walked_outer_prefix(l.inputs[0], rank - 1) >= 0);
        CHECK(l.inputs[1].contiguous == (rank == 2));  // reordered dimensions are not walked in memory order
    }
}

TEST_CASE("the output must have the broadcast shape and distinct elements") {
    const std::vector<OperandShape> ops{{"x", {4, 6}, {}}};
    const OperandShape wrong{"output", {6, 4}, {}};
    CHECK_THROWS_WITH_AS(plan_layout(ops, &wrong), doctest::Contains("the output has shape [6, 4]"), UsageError);
    const OperandShape aliased{"output", {4, 6}, {0, 1}};
    CHECK_THROWS_WITH_AS(plan_layout(ops, &aliased), doctest::Contains("zero stride"), UsageError);
    const OperandShape transposed{"output", {4, 6}, {1, 4}};
    const auto layout = plan_layout(ops, &transposed);
    CHECK_FALSE(layout.output.contiguous);
}

TEST_CASE("an output whose elements would share a location is refused, however its strides interleave") {
    struct Row {
        Shape shape;
        std::vector<std::int64_t> strides;
        const char* refused;  // what the message says, or nullptr: planned
    };
    const Row rows[] = {
        {{2, 3}, {3, 1}, nullptr},                // contiguous
        {{2, 3}, {1, 2}, nullptr},                // column-major
        {{2, 3}, {4, 1}, nullptr},                // padded rows
        {{2, 3}, {-3, 1}, nullptr},               // rows walked backwards
        {{1, 3}, {0, 1}, nullptr},                // a zero stride along an extent of 1
        {{0, 3}, {0, 0}, nullptr},                // no elements
        {{2, 3}, {0, 1}, "zero stride"},          // every row at one place
        {{2, 3}, {1, 1}, "at one location"},      // rows one element apart: 1 and 2 shared
        {{2, 3}, {2, 1}, "at one location"},      // the first row's last element is the second's first
        {{2, 2, 2}, {4, 1, 1}, "at one location"},
        {{3, 2}, {2, 3}, "at one location"},      // interleaved without overlap: refused by the sufficient test
    };
    for (const auto& row : rows) {
        CAPTURE(fmt::format("[{}] strides [{}]", fmt::join(row.shape, ", "), fmt::join(row.strides, ", ")));
        const std::vector<OperandShape> ops{{"x", row.shape, {}}};
        const OperandShape out{"output", row.shape, row.strides};
        if (row.refused)
            CHECK_THROWS_WITH_AS(plan_layout(ops, &out), doctest::Contains(row.refused), UsageError);
        else
            CHECK_NOTHROW(plan_layout(ops, &out));
    }
}

TEST_CASE("random output views: every one whose elements overlap is refused") {
    // Against brute force: each view's element offsets enumerated. An overlapping view must be
    // refused; one that does not overlap may be (the test is sufficient, not necessary), but plain
    // permutations of contiguous strides never are.
    std::mt19937 rng(31);
    int overlapping = 0, accepted = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const int rank = 1 + static_cast<int>(rng() % 3);
        Shape shape;
        std::vector<std::int64_t> strides;
        for (int d = 0; d < rank; ++d) {
            shape.push_back(1 + static_cast<std::int64_t>(rng() % 4));
            strides.push_back(static_cast<std::int64_t>(rng() % 9) - 2);  // -2 .. 6
        }
        std::set<std::int64_t> offsets;
        std::int64_t count = 1;
        for (auto e : shape) count *= e;
        for (std::int64_t i = 0; i < count; ++i) {
            std::int64_t rest = i, offset = 0;
            for (int d = rank - 1; d >= 0; --d) {
                offset += (rest % shape[static_cast<std::size_t>(d)]) * strides[static_cast<std::size_t>(d)];
                rest /= shape[static_cast<std::size_t>(d)];
            }
            offsets.insert(offset);
        }
        const bool overlaps = static_cast<std::int64_t>(offsets.size()) < count;
        CAPTURE(fmt::format("[{}] strides [{}]", fmt::join(shape, ", "), fmt::join(strides, ", ")));
        const std::vector<OperandShape> ops{{"x", shape, {}}};
        const OperandShape out{"output", shape, strides};
        bool refused = false;
        try {
            (void)plan_layout(ops, &out);
        } catch (const UsageError&) {
            refused = true;
        }
        if (overlaps) {
            ++overlapping;
            CHECK(refused);
        } else {
            accepted += refused ? 0 : 1;
        }
    }
    CHECK(overlapping > 300);  // the generator reaches both kinds
    CHECK(accepted > 300);
    // Every permutation of a contiguous layout is accepted.
    const Shape shape{2, 3, 4};
    std::vector<int> order{0, 1, 2};
    do {
        std::vector<std::int64_t> strides(3);
        std::int64_t step = 1;
        for (int k = 2; k >= 0; --k) {
            strides[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = step;
            step *= shape[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])];
        }
        const std::vector<OperandShape> ops{{"x", shape, {}}};
        const OperandShape out{"output", shape, strides};
        CHECK_NOTHROW(plan_layout(ops, &out));
    } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("more than 8 uncollapsible dimensions is refused") {
    Shape shape(9, 2);
    std::vector<std::int64_t> odd(9);
    for (int d = 0; d < 9; ++d) odd[static_cast<std::size_t>(d)] = 1ll << (2 * (8 - d) + 1);  // gaps everywhere
    const std::vector<OperandShape> ops{{"p", shape, odd}};
    CHECK_THROWS_WITH_AS(plan_layout(ops, nullptr), doctest::Contains("more than the 8"), UsageError);
}

}  // TEST_SUITE
