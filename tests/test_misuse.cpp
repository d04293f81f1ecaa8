// misuse: the C++ API called wrongly, without a GPU (shapes only, or the CPU reference on tiny
// data). Each mistake is a lossjit exception with a message that names the problem, and the Loss
// keeps working afterwards. The sanitizer build (scripts/sanitize.sh) runs this suite for leaks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "lossjit/lossjit.hpp"

using namespace lossjit;

namespace {

constexpr std::int64_t kBig = std::int64_t{1} << 40;

// The buffers every well-formed call below uses; 8 floats so that a view of 6 fits misaligned too.
struct Data {
    alignas(16) float p[8] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, 3.0f, 0.0f, 0.0f};
    alignas(16) float t[8] = {1.0f, -1.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
};

struct Misuse {
    const char* what;
    std::function<void(Loss&, Data&)> call;
    const char* message;  // part of what()
};

template <typename E>
void expect_error(const Misuse& m, Loss& loss, Data& data) {
    CAPTURE(m.what);
    try {
        m.call(loss, data);
        FAIL("no error");
    } catch (const E& e) {
        CHECK(std::string(e.what()).find(m.message) != std::string::npos);
        CAPTURE(e.what());
    }
}

// hinge over p [2, 3] and t [3]: rows (0.5, -1, 2) and (0, 1.5, 3) with t = (1, -1, 1).
double hinge_value() { return (0.5 + 0.0 + 0.0 + 1.0 + 2.5 + 0.0) / 6.0; }

double good_call(Loss& loss, Data& data) {
    const std::vector<TensorView> views{TensorView::contiguous(data.p, {2, 3}), TensorView::contiguous(data.t, {3})};
    return loss.reference(views);
}

}  // namespace

TEST_SUITE("misuse") {

TEST_CASE("wrong calls are UsageErrors that say what is wrong, and the Loss still works") {
    Options options;
    options.inputs = {"p", "t"};
    Loss loss = compile("mean(max(0, 1 - p*t))", options);
    Data data;
    REQUIRE(good_call(loss, data) == doctest::Approx(hinge_value()));

    auto views = [](std::initializer_list<TensorView> v) { return std::vector<TensorView>(v); };
    const Misuse table[] = {
        {"shapes that do not broadcast",
         [&](Loss& l, Data& d) { l.reference(views({TensorView::contiguous(d.p, {2, 3}), TensorView::contiguous(d.t, {2})})); },
         "shapes do not broadcast: 'p' [2, 3] and 't' [2] differ in dimension 1 from the end (3 vs 2)"},
        {"too few inputs", [&](Loss& l, Data& d) { l.reference(views({TensorView::contiguous(d.p, {2, 3})})); },
         "the program takes 2 inputs (p, t), but 1 was given"},
        {"too many inputs",
         [&](Loss& l, Data& d) {
             l.reference(views({TensorView::contiguous(d.p, {3}), TensorView::contiguous(d.t, {3}), TensorView::contiguous(d.t, {3})}));
         },
         "the program takes 2 inputs (p, t), but 3 were given"},
        {"no inputs", [&](Loss& l, Data&) { l.reference({}); }, "but 0 were given"},
        {"a null pointer",
         [&](Loss& l, Data& d) { l.reference(views({TensorView::contiguous(nullptr, {2, 3}), TensorView::contiguous(d.t, {3})})); },
         "'p' has no data (a null pointer)"},
        {"a misaligned pointer",
         [&](Loss& l, Data& d) {
             const void* odd = reinterpret_cast<const char*>(d.p) + 1;
             l.reference(views({TensorView::contiguous(odd, {2, 3}), TensorView::contiguous(d.t, {3})}));
         },
         "'p' is not aligned to 4 bytes (address 0x"},
        {"float64 data not aligned to 8 bytes",
         [&](Loss& l, Data& d) {
             const void* odd = reinterpret_cast<const char*>(d.p) + 4 * (reinterpret_cast<std::uintptr_t>(d.p) % 8 == 0);
             l.reference(views({TensorView::contiguous(odd, {1}, DType::float64), TensorView::contiguous(d.t, {3})}));
         },
         "'p' is not aligned to 8 bytes"},
        {"a dtype that does not exist",
         [&](Loss& l, Data& d) {
             l.reference(views({TensorView::contiguous(d.p, {3}, static_cast<DType>(8)), TensorView::contiguous(d.t, {3})}));
         },
         "'p' has an unknown dtype (8)"},
        {"a negative extent",
         [&](Loss& l, Data& d) { l.reference(views({TensorView::contiguous(d.p, {2, -3}), TensorView::contiguous(d.t, {3})})); },
         "negative extent"},
        {"more than 2^62 elements",
         [&](Loss& l, Data& d) { l.reference(views({TensorView::contiguous(d.p, {kBig, kBig}), TensorView::contiguous(d.t, {1})})); },
         "more than 2^62 elements"},
        {"strides of the wrong rank",
         [&](Loss& l, Data& d) { l.reference(views({TensorView{d.p, DType::float32, {2, 3}, {1}}, TensorView::contiguous(d.t, {3})})); },
         "'p' has 1 strides for a shape of rank 2"},
        {"strides that overflow 64-bit offsets",
         [&](Loss& l, Data& d) {
             l.reference(views({TensorView{d.p, DType::float32, {3}, {std::int64_t{1} << 62}}, TensorView::contiguous(d.t, {3})}));
         },
         "'p' has strides [4611686018427387904] that reach beyond 2^62 elements for its shape [3]"},
        {"the most negative stride",
         [&](Loss& l, Data& d) {
             l.reference(views({TensorView{d.p, DType::float32, {2}, {std::numeric_limits<std::int64_t>::min()}},
                                TensorView::contiguous(d.t, {2})}));
         },
         "reach beyond 2^62 elements"},
        {"map() on a reduction", [&](Loss& l, Data& d) { l.map({}, OutputView::contiguous(d.p, {1})); },
         "this program is a mean reduction: call it for a value, not map()"},
        {"reference_map() on a reduction", [&](Loss& l, Data& d) { l.reference_map({}, OutputView::contiguous(d.p, {1})); },
         "this program is a reduction: use reference()"},
        {"evaluate() without a result pointer", [&](Loss& l, Data&) { l.evaluate({}, nullptr); },
         "evaluate() needs a device pointer for the result"},
        {"an unknown parameter", [&](Loss& l, Data&) { l.set_param("beta", 1); },
         "the program has no parameter 'beta' (its parameters: none)"},
        {"an unknown parameter with a NUL in its name", [&](Loss& l, Data&) { l.set_param(std::string("b\0\n", 3), 1); },
         "the program has no parameter 'b\\x00\\x0a' (its parameters: none)"},
        {"threads per block that are not a multiple of 32",
         [&](Loss&, Data&) {
             Options o;
             o.knobs.block_threads = 100;
             (void)compile("mean(x)", o).cuda_source();
         },
         "threads per block must be a multiple of 32 in [32, 1024], not 100"},
        {"negative threads per block",
         [&](Loss&, Data&) {
             Options o;
             o.knobs.block_threads = -64;
             (void)compile("mean(x)", o).cuda_source();
         },
         "not -64"},
        {"a bad architecture", [&](Loss& l, Data&) { (void)l.ptx({}, "sm_banana"); }, "sm_banana"},
    };
    for (const auto& m : table) {
        expect_error<UsageError>(m, loss, data);
        CHECK(good_call(loss, data) == doctest::Approx(hinge_value()));
    }
    // The same checks hold without data, for the shape-only stages.
    CHECK_THROWS_AS(loss.output_shape(views({TensorView::contiguous(nullptr, {2, 3}), TensorView::contiguous(nullptr, {2})})),
                    UsageError);
    CHECK_THROWS_AS(loss.cuda_source(views({TensorView::contiguous(nullptr, {-1}), TensorView::contiguous(nullptr, {3})})),
                    UsageError);
    CHECK_THROWS_WITH_AS(loss.cuda_source(views({TensorView::contiguous(nullptr, {kBig, kBig}), TensorView::contiguous(nullptr, {1})})),
                         doctest::Contains("more than 2^62 elements"), UsageError);
    CHECK(good_call(loss, data) == doctest::Approx(hinge_value()));
}

TEST_CASE("maps: the output must have the broadcast shape, distinct elements, data and a floating dtype") {
    Loss map = compile("clamp(x + 3, 0, 6) / 6");
    Data data;
    float out[3] = {};
    const std::vector<TensorView> x{TensorView::contiguous(data.p, {3})};
    const Misuse table[] = {
        {"the wrong output shape", [&](Loss& l, Data&) { l.reference_map(x, OutputView::contiguous(out, {2})); },
         "the output has shape [2], but the inputs broadcast to [3]"},
        {"a zero output stride", [&](Loss& l, Data&) { l.reference_map(x, OutputView{out, DType::float32, {3}, {0}}); },
         "the output has a zero stride"},
        {"a null output", [&](Loss& l, Data&) { l.reference_map(x, OutputView::contiguous(nullptr, {3})); },
         "'output' has no data (a null pointer)"},
        {"an integer output", [&](Loss& l, Data&) { l.reference_map(x, OutputView::contiguous(out, {3}, DType::int32)); },
         "'output' is int32; lossjit writes float32, float64, bfloat16 or float16"},
        {"a misaligned output",
         [&](Loss& l, Data&) { l.reference_map(x, OutputView::contiguous(reinterpret_cast<char*>(out) + 2, {1})); },
         "'output' is not aligned to 4 bytes"},
        {"reference() on a map", [&](Loss& l, Data&) { l.reference(x); }, "this program is an elementwise map: use reference_map()"},
        {"operator() on a map", [&](Loss& l, Data&) { (void)l(x); }, "this program is an elementwise map: call map() with an output"},
    };
    for (const auto& m : table) {
        expect_error<UsageError>(m, map, data);
        map.reference_map(x, OutputView::contiguous(out, {3}));
        CHECK(out[0] == doctest::Approx((0.5 + 3) / 6));
    }
}

TEST_CASE("bad options are refused at compile()") {
    const std::pair<std::vector<std::string>, const char*> inputs[] = {
        {{"p", "p"}, "input 'p' is listed twice"},
        {{"p", "1t"}, "input name '1t' is not an identifier"},
        {{"p", ""}, "input name '' is not an identifier"},
        {{"p", "t; asm"}, "input name 't; asm' is not an identifier"},
        {{"p", std::string("t\0u", 3)}, "input name 't\\x00u' is not an identifier"},
        {{"p", std::string(1000, '-')}, "input name '----------------------------------------------------------------... (1000 bytes)' is not"},
    };
    for (const auto& [names, message] : inputs) {
        Options options;
        options.inputs = names;
        CAPTURE(message);
        try {
            (void)compile("mean(p)", options);
            FAIL("accepted");
        } catch (const UsageError& e) {
            CHECK_MESSAGE(std::string(e.what()).find(message) != std::string::npos, std::string(e.what()));
        }
    }
    Options options;
    options.params = {{"beta)", 1.0}};
    CHECK_THROWS_WITH_AS(compile("mean(p)", options), "parameter name 'beta)' is not an identifier", UsageError);
    // A name the caller did not list is the program's mistake, so it gets a caret.
    options = {};
    options.inputs = {"p"};
    CHECK_THROWS_AS(compile("mean(p - t)", options), SourceError);
}

TEST_CASE("parameters the caller sets must be ones the program reads, and not its inputs") {
    const struct {
        const char* program;
        std::vector<std::string> inputs;
        std::vector<Param> params;
        const char* message;  // "" when accepted
    } cases[] = {
        {"param beta = 1; mean(p * beta)", {}, {{"betta", 2}}, "the program does not use a parameter 'betta' (did you mean 'beta'?)"},
        {"param margin = 1; mean(p * margin)", {"p"}, {{"margn", 2}}, "does not use a parameter 'margn' (did you mean 'margin'?)"},
        {"mean(p)", {}, {{"zeta", 2}}, "the program does not use a parameter 'zeta'"},
        {"param beta = 1; b = beta; mean(p)", {}, {{"beta", 2}}, ""},  // read by a binding the body skips
        {"param beta = 1; mean(p)", {}, {{"beta", 2}}, "does not use a parameter 'beta'"},
        {"mean(p - t)", {"p", "t"}, {{"t", 1}}, "'t' is listed as an input and cannot also be a parameter"},
        {"mean(p * beta)", {}, {{"beta", 1}, {"beta", 2}}, "parameter 'beta' is given twice"},
        {"mean(p * beta)", {}, {{"beta", 3}}, ""},  // declares beta: the free name is not an input
        {"mean(p - t)", {}, {{"t", 1}}, ""},        // the same: t is a parameter, p the one input
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.program));
        Options options;
        options.inputs = c.inputs;
        options.params = c.params;
        if (*c.message == '\0') {
            const Loss loss = compile(c.program, options);
            CHECK(loss.inputs() == std::vector<std::string>{"p"});
            continue;
        }
        try {
            (void)compile(c.program, options);
            FAIL("accepted");
        } catch (const UsageError& e) {
            CHECK_MESSAGE(std::string(e.what()).find(c.message) != std::string::npos, std::string(e.what()));
        }
    }
}

TEST_CASE("devices: a negative ordinal is refused; on_device copies the program and its parameters") {
    Options options;
    options.device = -1;
    CHECK_THROWS_WITH_AS(compile("mean(p)", options), "device -1 is not a CUDA device ordinal", UsageError);
    Loss loss = compile("param beta = 1; mean(beta * p)");
    loss.set_param("beta", 3.0);
    const Loss other = loss.on_device(5);  // no GPU is touched until a call
    CHECK(loss.device() == 0);
    CHECK(other.device() == 5);
    CHECK(other.params()[0].value == 3.0);
    CHECK(Loss(other).device() == 5);  // copies keep the device
    CHECK_THROWS_AS((void)loss.on_device(-2), UsageError);
}

TEST_CASE("empty tensors and more than 2^31 elements are handled, not refused") {
    Options options;
    options.inputs = {"p", "t"};
    Loss loss = compile("mean(max(0, 1 - p*t))", options);
    Loss total = compile("sum(p * t)", options);
    Data data;
    const std::vector<TensorView> empty{TensorView::contiguous(nullptr, {0, 3}), TensorView::contiguous(data.t, {3})};
    CHECK(std::isnan(loss.reference(empty)));
    CHECK(total.reference(empty) == 0.0);
    CHECK(loss.output_shape(empty) == Shape{0, 3});
    CHECK_NOTHROW((void)loss.cuda_source(empty));

    // 2^32 elements: a [65536, 65536] p against a [65536] t. Only the shape-level stages run here;
    // the index arithmetic is 64-bit throughout (the GPU suite runs the large problems).
    const std::int64_t n = 65536;
    const std::vector<TensorView> large{TensorView::contiguous(nullptr, {n, n}), TensorView::contiguous(nullptr, {n})};
    CHECK(loss.output_shape(large) == Shape{n, n});
    const std::string source = loss.cuda_source(large);
    // The rows loop walks tiles and columns with 64-bit counters.
    CHECK(source.find("lj::for_rows<") != std::string::npos);
    CHECK(source.find("long long row = R == 1 ? 0 : whole_rows ? (long long)blockIdx.x : in_rows(blockIdx.x);") !=
          std::string::npos);
    CHECK(source.find("long long in_row = whole_rows ? 0 : (long long)blockIdx.x - row * tiles_per_row;") !=
          std::string::npos);
    CHECK(source.find("const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;") != std::string::npos);
    CHECK(good_call(loss, data) == doctest::Approx(hinge_value()));
}

// What the type system rules out: there is no empty Loss, a stream is typed, timings are a snapshot.
static_assert(!std::is_default_constructible_v<Loss>);
static_assert(std::is_same_v<Stream, CUstream_st*>);
static_assert(!std::is_reference_v<decltype(std::declval<const Loss&>().timings())>);
static_assert(!std::is_convertible_v<int*, Stream>);
// Views hold their shape and strides in place: copying one is a memcpy, making one never allocates.
static_assert(std::is_trivially_copyable_v<TensorView> && std::is_trivially_copyable_v<OutputView>);

TEST_CASE("a view's dims: from braces or a Shape, compared with either, at most kMaxViewRank") {
    const Shape shape{64, 32};
    const TensorView a = TensorView::contiguous(nullptr, shape);
    const TensorView b = TensorView::contiguous(nullptr, {64, 32});
    CHECK(a.shape == b.shape);
    CHECK(a.shape == shape);
    CHECK(shape == a.shape);
    CHECK_FALSE(a.shape == Shape{64});
    CHECK(a.shape.to_vector() == shape);
    CHECK(a.numel() == 2048);
    CHECK(format_shape(a.shape) == "64x32");
    CHECK(a.effective_strides() == Shape{32, 1});
    const TensorView scalar = TensorView::contiguous(nullptr, {});
    CHECK((scalar.shape.empty() && scalar.numel() == 1));
    CHECK_NOTHROW(Dims(Shape(kMaxViewRank, 1)));
    CHECK_THROWS_WITH_AS(Dims(Shape(kMaxViewRank + 1, 1)), "a view has 17 dimensions; lossjit takes at most 16",
                         UsageError);
}

TEST_CASE("copies share the program, not the parameters") {
    Data d;
    const TensorView p = TensorView::contiguous(d.p, {6});
    Loss original = compile("param beta = 1; sum(p * beta)");
    Loss copy = original;
    copy.set_param("beta", 2.0);
    CHECK(original.params()[0].value == 1.0);
    CHECK(copy.params()[0].value == 2.0);
    CHECK(copy.reference(std::span(&p, 1)) == doctest::Approx(2 * original.reference(std::span(&p, 1))));
    Loss assigned = compile("sum(p)");
    assigned = copy;  // takes copy's program and current parameters
    CHECK(assigned.params()[0].value == 2.0);
    CHECK(assigned.inputs() == std::vector<std::string>{"p"});
    // Copies live in containers and are used from several threads, each with its own state.
    std::vector<Loss> losses(4, original);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < losses.size(); ++i)
        threads.emplace_back([&, i] { losses[i].set_param("beta", static_cast<double>(i)); });
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < losses.size(); ++i) CHECK(losses[i].params()[0].value == static_cast<double>(i));
}

TEST_CASE("Options::expect catches a map-vs-reduction mistake at compile(), at the program's body") {
    Options want_reduction;
    want_reduction.expect = Kind::Reduction;
    CHECK_NOTHROW(compile("mean(p)", want_reduction));
    try {
        compile("y = p * 2;\nabs(y)", want_reduction);
        FAIL("expected a SourceError");
    } catch (const SourceError& e) {
        CHECK(e.where().line == 2);
        CHECK(e.where().column == 1);
        CHECK(std::string(e.what()).find("expected a reduction") != std::string::npos);
    }
    Options want_map;
    want_map.expect = Kind::Map;
    CHECK_NOTHROW(compile("relu(p)", want_map));
    CHECK_THROWS_WITH_AS(compile("sum(p)", want_map), doctest::Contains("this program is a sum reduction"), SourceError);
}

}  // TEST_SUITE
