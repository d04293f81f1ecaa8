// emit: the generated CUDA is readable (golden file), compiles with NVRTC for sm_90 for every
// example, builtin and layout, and carries nothing of the user's text but identifiers and numbers.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/lossjit.hpp"
#include "builtin_calls.hpp"
#include "paths.hpp"
#include "codegen/kernel_spec.hpp"
#include "pipeline.hpp"

using namespace lossjit;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

ir::Program checked(const std::string& text) { return check(parse(text, "expr"), {}); }

KernelSpec contiguous_spec(const ir::Program& p) {
    KernelSpec spec;
    spec.inner_strides.assign(read_inputs(p).size(), 1);
    return spec;
}

std::string print_body(const std::string& text) {
    const auto p = checked(text);
    return print_expression(p, p.body);
}

}  // namespace

TEST_SUITE("emit") {

TEST_CASE("the expression printer") {
    const std::pair<const char*, const char*> table[] = {
        {"1 - p*t", "(1.0f - (p_ * t_))"},
        {"max(0, x)", "lj_max(0.0f, x_)"},
        {"clamp(x + 3, 0, 6) / 6", "lj_div_by(lj_clamp(x_ + 3.0f, 0.0f, 6.0f), 6.0f, 0.166666672f)"},
        {"x / 0.1", "lj_div_by(x_, 0.100000001f, 10.0f)"},
        {"x / -4", "lj_div_by(x_, (-4.0f), (-0.25f))"},
        {"x / y", "(x_ / y_)"},
        {"6 / x", "(6.0f / x_)"},
        {"x / 1e-30", "(x_ / 1e-30f)"},  // beyond 2^-40: the correction's range would not hold
        {"param b = 2; x / b", "lj_div_by_param(x_, param_b, rcp_param_b)"},  // its range checked at launch
        {"param b = 2; b / x", "(param_b / x_)"},
        {"x^2", "lj_square(x_)"},
        {"x^3", "lj_cube(x_)"},
        {"x^0.5", "sqrt(x_)"},
        {"x^-1", "(1.0f / x_)"},
        {"x^2.5", "pow(x_, 2.5f)"},
        {"x^y", "pow(x_, y_)"},
        {"x < y ? x : y", "((x_ < y_) ? x_ : y_)"},
        {"x ? 1 : 2", "((x_ != 0.0f) ? 1.0f : 2.0f)"},
        {"!x", "(!(x_ != 0.0f))"},
        {"x && y > 0", "((x_ != 0.0f) && (y_ > 0.0f))"},
        {"x * 0.1", "(x_ * 0.100000001f)"},
        {"x * 1e-45", "(x_ * 1.40129846e-45f)"},
        {"x * -2", "(x_ * (-2.0f))"},
        {"x - -0", "(x_ - (-0.0f))"},
        {"x + inf", "(x_ + __int_as_float(0x7f800000))"},
        {"x + -inf", "(x_ + (-__int_as_float(0x7f800000)))"},
        {"x + nan", "(x_ + __int_as_float(0x7fffffff))"},
        {"x % 2", "lj_mod(x_, 2.0f)"},
        {"xlogy(t, t)", "lj_xlogy(t_, t_)"},
        {"isnan(x) + 1", "((float)isnan(x_) + 1.0f)"},
        {"abs(x > 0)", "fabs((float)(x_ > 0.0f))"},  // fabs(float) or fabs(double)? a bool cannot choose
        {"where(x > 0, x, 0)", "((x_ > 0.0f) ? x_ : 0.0f)"},
    };
    for (const auto& [input, expected] : table) {
        CAPTURE(input);
        std::string printed = print_body(input);
        // Inputs print as x_<name>; normalise to <name>_ to keep the table readable.
        for (std::string name : {"p", "t", "x", "y"}) {
            for (std::size_t at = printed.find("x_" + name); at != std::string::npos; at = printed.find("x_" + name, at))
                printed.replace(at, 2 + name.size(), name + "_");
        }
        CHECK(printed == expected);
    }
}

TEST_CASE("golden: the hinge kernel for p [32768, 32768] and a broadcast t [32768]") {
    Options options;
    auto loss = compile(example_text("hinge.loss"), options);
    const std::vector<TensorView> shapes{TensorView::contiguous(nullptr, {32768, 32768}),
                                         TensorView::contiguous(nullptr, {32768})};
    const std::string source = loss.cuda_source(shapes);
    const std::string path = source_dir() + "/tests/golden/hinge.cu";
    if (std::getenv("LOSSJIT_UPDATE_GOLDEN")) {
        std::ofstream(path, std::ios::binary) << source;
    }
    CHECK(source == read_file(path));
}

TEST_CASE("every example compiles to sm_90 CUBIN and to PTX") {
    for (const char* name : {"hinge.loss", "mse.loss", "kl.loss", "smooth_l1.loss", "hardsigmoid.loss"}) {
        CAPTURE(name);
        const auto program = checked(example_text(name));
        const std::string source = emit_cuda(program, contiguous_spec(program));
        const auto cubin = compile_cuda(source, "sm_90");
        CHECK(cubin.is_cubin());
        CHECK(cubin.data.size() > 1000);
        CHECK(cubin.data.compare(0, 4, "\x7f" "ELF") == 0);
    }
    const auto program = checked(example_text("mse.loss"));
    const auto ptx = compile_cuda(emit_cuda(program, contiguous_spec(program)), "compute_90");
    CHECK_FALSE(ptx.is_cubin());
    CHECK(ptx.data.find(".entry lossjit_kernel") != std::string::npos);
}

TEST_CASE("a parameter that divides gets its reciprocal once per thread, in elementwise and row programs") {
    const std::string member = "    Value rcp_param_beta = lj_div_reciprocal(param_beta);\n";
    const std::pair<const char*, bool> table[] = {
        {"param beta = 1; mean(abs(p - t) / beta)", true},
        {"param beta = 1; mean(abs(p - t) * beta)", false},
        {"param beta = 1; mean(beta / abs(p - t))", false},
        {"param beta = 1; sum(logsumexp(p / beta + t, -1))", true},  // a row program (kinds/by_rows_emit.cpp)
    };
    const std::vector<TensorView> shapes{TensorView::contiguous(nullptr, {64, 256}),
                                         TensorView::contiguous(nullptr, {64, 256})};
    for (const auto& [text, divides] : table) {
        CAPTURE(text);
        const std::string source = compile(text).cuda_source(shapes);
        CHECK((source.find(member) != std::string::npos) == divides);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("KL's term takes one log where its parts are computed for nothing else (lj_kl_term)") {
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        DType dtype;
        const char* expected;  // the call printed, or nullptr: the two logs
    };
    const Row table[] = {
        {"batchmean(xlogy(t, t) - t * log(p))", {}, DType::float32, "lj_kl_term_common(x_t, x_p, rare_)"},
        {"batchmean(xlogy(t, t) - log(p) * t)", {}, DType::float32, "lj_kl_term_common(x_t, x_p, rare_)"},
        {"xlogy(t, t) - t * log(p)", {}, DType::float32, "lj_kl_term_common(x_t, x_p, rare_)"},  // a map
        {"sum(xlogy(t, t) - t * log(p), -1)", {}, DType::float32, "lj_kl_term(x_t, x_p)"},  // a row program
        {"batchmean(xlogy(t, t) - t * log(p))", {}, DType::bfloat16, "lj_kl_term_common(x_t, x_p, rare_)"},
        {"batchmean(xlogy(t, t) - t * log(p))", {"p"}, DType::float32, "lj_kl_term(x_t, x_p)"},
        {"batchmean(xlogy(t, t) - t * log(p))", {"t"}, DType::float32, nullptr},  // d/dt uses log(p) too
        {"batchmean(xlogy(t, t) - t * log(p))", {}, DType::float64, nullptr},
        {"batchmean(xlogy(t, p) - t * log(p))", {}, DType::float32, nullptr},
        {"batchmean(t * log(p) - xlogy(t, t))", {}, DType::float32, nullptr},
        {"sum(amax(xlogy(t, t) - t * log(p), -1))", {}, DType::float32, nullptr},  // amax's elements: uncontracted
    };
    for (const Row& row : table) {
        CAPTURE(row.program);
        CAPTURE(row.wrt.size());
        CAPTURE(row.dtype);
        const std::vector<TensorView> shapes{TensorView{nullptr, row.dtype, {64, 256}, {}},
                                             TensorView{nullptr, row.dtype, {64, 256}, {}}};
        Options options;
        options.inputs = {"p", "t"};
        const std::string source = compile(row.program, options).cuda_source(shapes, row.wrt);
        if (row.expected) CHECK(source.find(row.expected) != std::string::npos);
        else CHECK((source.find("lj_kl_term(x_") == std::string::npos && source.find("lj_kl_term_common(x_") == std::string::npos));
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("a map's gradient kernel computes no value: no totals, no finish") {
    // Loss::grad(..., upstream) differentiates sum(upstream * map) but never reads that sum
    // (ir::Program::gradients_only); a reduction's gradient kernel still finishes its value.
    const std::vector<TensorView> shapes{TensorView::contiguous(nullptr, {64, 256})};
    const std::vector<std::string> wrt{"x"};
    const std::pair<const char*, bool> table[] = {
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)", false},
        {"x - logsumexp(x, -1)", false},
        {"logsumexp(x, -1)", false},  // one value per row
        {"sum(x - logsumexp(x, -1))", true},
        {"mean(logsumexp(x, -1))", true},
    };
    for (const auto& [text, finishes] : table) {
        CAPTURE(std::string(text));
        const std::string source = compile(text).cuda_source(shapes, wrt);
        CHECK((source.find("lj::finish_totals<") != std::string::npos) == finishes);
        CHECK((source.find("totals[0] +=") != std::string::npos) == finishes);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("row kernels: whole tiles read the row cache without a load from memory; a take's gradient compares in 32 bits") {
    // With a test per vector between the cache and memory, the compiler computed every vector's
    // address in memory too, predicated off but issued; and `col == i_y` took four instructions an
    // element (two 64-bit adds and compares). kinds/by_rows_emit.cpp (tile), templates/by_rows.cuh.
    const std::vector<TensorView> shapes{TensorView::contiguous(nullptr, {8192, 1024}), TensorView{nullptr, DType::int64, {8192}, {}}};
    const std::vector<std::string> wrt{"x"};
    const std::string source = compile("mean(logsumexp(x, -1) - x[y])").cuda_source(shapes, wrt);
    REQUIRE(source.find("row cache of 1 input") != std::string::npos);
    CHECK(source.find("if (Team::template block_column<VW>(j0 + (long long)(U - 1) * Team::kTeam * VW) < cache_columns) {") !=
          std::string::npos);
    CHECK(source.find("const int tile_y = lj::offset_in_tile(i_y, j0, (long long)U * Team::kTeam * VW);") != std::string::npos);
    CHECK(source.find("const bool hot_y = tile_y == (int)(u * Team::kTeam * VW + q);") != std::string::npos);
    // Only the gradient's walk (its whole tiles and its last) finds the index in the tile, not the logsumexp's.
    std::size_t offsets = 0;
    for (std::size_t at = source.find("const int tile_y ="); at != std::string::npos; at = source.find("const int tile_y =", at + 1))
        ++offsets;
    CHECK(offsets == 2);
    CHECK(source.find("col == i_y") == std::string::npos);  // (only x[k]'s scatter, after the walk, compares columns)
    CHECK(compile_cuda(source, "sm_90").is_cubin());
}

TEST_CASE("a walk's several accumulators are merged together (one pair of block barriers), one alone as before") {
    // lj::Team::all_reduce_each (templates/by_rows.cuh): a block's team exchanges them between one
    // pair of barriers; warps, clusters and two-phase accumulators (logsumexp) merge one at a time.
    struct Row {
        const char* program;
        std::vector<TensorView> shapes;
        std::vector<std::string> wrt;
        const char* merge;  // the merge the walk prints
    };
    const auto rows = [](long long n, long long c) { return TensorView::contiguous(nullptr, {n, c}); };
    const TensorView index{nullptr, DType::int64, {64}, {}};
    const Row table[] = {
        {"mean(1 - sum(a * b, -1) / (sqrt(sum(a * a, -1)) * sqrt(sum(b * b, -1))))", {rows(64, 16384), rows(64, 16384)}, {},
         "Team::all_reduce_each(a"},
        {"mean(1 - sum(a * b, -1) / (sqrt(sum(a * a, -1)) * sqrt(sum(b * b, -1))))", {rows(64, 16384), rows(64, 16384)},
         {"a", "b"}, "Team::all_reduce_each(a"},
        {"mean(amax(x, -1) - amin(x, -1))", {rows(64, 16384)}, {}, "Team::all_reduce_each(a"},
        {"mean(logsumexp(x, -1) - x[y])", {rows(64, 16384), index}, {"x"}, "= Team::all_reduce(a"},
        {"mean(sum(x * x, -1))", {rows(64, 16384)}, {}, "= Team::all_reduce(a"},
    };
    for (const auto& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.wrt.size());
        const std::string source = compile(row.program).cuda_source(row.shapes, row.wrt);
        REQUIRE(source.find(" 32 threads per row") == std::string::npos);  // a block's team: barriers to save
        CHECK(source.find(row.merge) != std::string::npos);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("the elements of amax and amin are computed without FMA contraction, in the value's kernel and the gradient's") {
    // Their gradient compares each element, evaluated again, with the largest: both evaluations must
    // give the same bits (ExpressionPrinter, uncontracted_nodes). Other reductions keep the FMAs.
    const std::pair<const char*, bool> table[] = {
        {"mean(amax(p * t + p, -1))", true},
        {"mean(amin(p - p * t, -1))", true},
        {"h = p * t + 1; mean(amax(h, -1) - sum(h, -1))", true},  // through a binding
        {"mean(var(p * t + p, -1))", true},                          // var's definition compares amax and amin
        {"mean(sum(p * t + p, -1))", false},
        {"mean(logsumexp(p * t + p, -1) - amax(p, -1))", false},     // amax of an input: nothing to round
        {"mean(p * t + p)", false},
    };
    for (DType dtype : {DType::float32, DType::float64}) {
        const std::vector<TensorView> shapes{TensorView{nullptr, dtype, {64, 256}, {}}, TensorView{nullptr, dtype, {64, 256}, {}}};
        const std::vector<std::string> wrt{"p", "t"};
        for (const auto& [text, rounded] : table) {
            CAPTURE(text);
            CAPTURE(to_string(dtype));
            const auto loss = compile(text);
            for (const std::string& source : {loss.cuda_source(shapes), loss.cuda_source(shapes, wrt)}) {
                CHECK((source.find("lj::mul_rn(") != std::string::npos) == rounded);
                CHECK((source.find("lj::add_rn(") != std::string::npos || source.find("lj::sub_rn(") != std::string::npos) ==
                      rounded);
                CHECK(compile_cuda(source, "sm_90").is_cubin());
            }
        }
    }
}

TEST_CASE("every builtin compiles, in every layout and kind") {
    // Every row of the table, plus the forms the printer spells specially (x^2, variadic min, where).
    std::string terms = "x^2 + min(x, y, 1) + where(x > y, x, y) + pi + k";
    for (const auto& row : builtin_table()) terms += " + " + builtin_call(row, {"x", "y", "(x * y)"});
    const std::string reduction = "param k = 2; b = x > y; mean(" + terms + " + b)";
    const std::string map = "param k = 2; " + terms;

    for (const auto& text : {reduction, map}) {
        const auto program = checked(text);
        KernelSpec rows_vector;  // rank 1, contiguous, 16-byte accesses
        rows_vector.inner_strides = {1, 1};
        rows_vector.vector_width = 4;
        rows_vector.unroll = 2;
        KernelSpec rows_broadcast;  // rank 3, y one value per row
        rows_broadcast.rank = 3;
        rows_broadcast.inner_strides = {1, 0};
        KernelSpec strided;
        strided.loop = KernelSpec::Loop::Strided;
        strided.rank = 3;
        for (const auto& spec : {rows_vector, rows_broadcast, strided}) {
            CAPTURE(spec.signature());
            CHECK_NOTHROW(compile_cuda(emit_cuda(program, spec), "sm_90"));
        }
    }
}

TEST_CASE("log and xlogy get a common path (rare inputs flagged, not branched to) in the rows loop's float32 kernels") {
    struct Row {
        const char* program;
        KernelSpec::Loop loop;
        bool f64;
        bool fast_math;
        bool expected;
    };
    const auto rows = KernelSpec::Loop::Rows, strided = KernelSpec::Loop::Strided;
    const Row table[] = {
        {"batchmean(xlogy(t, t) - t * log(p))", rows, false, false, true},  // KL
        {"sum(log(p) * t)", rows, false, false, true},
        {"log(p) + t", rows, false, false, true},  // a map
        {"sum(log(p) * t)", strided, false, false, false},
        {"sum(log(p) * t)", rows, true, false, false},
        {"sum(log(p) * t)", rows, false, true, false},
        {"sum(log1p(p) * t)", rows, false, false, false},  // no log, no xlogy
        {"mean((p - t)^2)", rows, false, false, false},
    };
    for (const Row& row : table) {
        CAPTURE(row.program);
        CAPTURE(row.f64);
        CAPTURE(row.fast_math);
        const auto program = checked(std::string(row.program));
        KernelSpec spec = contiguous_spec(program);
        spec.loop = row.loop;
        spec.fast_math = row.fast_math;
        if (row.f64) spec.compute = DType::float64;
        const std::string source = emit_cuda(program, spec);
        CHECK((source.find("Result common_path(") != std::string::npos) == row.expected);
        // KL's term takes one log (templates/lj_log.cuh: lj_kl_term); the other programs lj_log's common path
        const bool kl = std::string(row.program).starts_with("batchmean");
        if (row.expected) CHECK(source.find(kl ? "lj_kl_term_common(x_t, x_p, rare_)" : "lj_log_common(x_p, rare_)") != std::string::npos);
    }
    // Gradients keep one body: the fused kernels' loops call operator() alone.
    const auto grad = differentiate(checked("sum(log(p) * t)"), std::vector<int>{0}, {});
    CHECK(emit_cuda(grad, contiguous_spec(grad)).find("Result common_path(") == std::string::npos);
}

TEST_CASE("every dtype loads, stores and computes: NVRTC compiles each in each kernel kind") {
    // Loads and stores of each dtype (and a mix), as a reduction (its result in the inputs'
    // floating type), a map and a fused gradient, with vector and scalar accesses.
    const auto reduction = checked("param k = 2; mean(x * y + k + x / k)");
    const auto map = checked("param k = 2; x * y + k + y / k");
    const auto grad = differentiate(reduction, std::vector<int>{0, 1}, {});
    const Shape shape{64, 256};
    const std::vector<OperandShape> shapes{{"x", shape, {}}, {"y", shape, {}}};
    const OperandShape out{"out", shape, {}};
    for (const DType dtype : all_dtypes()) {
        CAPTURE(to_string(dtype));
        for (const ir::Program* program : {&reduction, &map, &grad}) {
            if (program == &grad && !is_floating(dtype)) continue;  // integers have no gradient
            KernelOperands operands = KernelOperands::unplaced(*program, dtype);
            if (program == &reduction) operands.input_dtypes[1] = DType::bfloat16;  // a mix
            const Layout layout = plan_layout(shapes, program == &reduction ? nullptr : &out);
            for (int vector_width : {1, 4, 8}) {
                const KernelSpec spec = KernelSpec::choose(*program, layout, operands, Knobs{.vector_width = vector_width});
                CAPTURE(spec.signature());
                const std::string source = emit_cuda(*program, spec);
                CHECK((source.find("using Value = double;") != std::string::npos) == (dtype == DType::float64));
                CHECK_NOTHROW(compile_cuda(source, "sm_90"));
            }
        }
    }
}

TEST_CASE("every builtin compiles in a float64 program") {
    // The table's patterns are overloaded math functions and templated helpers: each must resolve
    // to its double version where the program computes in float64.
    std::string terms = "x^2 + min(x, y, 1) + where(x > y, x, y) + pi + k";
    for (const auto& row : builtin_table()) terms += " + " + builtin_call(row, {"x", "y", "(x * y)"});
    const auto program = checked("param k = 2; mean(" + terms + ")");
    const std::vector<OperandShape> shapes{{"x", {4096}, {}}, {"y", {4096}, {}}};
    const KernelSpec spec = KernelSpec::choose(program, plan_layout(shapes, nullptr),
                                               KernelOperands::unplaced(program, DType::float64));
    CHECK(spec.compute == DType::float64);
    CHECK_NOTHROW(compile_cuda(emit_cuda(program, spec), "sm_90"));
}

TEST_CASE("a float64 program prints its constants as doubles") {
    auto loss = compile("mean((p - t)^2 * 0.1 + 1e-300)");
    const std::vector<TensorView> f64{TensorView::contiguous(nullptr, {1024}, DType::float64),
                                      TensorView::contiguous(nullptr, {1024}, DType::float32)};
    const std::string source = loss.cuda_source(f64);
    CHECK(source.find("using Value = double;") != std::string::npos);
    CHECK(source.find("* 0.1)") != std::string::npos);
    CHECK(source.find("+ 1e-300") != std::string::npos);
    CHECK(source.find("dtype(int k) { return k == 0 ? lj::kFloat64 : lj::kFloat32; }") != std::string::npos);
    const std::vector<TensorView> f32(2, TensorView::contiguous(nullptr, {1024}));
    CHECK(loss.cuda_source(f32).find("0.100000001f") != std::string::npos);
}

TEST_CASE("NVRTC failures carry the log, the options and the source") {
    try {
        compile_cuda("this is not CUDA", "sm_90");
        FAIL("no error");
    } catch (const CompileError& e) {
        CHECK_FALSE(e.log().empty());
        CHECK(e.source() == "this is not CUDA");
        CHECK(e.options().front() == "--gpu-architecture=sm_90");
        CHECK(std::string(e.what()).find("--- generated source ---") != std::string::npos);
    }
}

TEST_CASE("nothing of the user's text reaches the source except identifiers and numbers") {
    const std::string hostile = "# */ asm(\"trap;\"); #include <stdio.h>\n"
                                "__evil = p; mean(__evil * 1e-3) # \\\n# \");";
    const auto program = checked(hostile);
    const std::string source = emit_cuda(program, contiguous_spec(program));
    CHECK(source.find("trap") == std::string::npos);
    CHECK(source.find("#include") == std::string::npos);
    CHECK(source.find("stdio") == std::string::npos);
    CHECK(source.find("b___evil") != std::string::npos);
    CHECK(source.find("0.00100000005f") != std::string::npos);
    CHECK_NOTHROW(compile_cuda(source, "sm_90"));
}

TEST_CASE("bad kernel variants are refused") {
    // validate_knobs refuses such knobs from callers (test_knobs); a spec made with them anyway is a
    // bug inside lossjit.
    const auto program = checked("mean(x)");
    KernelSpec spec = contiguous_spec(program);
    spec.block_threads = 100;
    CHECK_THROWS_AS(emit_cuda(program, spec), InternalError);
    spec = contiguous_spec(program);
    spec.unroll = kMaxUnroll + 1;
    CHECK_THROWS_AS(emit_cuda(program, spec), InternalError);
    CHECK_THROWS_AS(normalize_target("sm_1"), UsageError);
    CHECK_THROWS_AS(normalize_target("gpu"), UsageError);
    CHECK(normalize_target("90") == "sm_90");
    CHECK(normalize_target("compute_90") == "compute_90");
}


// The kernels of every kind for the layouts and dtypes that choose between their variants: for each,
// the variant (the source's "Kernel variant" line) and a hash of the whole source, in
// tests/golden/kernels.txt (refreshed with LOSSJIT_UPDATE_GOLDEN=1). A change to the back end that
// should not change what runs (a refactor) leaves the file as it is; one that should, shows in its
// diff which kernels it changed.
TEST_CASE("golden: the kernel of every kind, for the layouts that choose between variants") {
    struct In {
        std::string name;
        Shape shape;
        DType dtype = DType::float32;
        std::vector<std::int64_t> strides{};
    };
    struct Case {
        std::string label;
        std::string program;  // text, or an example's file name
        std::vector<In> inputs;
        std::vector<std::string> wrt{};
        Knobs knobs{};
    };
    const Shape big{4096, 4096}, small{33, 70};
    const std::vector<Case> cases = {
        // elementwise reductions and maps: the rows loop (vector widths, dtypes), the strided loop, one block
        {"mse", "mse.loss", {{"p", big}, {"t", big}}},
        {"mse bf16", "mse.loss", {{"p", big, DType::bfloat16}, {"t", big, DType::bfloat16}}},
        {"mse f64", "mse.loss", {{"p", big, DType::float64}, {"t", big, DType::float64}}},
        {"mse small", "mse.loss", {{"p", small}, {"t", small}}},
        {"mse transposed", "mse.loss", {{"p", big, DType::float32, {1, 4096}}, {"t", big}}},
        {"hinge", "hinge.loss", {{"p", big}, {"t", {4096}}}},
        {"kl", "kl.loss", {{"p", big}, {"t", big}}},
        {"smooth_l1", "smooth_l1.loss", {{"p", big}, {"t", big}}},
        {"hardsigmoid", "hardsigmoid.loss", {{"x", big}}},
        {"hardsigmoid f16", "hardsigmoid.loss", {{"x", big, DType::float16}}},
        {"hinge block 128 vector 1", "hinge.loss", {{"p", big}, {"t", {4096}}}, {},
         Knobs{.block_threads = 128, .vector_width = 1}},
        {"mse float32 accumulator", "mse.loss", {{"p", big}, {"t", big}}, {}, Knobs{.accumulator = Accumulator::Float32}},
        // fused value and gradients: stored, summed over rows (columns loop), along rows, over all
        {"mse grad", "mse.loss", {{"p", big}, {"t", big}}, {"p", "t"}},
        {"hinge grad p t", "hinge.loss", {{"p", big}, {"t", {4096}}}, {"p", "t"}},
        {"hinge grad bf16", "hinge.loss", {{"p", big, DType::bfloat16}, {"t", {4096}, DType::bfloat16}}, {"p", "t"}},
        {"squared hinge grad t [N, 1]", "squared_hinge.loss", {{"p", big}, {"t", {4096, 1}}}, {"p", "t"}},
        {"weighted mse grad w scalar", "weighted_mse.loss", {{"w", {1}}, {"p", big}, {"t", big}}, {"w", "p"}},
        {"smooth_l1 grad", "smooth_l1.loss", {{"p", big}, {"t", big}}, {"p"}},
        {"map backward", "hardsigmoid.loss", {{"x", big}}, {"x"}},
        {"grad strided", "mse.loss", {{"p", big, DType::float32, {1, 4096}}, {"t", big}}, {"p"}},
        // programs that reduce along rows: warp and block teams, maps per row, several totals, fused
        {"cross_entropy", "cross_entropy.loss", {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}}},
        {"cross_entropy long rows", "cross_entropy.loss", {{"x", {64, 131072}}, {"y", {64}, DType::int64}}},
        {"cross_entropy grad", "cross_entropy.loss", {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}}, {"x"}},
        {"cross_entropy bf16 grad", "cross_entropy.loss", {{"x", {8192, 1000}, DType::bfloat16}, {"y", {8192}, DType::int64}}, {"x"}},
        {"cross_entropy_ignore grad", "cross_entropy_ignore.loss", {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}}, {"x"}},
        {"cross_entropy_weighted grad", "cross_entropy_weighted.loss",
         {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}, {"w", {1000}}}, {"x"}},
        {"cross_entropy_weighted grad x w (scattered)", "cross_entropy_weighted.loss",
         {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}, {"w", {1000}}}, {"x", "w"}},
        {"cross_entropy_smoothing", "cross_entropy_smoothing.loss", {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}}, {"x"}},
        {"cosine grad", "cosine.loss", {{"a", {4096, 1024}}, {"b", {4096, 1024}}}, {"a", "b"}},
        {"triplet grad", "triplet.loss", {{"a", {4096, 1024}}, {"p", {4096, 1024}}, {"n", {4096, 1024}}}, {"a", "p", "n"}},
        {"distill_kl", "distill_kl.loss", {{"s", {8192, 1000}}, {"t", {8192, 1000}}}, {"s"}},
        {"distill_topk grad x q (K indices per row)", "distill_topk.loss",
         {{"x", {8192, 1000}}, {"k", {8192, 16}, DType::int64}, {"q", {8192, 16}}}, {"x", "q"}},
        {"focal", "focal.loss", {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}}},
        {"masked_mse", "masked_mse.loss", {{"p", big}, {"t", big}, {"m", big, DType::boolean}}, {"p"}},
        {"log_softmax map", "x - logsumexp(x, -1)", {{"x", {8192, 1000}}}},
        {"per-row map", "logsumexp(x, -1) - x[y]", {{"x", {8192, 1000}}, {"y", {8192}, DType::int64}}},
        // along another dimension: strided rows side by side, 32 to a block; its gradient
        {"rms norm dim 1", "x / sqrt(mean(x^2, 1) + 1e-5)", {{"x", {16, 64, 4096}}}},
        {"cross_entropy dim 1 grad", "mean(logsumexp(x, 1) - x[y])", {{"x", {16, 100, 4096}}, {"y", {16, 4096}, DType::int64}}, {"x"}},
    };
    std::string manifest;
    for (const auto& c : cases) {
        CAPTURE(c.label);
        Options options;
        options.knobs = c.knobs;
        options.use_tuning = false;
        std::vector<TensorView> views;
        for (const auto& in : c.inputs) {
            options.inputs.push_back(in.name);
            views.push_back(TensorView{nullptr, in.dtype, in.shape, in.strides});
        }
        const bool file = c.program.ends_with(".loss");
        const auto loss = compile(file ? example_text(c.program) : c.program, options);
        const std::string source = loss.cuda_source(views, c.wrt);
        const auto variant_at = source.find("// Kernel variant: ");
        REQUIRE(variant_at != std::string::npos);
        const std::string variant = source.substr(variant_at + 19, source.find('\n', variant_at) - variant_at - 19);
        manifest += fmt::format("{}: {:016x} {}\n", c.label, XXH3_64bits(source.data(), source.size()), variant);
    }
    const std::string path = source_dir() + "/tests/golden/kernels.txt";
    if (std::getenv("LOSSJIT_UPDATE_GOLDEN")) std::ofstream(path, std::ios::binary) << manifest;
    CHECK(manifest == read_file(path));
}

}  // TEST_SUITE
