// Tests for the host-side utilities: shape strings, generators and .npy files.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "lossjit/errors.hpp"
#include "tools/host.hpp"
#include "lossjit/tensor.hpp"
#include "util/atomic_file.hpp"
#include "util/numeric.hpp"
#include "util/units.hpp"

using lossjit::Shape;
using lossjit::UsageError;

namespace {

// Runs f, requires it to throw UsageError, and returns the message so the test can check that the
// message names what went wrong.
template <class F>
std::string usage_error_of(F&& f) {
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("threw something other than UsageError: " << e.what());
        return {};
    }
    FAIL("did not throw");
    return {};
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

class TempDir {
public:
    TempDir() {
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() /
                ("lossjit-test-host-" + std::to_string(rd()) + std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A .npy file built by hand, independently of save_npy, so the reader is tested against the format
// rather than against our own writer. `align` mimics numpy (64) or old numpy (16).
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1,
                      std::size_t align = 64) {
    const std::size_t preamble = major == 1 ? 10 : 12;
    std::string header = dict;
    while ((preamble + header.size() + 1) % align != 0) header += ' ';
    header += '\n';
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t i = 0; i < preamble - 8; ++i) {
        out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    }
    return out + header + data;
}

std::string float_bytes(const std::vector<float>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

lossjit::HostTensor gen(const std::string& text, std::uint64_t seed = 1) {
    return lossjit::generate(lossjit::parse_generator(text), seed);
}

// The elements of a float32 tensor, as a vector to compare.
std::vector<float> vals(const lossjit::HostTensor& t) {
    const auto f = t.floats();
    return {f.begin(), f.end()};
}

}  // namespace

TEST_SUITE("host") {

TEST_CASE("tensor helpers") {
    CHECK(lossjit::to_string(lossjit::DType::float32) == "float32");
    CHECK(lossjit::to_string(lossjit::DType::float64) == "float64");
    CHECK(lossjit::size_of(lossjit::DType::float32) == 4);
    CHECK(lossjit::size_of(lossjit::DType::float64) == 8);

    struct Case {
        Shape shape;
        std::int64_t count;
        std::vector<std::int64_t> strides;
        std::string text;
    };
    const Case cases[] = {
        {{}, 1, {}, "scalar"},
        {{4096}, 4096, {1}, "4096"},
        {{2, 3, 4}, 24, {12, 4, 1}, "2x3x4"},
        {{32768, 32768}, std::int64_t{1} << 30, {32768, 1}, "32768x32768"},
        {{2, 0, 3}, 0, {3, 3, 1}, "2x0x3"},
        {{0, std::int64_t{1} << 40, std::int64_t{1} << 40}, 0, {}, "0x1099511627776x1099511627776"},
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.text));
        CHECK(lossjit::element_count(c.shape) == c.count);
        if (!c.strides.empty() || c.shape.empty()) CHECK(lossjit::contiguous_strides(c.shape) == c.strides);
        CHECK(lossjit::format_shape(c.shape) == c.text);
    }
    CHECK(lossjit::element_count({std::int64_t{1} << 31, std::int64_t{1} << 31}) ==
          std::int64_t{1} << 62);
    CHECK_THROWS_AS(lossjit::element_count({std::int64_t{1} << 31, (std::int64_t{1} << 31) + 1}),
                    UsageError);
    CHECK_THROWS_AS(lossjit::element_count({std::int64_t{1} << 40, std::int64_t{1} << 40}), UsageError);
    CHECK_THROWS_AS(lossjit::element_count({3, -1}), UsageError);
}

TEST_CASE("parse_shape accepts") {
    const std::pair<const char*, Shape> cases[] = {
        {"32768x32768", {32768, 32768}},
        {"4096", {4096}},
        {"2x3x4", {2, 3, 4}},
        {"scalar", {}},
        {"0", {0}},
        {"3x0x2", {3, 0, 2}},
        {"007", {7}},
        {"1099511627776", {std::int64_t{1} << 40}},
        {"1x2x3x4x5x6x7x8", {1, 2, 3, 4, 5, 6, 7, 8}},
        {"0x1099511627776x1099511627776", {0, std::int64_t{1} << 40, std::int64_t{1} << 40}},
        {" 5x6 ", {5, 6}},
    };
    // Pairs are unpacked by hand: clang before 16 cannot capture structured bindings, which
    // CAPTURE does.
    for (const auto& c : cases) {
        const std::string text = c.first;
        CAPTURE(text);
        CHECK(lossjit::parse_shape(text) == c.second);
    }
}

TEST_CASE("parse_shape rejects") {
    const char* cases[] = {
        "",        "x",          "2x",        "x2",         "2xx3",
        "-1",      "2x-3",       "1.5",       "abc",        "2X3",
        "2 x 3",   "+4",         "2,3",       "(2, 3)",     "Scalar",
        "1099511627777",                        // one past 2^40
        "99999999999999999999999",              // overflows 64 bits
        "1x1x1x1x1x1x1x1x1",                    // 9 dimensions
        "1099511627776x1099511627776",          // 2^80 elements
    };
    for (const char* text : cases) {
        CAPTURE(std::string(text));
        const std::string message = usage_error_of([&] { lossjit::parse_shape(text); });
        CHECK(contains(message, "'" + std::string(text) + "'"));
    }
}

TEST_CASE("parse_generator accepts") {
    struct Case {
        const char* text;
        Shape shape;
        const char* kind;
        std::vector<double> args;
    };
    const Case cases[] = {
        {"32768x32768:uniform", {32768, 32768}, "uniform", {0, 1}},
        {"100:uniform[-1,1]", {100}, "uniform", {-1, 1}},
        {"100:uniform[ -1.5 , +2e1 ]", {100}, "uniform", {-1.5, 20}},
        {"4x5:normal", {4, 5}, "normal", {0, 1}},
        {"4x5:normal[0,2]", {4, 5}, "normal", {0, 2}},
        {"4x5:normal[3,0]", {4, 5}, "normal", {3, 0}},
        {"32768:sign", {32768}, "sign", {}},
        {"16x16:softmax", {16, 16}, "softmax", {}},
        {"3:const[0.5]", {3}, "const", {0.5}},
        {"scalar:const[-2]", {}, "const", {-2}},
        {"10:range", {10}, "range", {}},
        {"0x4:uniform", {0, 4}, "uniform", {0, 1}},
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.text));
        const lossjit::GeneratorSpec spec = lossjit::parse_generator(c.text);
        CHECK(spec.shape == c.shape);
        CHECK(spec.kind == c.kind);
        CHECK(spec.args == c.args);
    }
}

TEST_CASE("parse_generator rejects") {
    struct Case {
        const char* text;
        const char* mentions;  // part of the message that says what is wrong
    };
    const Case cases[] = {
        {"uniform", "valid kinds"},
        {"4:", "valid kinds"},
        {"4:bogus", "valid kinds"},
        {"4:Uniform", "valid kinds"},
        {"4:uniform[1]", "valid kinds"},
        {"4:uniform[0,1,2]", "valid kinds"},
        {"4:uniform[1,1]", "lo < hi"},
        {"4:uniform[2,1]", "lo < hi"},
        {"4:uniform[1.00000001,1.00000002]", "no float32"},
        {"4:normal[0,-1]", "std >= 0"},
        {"4:normal[1]", "valid kinds"},
        {"4:const", "valid kinds"},
        {"4:const[]", "valid kinds"},
        {"4:const[1,2]", "valid kinds"},
        {"4:const[nan]", "finite"},
        {"4:const[inf]", "finite"},
        {"4:const[1e39]", "finite"},
        {"4:sign[1]", "valid kinds"},
        {"4:range[0]", "valid kinds"},
        {"scalar:softmax", "rank >= 1"},
        {"4:uniform[a,b]", "'a'"},
        {"4:uniform[0,1", "']'"},
        {"4:uniform[0,,1]", "not a finite number"},
        {"4:uniform[[0,1]]", "brackets"},
        {"x:uniform", "invalid shape"},
        {"2x-3:uniform", "invalid shape"},
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.text));
        const std::string message = usage_error_of([&] { lossjit::parse_generator(c.text); });
        CAPTURE(message);
        CHECK(contains(message, "'" + std::string(c.text) + "'"));
        CHECK(contains(message, c.mentions));
    }
}

TEST_CASE("generate validates hand-built specs") {
    CHECK(gen("3:uniform").numel() == 3);
    const lossjit::GeneratorSpec defaults{{3}, "uniform", {}};
    CHECK(same_bits(vals(lossjit::generate(defaults, 1)), vals(gen("3:uniform"))));
    CHECK_THROWS_AS(lossjit::generate({{3}, "nope", {}}, 1), UsageError);
    CHECK_THROWS_AS(lossjit::generate({{3}, "uniform", {1, 0}}, 1), UsageError);
    CHECK_THROWS_AS(lossjit::generate({{}, "softmax", {}}, 1), UsageError);
    CHECK_THROWS_AS(lossjit::generate({{-1}, "range", {}}, 1), UsageError);
}

TEST_CASE("generators are deterministic") {
    const char* specs[] = {"1000:uniform", "1000:normal[1,2]", "1000:sign", "10x100:softmax"};
    for (const char* text : specs) {
        CAPTURE(std::string(text));
        CHECK(same_bits(vals(gen(text, 42)), vals(gen(text, 42))));
        CHECK(!same_bits(vals(gen(text, 42)), vals(gen(text, 43))));
    }

    CHECK(lossjit::seed_for(7, "logits") == lossjit::seed_for(7, "logits"));
    CHECK(lossjit::seed_for(7, "logits") != lossjit::seed_for(7, "target"));
    CHECK(lossjit::seed_for(7, "logits") != lossjit::seed_for(8, "logits"));
    CHECK(lossjit::seed_for(0, "") != lossjit::seed_for(0, "a"));
    CHECK(!same_bits(vals(gen("1000:uniform", lossjit::seed_for(1, "p"))),
                     vals(gen("1000:uniform", lossjit::seed_for(1, "q")))));
}

TEST_CASE("element values do not depend on tensor size or thread count") {
    // The large tensors are filled by several threads, the small ones by one; element i must be
    // the same either way.
    const std::pair<const char*, const char*> cases[] = {
        {"3000000:uniform[-1,1]", "1000:uniform[-1,1]"},
        {"3000000:normal", "1000:normal"},
        {"3000000:sign", "1000:sign"},
        {"3000000:range", "1000:range"},
        {"3000x1000:softmax", "1x1000:softmax"},
    };
    for (const auto& c : cases) {
        const std::string big_text = c.first;
        CAPTURE(big_text);
        const auto big = gen(big_text, 9);
        const auto small = gen(c.second, 9);
        REQUIRE(big.bytes.size() >= small.bytes.size());
        CHECK(std::memcmp(big.bytes.data(), small.bytes.data(), small.bytes.size()) == 0);
    }
    // The last thread's range ends exactly at the end of the tensor.
    const auto big = gen("3000000:range");
    CHECK(big.floats().back() == 2999999.0f);
}

TEST_CASE("generated values") {
    SUBCASE("uniform stays in [lo, hi)") {
        const std::pair<double, double> ranges[] = {{0, 1}, {-1, 1}, {-3, 0.1}, {1, 1.0000001}, {5, 6}};
        for (const auto& range : ranges) {
            const double lo = range.first;
            const double hi = range.second;
            CAPTURE(lo);
            CAPTURE(hi);
            const auto t = lossjit::generate({{100000}, "uniform", {lo, hi}}, 3);
            const auto f = t.floats();
            const auto [min, max] = std::minmax_element(f.begin(), f.end());
            CHECK(*min >= lo);
            CHECK(*max < hi);
        }
        const auto t = gen("100000:uniform");
        double sum = 0;
        for (float v : t.floats()) sum += v;
        CHECK(sum / 100000 == doctest::Approx(0.5).epsilon(0.01));
        // Only 1.0f lies in [1, 1.0000001).
        const auto narrow = gen("1000:uniform[1,1.0000001]");
        CHECK(std::ranges::all_of(narrow.floats(), [](float v) { return v == 1.0f; }));
    }

    SUBCASE("normal has the requested moments") {
        const auto t = gen("200000:normal[3,2]");
        double sum = 0, sq = 0;
        for (float v : t.floats()) {
            REQUIRE(std::isfinite(v));
            sum += v;
            sq += static_cast<double>(v) * v;
        }
        const double mean = sum / 200000;
        const double stddev = std::sqrt(sq / 200000 - mean * mean);
        CHECK(mean == doctest::Approx(3).epsilon(0.01));
        CHECK(stddev == doctest::Approx(2).epsilon(0.01));
        const auto flat = gen("100:normal[3,0]");
        CHECK(std::ranges::all_of(flat.floats(), [](float v) { return v == 3.0f; }));
    }

    SUBCASE("sign is exactly +-1 and both appear") {
        const auto t = gen("10000:sign");
        std::int64_t plus = 0, minus = 0;
        for (float v : t.floats()) {
            REQUIRE((v == 1.0f || v == -1.0f));
            (v > 0 ? plus : minus) += 1;
        }
        CHECK(plus > 4500);
        CHECK(minus > 4500);
    }

    SUBCASE("softmax rows sum to 1") {
        const char* specs[] = {"16x16:softmax", "7:softmax", "3x4x50:softmax", "5x1:softmax",
                               "2x3000:softmax"};
        for (const char* text : specs) {
            CAPTURE(std::string(text));
            const auto t = gen(text);
            const auto values = t.floats();
            const auto row = static_cast<std::size_t>(t.shape.back());
            for (std::size_t start = 0; start < values.size(); start += row) {
                double sum = 0;
                for (std::size_t j = 0; j < row; ++j) {
                    REQUIRE(values[start + j] > 0.0f);
                    REQUIRE(values[start + j] <= 1.0f);
                    sum += values[start + j];
                }
                CHECK(std::fabs(sum - 1.0) < 1e-5);
            }
        }
        CHECK(gen("4x0:softmax").bytes.empty());
        CHECK(gen("0x4:softmax").bytes.empty());
    }

    SUBCASE("const and range") {
        const auto c = gen("3:const[0.5]");
        CHECK(vals(c) == std::vector<float>{0.5f, 0.5f, 0.5f});
        const auto s = gen("scalar:const[2]");
        CHECK(s.shape.empty());
        CHECK(vals(s) == std::vector<float>{2.0f});
        const auto r = gen("2x5:range");
        CHECK(vals(r) == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
        CHECK(gen("0:range").bytes.empty());
    }
}

TEST_CASE("npy round trip") {
    TempDir dir;
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3.4028235e38f,
                              -1.5f, std::bit_cast<float>(0x7FC12345u)};
    const lossjit::HostTensor tensors[] = {
        lossjit::HostTensor::from_floats({}, {42.5f}),
        lossjit::HostTensor::from_floats({9}, std::vector<float>(std::begin(specials), std::end(specials))),
        lossjit::HostTensor::from_floats({0}, {}),
        lossjit::HostTensor::from_floats({2, 0, 3}, {}),
        gen("2x3x4:normal"),
        gen("1000x37:uniform"),
    };
    int k = 0;
    for (const auto& t : tensors) {
        CAPTURE(lossjit::format_shape(t.shape));
        const std::string path = dir.file("t" + std::to_string(k++) + ".npy");
        lossjit::save_npy(path, t);

        const std::string bytes = read_file(path);
        REQUIRE(bytes.size() >= 10);
        CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
        const std::size_t header = static_cast<unsigned char>(bytes[8]) |
                                   static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
        CHECK((10 + header) % 64 == 0);
        CHECK(bytes[10 + header - 1] == '\n');
        CHECK(bytes.size() == 10 + header + t.bytes.size());
        CHECK(bytes.substr(10 + header) == float_bytes(vals(t)));

        const auto back = lossjit::load_npy(path);
        CHECK(back.shape == t.shape);
        CHECK(back.dtype == lossjit::DType::float32);
        CHECK(same_bits(vals(back), vals(t)));

        // Writing what was read reproduces the file byte for byte.
        const std::string again = dir.file("again.npy");
        lossjit::save_npy(again, back);
        CHECK(read_file(again) == bytes);
    }
    // The header spells the shape the way numpy does.
    CHECK(contains(read_file(dir.file("t0.npy")), "'shape': (), }"));
    CHECK(contains(read_file(dir.file("t1.npy")), "'shape': (9,), }"));
    CHECK(contains(read_file(dir.file("t4.npy")), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"));

    // Overwriting works and leaves no temporary files behind.
    lossjit::save_npy(dir.file("t0.npy"), lossjit::HostTensor::from_floats({2}, {1.0f, 2.0f}));
    CHECK(vals(lossjit::load_npy(dir.file("t0.npy"))) == std::vector<float>{1.0f, 2.0f});
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        CHECK(!contains(entry.path().filename().string(), ".tmp"));
    }

    // A tensor whose bytes do not match its shape (its fields are public) is refused, naming both.
    lossjit::HostTensor torn = lossjit::HostTensor::from_floats({1}, {1.0f});
    torn.shape = {3};
    CHECK(contains(usage_error_of([&] { lossjit::save_npy(dir.file("bad.npy"), torn); }),
                   "shape 3 has 3 elements but the tensor holds 4 bytes of float32"));
    CHECK_THROWS_AS(lossjit::save_npy(dir.file("missing/dir/x.npy"), lossjit::HostTensor::from_floats({1}, {1.0f})),
                    UsageError);
}

TEST_CASE("npy round trip of every dtype: the descr numpy writes, the bytes as they were") {
    TempDir dir;
    using lossjit::DType;
    // Values each dtype holds exactly (and for the floats, its extremes and specials).
    const struct {
        DType dtype;
        const char* descr;
        std::vector<double> values;
    } table[] = {
        {DType::float32, "<f4", {0.0, -0.0, 1.5, -3.4028234663852886e38, 0x1p-149, INFINITY, NAN}},
        {DType::float64, "<f8", {0.0, -0.0, 0.1, -1.7976931348623157e308, 0x1p-1074, INFINITY, NAN}},
        {DType::float16, "<f2", {0.0, -0.0, 1.5, 65504.0, -0x1p-24, 0x1p-14, INFINITY, NAN}},
        {DType::bfloat16, "<V2", {0.0, -0.0, 1.5, 3.3895313892515355e38, -0x1p-133, 0x1p-126, -INFINITY, NAN}},
        {DType::int32, "<i4", {0, -1, 2147483647, -2147483648.0, 12345}},
        {DType::int64, "<i8", {0, -1, 0x1p62, -0x1p63, 9007199254740991.0}},
        {DType::uint8, "|u1", {0, 1, 127, 128, 255}},
        {DType::boolean, "|b1", {0, 1, 1, 0}},
    };
    for (const auto& row : table) {
        const std::string name(lossjit::to_string(row.dtype));
        CAPTURE(name);
        lossjit::HostTensor t({static_cast<std::int64_t>(row.values.size())}, row.dtype);
        REQUIRE(t.bytes.size() == row.values.size() * lossjit::size_of(row.dtype));
        for (std::size_t i = 0; i < row.values.size(); ++i) t.set(static_cast<std::int64_t>(i), row.values[i]);
        for (std::size_t i = 0; i < row.values.size(); ++i) {
            const double v = t.at(static_cast<std::int64_t>(i));
            CAPTURE(i);
            if (std::isnan(row.values[i])) CHECK(std::isnan(v));
            else CHECK(std::bit_cast<std::uint64_t>(v) == std::bit_cast<std::uint64_t>(row.values[i]));  // -0 too
        }

        const std::string path = dir.file(name + ".npy");
        lossjit::save_npy(path, t);
        const std::string bytes = read_file(path);
        CHECK(contains(bytes, "{'descr': '" + std::string(row.descr) + "', 'fortran_order': False, 'shape': (" +
                                  std::to_string(row.values.size()) + ",), }"));
        CHECK(bytes.size() % 64 == t.bytes.size() % 64);  // the data starts at a multiple of 64
        CHECK(bytes.substr(bytes.size() - t.bytes.size()) ==
              std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));

        const auto back = lossjit::load_npy(path);
        CHECK(back.dtype == row.dtype);
        CHECK(back.shape == t.shape);
        CHECK(back.bytes == t.bytes);
        lossjit::save_npy(dir.file("again.npy"), back);
        CHECK(read_file(dir.file("again.npy")) == bytes);

        // Rank 0 and empty arrays of every dtype too.
        for (const lossjit::Shape& shape : {lossjit::Shape{}, lossjit::Shape{0, 3}}) {
            lossjit::HostTensor small(shape, row.dtype);
            if (small.numel() == 1) small.set(0, 1);
            lossjit::save_npy(path, small);
            const auto read = lossjit::load_npy(path);
            CHECK(read.dtype == row.dtype);
            CHECK(read.shape == shape);
            CHECK(read.bytes == small.bytes);
        }
    }
}

TEST_CASE("npy reader accepts files numpy writes") {
    TempDir dir;
    const std::vector<float> six = {1, 2, 3, 4, 5, 6};
    struct Case {
        const char* name;
        std::string bytes;
        Shape shape;
        std::vector<float> values;
    };
    const std::string dict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    const Case cases[] = {
        {"v1", npy_bytes(dict23, float_bytes(six)), {2, 3}, six},
        {"v2", npy_bytes(dict23, float_bytes(six), 2), {2, 3}, six},
        {"v3", npy_bytes(dict23, float_bytes(six), 3), {2, 3}, six},
        {"old-16-byte-alignment", npy_bytes(dict23, float_bytes(six), 1, 16), {2, 3}, six},
        {"rank0", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                            float_bytes({7})), {}, {7}},
        {"rank1", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
                            float_bytes(six)), {6}, six},
        {"empty", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", ""),
         {0, 5}, {}},
        {"key-order-and-spacing",
         npy_bytes("{\"shape\":(3,2),\"fortran_order\":False,\"descr\":\"<f4\"}", float_bytes(six)),
         {3, 2}, six},
        {"python2-longs",
         npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", float_bytes(six)),
         {2, 3}, six},
        {"trailing-bytes", npy_bytes(dict23, float_bytes(six) + "junk"), {2, 3}, six},
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.name));
        const std::string path = dir.file(std::string(c.name) + ".npy");
        write_file(path, c.bytes);
        const auto t = lossjit::load_npy(path);
        CHECK(t.shape == c.shape);
        CHECK(vals(t) == c.values);
    }
}

TEST_CASE("npy reader: every dtype from bytes made by hand, bfloat16 as ml_dtypes saves it") {
    TempDir dir;
    using lossjit::DType;
    auto dict = [](const std::string& descr, const std::string& shape) {
        return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    };
    // Little-endian bytes written out, so the reader is checked against the format, not our writer.
    const struct {
        const char* name;
        std::string descr;
        std::string data;
        DType dtype;
        std::vector<double> expected;
    } table[] = {
        // ml_dtypes.bfloat16: np.save writes descr '<V2'; 1.0 = 0x3f80, -2.0 = 0xc000, 0.5 = 0x3f00,
        // 1/3 rounded = 0x3eab, -inf = 0xff80.
        {"bf16-ml-dtypes", "<V2", std::string("\x80\x3f\x00\xc0\x00\x3f\xab\x3e\x80\xff", 10), DType::bfloat16,
         {1.0, -2.0, 0.5, 0.333984375, -INFINITY}},
        {"bf16-plain-void", "|V2", std::string("\x80\x3f\x00\xc0", 4), DType::bfloat16, {1.0, -2.0}},
        {"bf16-by-name", "bfloat16", std::string("\x80\x3f\x00\xc0", 4), DType::bfloat16, {1.0, -2.0}},
        // float16: 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, 2^-24 = 0x0001.
        {"f16", "<f2", std::string("\x00\x3c\x00\xc0\xff\x7b\x01\x00", 8), DType::float16,
         {1.0, -2.0, 65504.0, 0x1p-24}},
        {"f8", "<f8", std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8), DType::float64, {1.0}},
        {"i4", "<i4", std::string("\xff\xff\xff\xff\x02\x00\x00\x00", 8), DType::int32, {-1, 2}},
        {"i8", "<i8", std::string("\x00\x00\x00\x00\x00\x00\x00\x80\x07\x00\x00\x00\x00\x00\x00\x00", 16),
         DType::int64, {-0x1p63, 7}},
        {"u1", "|u1", std::string("\x00\x7f\xff", 3), DType::uint8, {0, 127, 255}},
        // numpy takes any nonzero byte for True; the reader stores it as 1.
        {"b1", "|b1", std::string("\x00\x01\x02\xff", 4), DType::boolean, {0, 1, 1, 1}},
    };
    for (const auto& row : table) {
        CAPTURE(std::string(row.name));
        const std::string path = dir.file(std::string(row.name) + ".npy");
        const std::string shape = "(" + std::to_string(row.expected.size()) + ",)";
        write_file(path, npy_bytes(dict(row.descr, shape), row.data));
        const auto t = lossjit::load_npy(path);
        CHECK(t.dtype == row.dtype);
        CHECK(t.shape == Shape{static_cast<std::int64_t>(row.expected.size())});
        for (std::size_t i = 0; i < row.expected.size(); ++i) CHECK(t.at(static_cast<std::int64_t>(i)) == row.expected[i]);
    }
    const auto mask = lossjit::load_npy(dir.file("b1.npy"));
    CHECK(mask.bytes == std::vector<unsigned char>{0, 1, 1, 1});
    // What the writer makes of a bfloat16 tensor is what ml_dtypes writes: np.load(f) gives a '<V2'
    // array, and .view(ml_dtypes.bfloat16) the values.
    lossjit::save_npy(dir.file("bf16-again.npy"), lossjit::load_npy(dir.file("bf16-ml-dtypes.npy")));
    CHECK(read_file(dir.file("bf16-again.npy")) ==
          npy_bytes(dict("<V2", "(5,)"), std::string("\x80\x3f\x00\xc0\x00\x3f\xab\x3e\x80\xff", 10)));
}

TEST_CASE("npy reader errors") {
    TempDir dir;
    const std::vector<float> six = {1, 2, 3, 4, 5, 6};
    const std::string good = npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", float_bytes(six));
    const std::string f8_data(6 * 8, '\0');
    struct Case {
        const char* name;
        std::string bytes;
        const char* mentions;
    };
    const Case cases[] = {
        {"complex64", npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", f8_data),
         "dtype '<c8' is not supported; lossjit reads '<f4' (float32), '<f8' (float64), '<f2' (float16), "
         "'<V2' (bfloat16), '<i4' (int32), '<i8' (int64), '|u1' (uint8), '|b1' (bool)"},
        {"unicode", npy_bytes("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", std::string(24, 'a')),
         "dtype '<U3' is not supported"},
        {"object", npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (6,), }", f8_data),
         "dtype '|O' is not supported"},
        {"int8", npy_bytes("{'descr': '|i1', 'fortran_order': False, 'shape': (6,), }", "abcdef"),
         "dtype '|i1' is not supported; lossjit reads"},
        {"int16", npy_bytes("{'descr': '<i2', 'fortran_order': False, 'shape': (6,), }", std::string(12, 'a')),
         "(convert with .astype(np.int32) or np.int64, or np.uint8 for bytes)"},
        {"uint8-with-byte-order", npy_bytes("{'descr': '<u1', 'fortran_order': False, 'shape': (6,), }", "abcdef"),
         "dtype '<u1' is not supported"},
        {"longdouble", npy_bytes("{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", std::string(16, 'a')),
         "(convert with .astype(np.float32) or np.float64)"},
        {"void4", npy_bytes("{'descr': '|V4', 'fortran_order': False, 'shape': (6,), }", float_bytes(six)),
         "a 2-byte void, '<V2', is read as bfloat16"},
        {"big-endian", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                                 float_bytes(six)),
         "dtype '>f4' is big-endian; lossjit reads little-endian data only (convert with .astype('<f4'))"},
        {"big-endian-f2", npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (3,), }", "abcdef"),
         "(convert with .astype('<f2'))"},
        {"big-endian-i8", npy_bytes("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", "abcdefgh"),
         "(convert with .astype('<i8'))"},
        {"big-endian-bf16", npy_bytes("{'descr': '>V2', 'fortran_order': False, 'shape': (3,), }", "abcdef"),
         "dtype '>V2' is big-endian; lossjit reads little-endian data only"},
        {"structured", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }",
                                 float_bytes(six)), "structured"},
        {"fortran", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                              float_bytes(six)), "Fortran"},
        {"fortran-int64", npy_bytes("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }", f8_data),
         "array is stored in Fortran order; lossjit reads C-ordered arrays only"},
        {"truncated-int64", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }",
                                      f8_data.substr(1)),
         "truncated .npy file (shape 2x3 of int64 needs 48 data bytes but only 47 are present)"},
        {"truncated-data", good.substr(0, good.size() - 1), "truncated"},
        {"truncated-header", good.substr(0, 40), "truncated"},
        {"truncated-length", good.substr(0, 9), "truncated"},
        {"empty-file", "", "magic"},
        {"bad-magic", "\x93NUMPZ" + good.substr(6), "magic"},
        {"text-file", "hello, world\n", "magic"},
        {"version-4", "\x93NUMPY\x04" + good.substr(7), "version 4.0"},
        {"version-1.1", "\x93NUMPY\x01\x01" + good.substr(8), "version 1.1"},
        {"not-a-dict", npy_bytes("['<f4', False, (2, 3)]", float_bytes(six)), "malformed"},
        {"missing-shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", float_bytes(six)),
         "missing key 'shape'"},
        {"extra-key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}",
                                float_bytes(six)), "unexpected key 'x'"},
        {"negative-extent", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }",
                                      float_bytes(six)), "non-negative"},
        {"unterminated", npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (6,)",
                                   float_bytes(six)), "malformed"},
        {"huge-shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
                                 float_bytes(six)), "2^62"},
        {"shape-larger-than-file",
         npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1024), }",
                   float_bytes(six)), "truncated"},
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.name));
        const std::string path = dir.file(std::string(c.name) + ".npy");
        write_file(path, c.bytes);
        const std::string message = usage_error_of([&] { lossjit::load_npy(path); });
        CAPTURE(message);
        CHECK(contains(message, path + ": "));
        CHECK(contains(message, c.mentions));
    }

    const std::string missing = dir.file("does-not-exist.npy");
    CHECK(contains(usage_error_of([&] { lossjit::load_npy(missing); }), missing));
    CHECK(contains(usage_error_of([&] { lossjit::load_npy(dir.path().string()); }), "directory"));
}

TEST_CASE("HostTensor: set rounds, truncates or refuses as documented; at reads back") {
    using lossjit::DType;
    const double nan = NAN, inf = INFINITY;
    // (dtype, value stored, value read back); NaN expected: NaN read back.
    const struct {
        DType dtype;
        double value, expected;
    } stored[] = {
        // Floats round to nearest even; 16-bit types through float32, as a kernel's store does.
        {DType::float32, 0.1, static_cast<double>(0.1f)},
        {DType::float32, 1e300, inf},
        {DType::float32, nan, nan},
        {DType::float64, 0.1, 0.1},
        {DType::float16, 1.0 + 0x1p-11, 1.0},                   // a tie: to even
        {DType::float16, 1.0 + 3 * 0x1p-11, 1.0 + 0x1p-9},       // a tie: to even, upwards
        {DType::float16, 1.0 + 0x1p-11 + 0x1p-40, 1.0},         // float32 first: the tie it rounds to goes to even
        {DType::float16, 65519.0, 65504.0},
        {DType::float16, 65520.0, inf},
        {DType::bfloat16, 1.0 + 0x1p-8, 1.0},                   // a tie: to even
        {DType::bfloat16, 1.0 + 3 * 0x1p-8, 1.0 + 0x1p-6},
        {DType::bfloat16, -nan, nan},
        // Integers truncate toward zero, as torch's .to(int) does.
        {DType::int32, 2.7, 2},
        {DType::int32, -2.7, -2},
        {DType::int32, 2147483647.9, 2147483647},
        {DType::int32, -2147483648.9, -2147483648.0},
        {DType::int64, 0x1p62, 0x1p62},
        {DType::int64, -0x1p63, -0x1p63},
        {DType::int64, -0.5, 0},
        {DType::uint8, 255.9, 255},
        {DType::uint8, -0.9, 0},
        // Bools are v != 0; NaN is not 0.
        {DType::boolean, 0.0, 0},
        {DType::boolean, -0.0, 0},
        {DType::boolean, 0.1, 1},
        {DType::boolean, -3, 1},
        {DType::boolean, nan, 1},
    };
    for (const auto& row : stored) {
        CAPTURE(lossjit::to_string(row.dtype));
        CAPTURE(row.value);
        lossjit::HostTensor t({1}, row.dtype);
        CHECK(t.at(0) == 0.0);  // zero-filled
        t.set(0, row.value);
        if (std::isnan(row.expected)) CHECK(std::isnan(t.at(0)));
        else CHECK(t.at(0) == row.expected);
    }
    lossjit::HostTensor mask({1}, DType::boolean);
    mask.set(0, 7);
    CHECK(mask.bytes[0] == 1);  // a bool is stored as the byte 1

    // What an integer dtype cannot hold is refused, saying so.
    const struct {
        DType dtype;
        double value;
        const char* message;
    } refused[] = {
        {DType::int32, 2147483648.0, "2147483648 does not fit in int32 (its range is [-2147483648, 2147483647])"},
        {DType::int32, -2147483649.0, "does not fit in int32"},
        {DType::int64, 0x1p63, "does not fit in int64 (its range is [-9223372036854775808, 9223372036854775807])"},
        {DType::uint8, 256, "256 does not fit in uint8 (its range is [0, 255])"},
        {DType::uint8, -1, "-1 does not fit in uint8"},
        {DType::int32, nan, "nan does not fit in int32"},
        {DType::int64, inf, "inf does not fit in int64"},
        {DType::uint8, -inf, "-inf does not fit in uint8"},
    };
    for (const auto& row : refused) {
        CAPTURE(lossjit::to_string(row.dtype));
        CAPTURE(row.value);
        lossjit::HostTensor t({1}, row.dtype);
        CHECK(contains(usage_error_of([&] { t.set(0, row.value); }), row.message));
        CHECK(t.at(0) == 0.0);  // left as it was
    }

    // int64 beyond 2^53 reads back rounded, as a double must.
    lossjit::HostTensor big({1}, DType::int64);
    const std::int64_t odd = (std::int64_t{1} << 60) + 1;
    std::memcpy(big.bytes.data(), &odd, sizeof odd);
    CHECK(big.at(0) == 0x1p60);

    // Indices outside the tensor and floats() of another dtype are the caller's bug.
    lossjit::HostTensor three({3}, DType::int32);
    CHECK_THROWS_AS(three.at(3), lossjit::InternalError);
    CHECK_THROWS_AS(three.at(-1), lossjit::InternalError);
    CHECK_THROWS_AS(three.set(3, 0), lossjit::InternalError);
    CHECK_THROWS_AS(three.floats(), lossjit::InternalError);
    CHECK(contains(usage_error_of([] { lossjit::HostTensor::from_floats({2, 2}, {1, 2, 3}); }),
                   "shape 2x2 has 4 elements but 3 values were given"));
    CHECK(contains(usage_error_of([] { lossjit::HostTensor({std::int64_t{1} << 62}, DType::float64); }),
                   "a 4611686018427387904 float64 tensor does not fit in memory"));

    // The view carries the dtype; converted() goes element by element through at() and set().
    const auto f = lossjit::HostTensor::from_floats({2, 2}, {1.5f, -2.5f, 300.0f, 0.0f});
    CHECK(f.view().dtype == DType::float32);
    const auto i = f.converted(DType::int32);
    CHECK(i.view().dtype == DType::int32);
    CHECK(i.shape == f.shape);
    CHECK(i.at(0) == 1);
    CHECK(i.at(1) == -2);
    CHECK(i.at(2) == 300);
    CHECK(f.converted(DType::boolean).bytes == std::vector<unsigned char>{1, 1, 1, 0});
    CHECK(f.converted(DType::bfloat16).converted(DType::float32).bytes == f.bytes);  // all four are bfloat16 values
    CHECK(f.converted(DType::float32).bytes == f.bytes);
    CHECK(contains(usage_error_of([&] { (void)f.converted(DType::uint8); }),
                   "cannot convert a 2x2 float32 tensor to uint8: element 1: -2.5 does not fit in uint8"));
}

// The float16 conversions against the compiler's own _Float16 (GCC 12 and clang 15 on x86-64 have
// it), which rounds to nearest even in IEEE arithmetic.
TEST_CASE("float16 conversions agree with _Float16: every half, and floats at every rounding boundary") {
#ifndef __FLT16_MAX__
    MESSAGE("skipped: this compiler has no _Float16");
#else
    auto half_bits = [](_Float16 h) { return std::bit_cast<std::uint16_t>(h); };
    auto is_nan_half = [](std::uint16_t b) { return (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0; };

    // Every one of the 65536 halves to float: exact, signs of zeros kept; NaNs stay NaN of that sign
    // (the compiler may quiet a signalling NaN, so payloads are not compared).
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const float mine = lossjit::float16_to_float(bits);
        const float theirs = static_cast<float>(std::bit_cast<_Float16>(bits));
        if (is_nan_half(bits)) {
            REQUIRE(std::isnan(mine));
            REQUIRE(std::signbit(mine) == std::signbit(theirs));
        } else {
            REQUIRE(std::bit_cast<std::uint32_t>(mine) == std::bit_cast<std::uint32_t>(theirs));
        }
    }

    std::int64_t checked = 0;
    auto check = [&](float x) {
        const std::uint16_t mine = lossjit::float_to_float16(x);
        const std::uint16_t theirs = half_bits(static_cast<_Float16>(x));
        ++checked;
        if (std::isnan(x)) {
            REQUIRE(is_nan_half(mine));
            REQUIRE((mine >> 15) == (std::bit_cast<std::uint32_t>(x) >> 31));
        } else if (mine != theirs) {
            FAIL("float " << x << " (bits " << std::hex << std::bit_cast<std::uint32_t>(x) << "): float_to_float16 gives "
                          << mine << ", _Float16 " << theirs);
        }
    };
    // Around every half: the half itself, the midpoint to the next one up (a tie), and the floats
    // just either side of each. Midpoints of subnormals, the normal/subnormal seam, 65504..65520 (the
    // overflow boundary) and the zeros are all among them.
    for (std::uint32_t b = 0; b < 0x7c00; ++b) {
        for (const float sign : {1.0f, -1.0f}) {
            const float h = sign * lossjit::float16_to_float(static_cast<std::uint16_t>(b));
            const float next = b + 1 < 0x7c00 ? sign * lossjit::float16_to_float(static_cast<std::uint16_t>(b + 1))
                                              : sign * 65536.0f;  // the next step past 65504: inf's stand-in
            const float mid = (h + next) / 2;  // exact: a float has 13 more bits than a half
            for (const float x : {h, std::nextafter(h, -INFINITY), std::nextafter(h, INFINITY), mid,
                                  std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)})
                check(x);
        }
    }
    // A sweep of the whole float line, every 4099th bit pattern (NaNs, infinities, float
    // subnormals and the values far beyond the half range included).
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 4099)
        check(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
    for (const float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.996f, 65520.0f, -65520.0f,
                          0x1p-25f, 0x1.000002p-25f, 0x1p-26f, 0x1.8p-24f, 0x1.4p-24f, 3.4028235e38f, 1e-45f})
        check(x);
    CHECK(checked > 1000000);
    CHECK(lossjit::float_to_float16(65520.0f) == 0x7c00);   // the overflow tie goes to inf
    CHECK(lossjit::float_to_float16(65519.996f) == 0x7bff);
    CHECK(lossjit::float_to_float16(0x1p-25f) == 0x0000);  // half the smallest subnormal: a tie, to even (0)
    CHECK(lossjit::float_to_float16(0x1.8p-24f) == 0x0002);  // 1.5 subnormal steps: a tie, to even (2)
#endif
}

TEST_CASE("bfloat16: round to nearest even, ties, overflow, NaN kept NaN") {
    const struct {
        std::uint32_t in;
        std::uint16_t out;
    } table[] = {
        {0x3f800000, 0x3f80},  // 1
        {0x3f808000, 0x3f80},  // a tie below an even: down
        {0x3f818000, 0x3f82},  // a tie above an odd: up
        {0x3f808001, 0x3f81},  // just above a tie
        {0x3f807fff, 0x3f80},  // just below
        {0xbf818000, 0xbf82},  // the same for negatives
        {0x7f7f7fff, 0x7f7f},  // the largest bfloat16 stays
        {0x7f7f8000, 0x7f80},  // its tie with the next (odd): up, to inf
        {0x7f7fffff, 0x7f80},  // FLT_MAX rounds to inf
        {0x7f800000, 0x7f80},  // inf
        {0xff800000, 0xff80},  // -inf
        {0x00000000, 0x0000},
        {0x80000000, 0x8000},  // -0
        {0x00008000, 0x0000},  // a subnormal tie: to even (0)
        {0x00018000, 0x0002},  // to even (2)
        {0x00000001, 0x0000},
    };
    for (const auto& row : table) {
        CAPTURE(row.in);
        CHECK(lossjit::float_to_bfloat16(std::bit_cast<float>(row.in)) == row.out);
    }
    // NaNs of either sign, quiet or signalling (whose top 7 mantissa bits may all be 0), stay NaN.
    for (const std::uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu}) {
        CAPTURE(nan);
        const std::uint16_t b = lossjit::float_to_bfloat16(std::bit_cast<float>(nan));
        CHECK(std::isnan(lossjit::bfloat16_to_float(b)));
        CHECK((b >> 15) == (nan >> 31));
    }
    // Against a second way to round: of the two bfloat16 values around x (truncation and the next),
    // the nearer in exact double arithmetic, the even one on a tie. Every 257th float.
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 257) {
        const float x = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
        if (std::isnan(x) || std::isinf(x)) continue;
        const auto down = static_cast<std::uint16_t>(bits >> 16);
        const auto up = static_cast<std::uint16_t>(down + 1);  // away from zero; 0x7f80/0xff80 are the infinities
        const double dx = std::fabs(static_cast<double>(x));
        const double d_down = dx - std::fabs(static_cast<double>(lossjit::bfloat16_to_float(down)));
        const double d_up = std::fabs(static_cast<double>(lossjit::bfloat16_to_float(up))) - dx;
        // Past the largest bfloat16 the next value up is inf, which IEEE rounding (decided as if the
        // exponent had no bound) treats as 2^128.
        const double up_distance = std::isinf(lossjit::bfloat16_to_float(up)) ? 0x1p128 - dx : d_up;
        const std::uint16_t expected =
            d_down < up_distance ? down : d_down > up_distance ? up : (down & 1) == 0 ? down : up;
        if (lossjit::float_to_bfloat16(x) != expected) {
            FAIL("bits " << std::hex << bits << ": " << lossjit::float_to_bfloat16(x) << " != " << expected);
        }
    }
    // bfloat16 to float is exact: the 16 bits on top.
    CHECK(lossjit::bfloat16_to_float(0x3f80) == 1.0f);
    CHECK(std::bit_cast<std::uint32_t>(lossjit::bfloat16_to_float(0x8001)) == 0x80010000u);
}

TEST_CASE("generator dtype suffixes: parsed, and refused where the values could not be") {
    using lossjit::DType;
    const struct {
        const char* text;
        const char* kind;
        std::vector<double> args;
        DType dtype;
    } accepted[] = {
        {"32768x32768:normal:bf16", "normal", {0, 1}, DType::bfloat16},
        {"4:normal[0,2]:bfloat16", "normal", {0, 2}, DType::bfloat16},
        {"4:uniform:f16", "uniform", {0, 1}, DType::float16},
        {"4:uniform[-1,1]:float64", "uniform", {-1, 1}, DType::float64},
        {"4:uniform:f32", "uniform", {0, 1}, DType::float32},
        {"4096:integers[0,1000]:i64", "integers", {0, 1000}, DType::int64},
        {"4096:integers[-5,5]:int32", "integers", {-5, 5}, DType::int32},
        {"4:integers[0,256]:u8", "integers", {0, 256}, DType::uint8},
        {"4:integers[0,2]:bool", "integers", {0, 2}, DType::boolean},
        {"4:integers[0,2]:b1", "integers", {0, 2}, DType::boolean},
        {"4:integers[0,10]", "integers", {0, 10}, DType::float32},
        {"4:integers[-2048,2049]:f16", "integers", {-2048, 2049}, DType::float16},
        {"4:sign:i32", "sign", {}, DType::int32},
        {"4:const[7]:i64", "const", {7}, DType::int64},
        {"4:const[255]:u8", "const", {255}, DType::uint8},
        {"4:const[1]:bool", "const", {1}, DType::boolean},
        {"4:const[0.1]:bf16", "const", {0.1}, DType::bfloat16},
        {"4:range:i64", "range", {}, DType::int64},
        {"256:range:u8", "range", {}, DType::uint8},
        {"2:range:bool", "range", {}, DType::boolean},
        {"65520:range:f16", "range", {}, DType::float16},  // the last, 65519, rounds to 65504
        {"4x4:softmax:f16", "softmax", {}, DType::float16},
        {" 4:normal : bf16 ", "normal", {0, 1}, DType::bfloat16},
    };
    for (const auto& row : accepted) {
        CAPTURE(std::string(row.text));
        const auto spec = lossjit::parse_generator(row.text);
        CHECK(spec.kind == row.kind);
        CHECK(spec.args == row.args);
        CHECK(spec.dtype == row.dtype);
        if (lossjit::element_count(spec.shape) <= 65536) CHECK(lossjit::generate(spec, 1).dtype == row.dtype);
    }

    const struct {
        const char* text;
        const char* mentions;
    } rejected[] = {
        {"4:normal:i64", "'normal' draws real numbers, which int64 does not hold; use a floating dtype (f32, f64, bf16, "
                         "f16), or integers[lo,hi] for int64 values"},
        {"4:uniform:bool", "'uniform' draws real numbers"},
        {"4:softmax:u8", "'softmax' draws real numbers"},
        {"4:normal:bogus", "unknown dtype 'bogus'; valid dtypes: f32 (float32), f64 (float64), bf16 (bfloat16), "
                           "f16 (float16), i32 (int32), i64 (int64), u8 (uint8), b1 (bool)"},
        {"4:normal:", "the dtype after ':' is missing"},
        {"4:normal:bf16:f32", "unknown dtype 'bf16:f32'"},
        {"4:bf16", "unknown kind 'bf16' ('bf16' is a dtype: it goes after the kind, as in 4096:normal:bf16)"},
        {"4:sign:u8", "sign makes -1 and +1, which uint8 does not hold (uint8 holds each integer in [0, 255])"},
        {"4:sign:bool", "which bool does not hold (bool holds each integer in [0, 1])"},
        {"4:const[2.5]:i32", "const[2.5] is not exactly a value of int32"},
        {"4:const[256]:u8", "const[256] is not exactly a value of uint8 (uint8 holds each integer in [0, 255])"},
        {"4:const[-1]:u8", "const[-1] is not exactly a value of uint8"},
        {"4:const[2]:bool", "const[2] is not exactly a value of bool"},
        {"4:const[1e5]:f16", "argument [1e+05] of 'const' is not a finite float16 value"},
        {"4:const[1e39]:bf16", "argument [1e+39] of 'const' is not a finite bfloat16 value"},
        {"4:normal[0,1e4]:f16", "normal[0,10000] reaches 0 +- 6.76e+04, beyond the largest float16 value"},
        {"4:normal[0,1e38]", "beyond the largest float32 value"},
        {"4:uniform[1.001,1.002]:bf16", "uniform[1.001,1.002] contains no bfloat16 value"},
        {"257:range:u8", "range makes 0 to 256, beyond what uint8 holds (uint8 holds each integer in [0, 255])"},
        {"3:range:bool", "range makes 0 to 2, beyond what bool holds"},
        {"65521:range:f16", "range makes 0 to 65520, beyond the largest float16 value"},
        {"4:integers[0,1000]:u8", "integers[0,1000] makes 0 to 999, which uint8 does not hold exactly"},
        {"4:integers[0,3]:bool", "which bool does not hold exactly"},
        {"4:integers[0,5000]:f16",
         "integers[0,5000] makes 0 to 4999, which float16 does not hold exactly (float16 holds every integer in [-2048, "
         "2048])"},
        {"4:integers[0,16777218]", "which float32 does not hold exactly"},
        {"4:integers[0.5,3]", "integers[lo,hi] needs integer bounds of magnitude at most 2^53, got [0.5,3]"},
        {"4:integers[0,1e17]:i64", "integer bounds of magnitude at most 2^53"},
        {"4:integers[3,3]", "integers[lo,hi] needs lo < hi"},
        {"4:integers", "'integers' takes 2 arguments, got []"},
        {"4:integers[1]", "valid kinds"},
    };
    for (const auto& row : rejected) {
        CAPTURE(std::string(row.text));
        const std::string message = usage_error_of([&] { lossjit::parse_generator(row.text); });
        CAPTURE(message);
        CHECK(contains(message, "invalid generator '" + std::string(row.text) + "': "));
        CHECK(contains(message, row.mentions));
    }
    // A hand-built spec is checked alike, and its message shows the dtype.
    CHECK(contains(usage_error_of([] { lossjit::generate({{3}, "normal", {}, DType::int64}, 1); }),
                   "invalid generator 3:normal[]:int64: 'normal' draws real numbers"));
    CHECK(lossjit::generate({{3}, "integers", {0, 5}, DType::int64}, 1).dtype == DType::int64);
}

TEST_CASE("generated values in every dtype: the float32 draws, rounded into the dtype") {
    using lossjit::DType;
    // The same numbers as float32, rounded: normal:bf16 is bfloat16(normal), normal:f64 rounds to
    // normal, and so on for every kind that draws real numbers.
    // (Not uniform: it also clamps into [lo, hi) in the dtype's values, below.)
    for (const char* kind : {"normal[1,2]", "softmax", "const[0.1]", "sign", "range"}) {
        const std::string base = std::string("50x40:") + kind;
        CAPTURE(base);
        const auto f32 = gen(base, 5);
        const auto values = f32.floats();
        const auto f64 = gen(base + ":f64", 5), bf16 = gen(base + ":bf16", 5), f16 = gen(base + ":f16", 5);
        for (std::int64_t i = 0; i < f32.numel(); ++i) {
            const float v = values[static_cast<std::size_t>(i)];
            REQUIRE(static_cast<float>(f64.at(i)) == v);
            REQUIRE(bf16.at(i) == lossjit::bfloat16_to_float(lossjit::float_to_bfloat16(v)));
            REQUIRE(f16.at(i) == lossjit::float16_to_float(lossjit::float_to_float16(v)));
        }
    }
    // float64 draws are not float32's widened: they keep the double's bits.
    const auto f64 = gen("1000:normal:f64");
    bool any_finer = false;
    for (std::int64_t i = 0; i < f64.numel(); ++i) any_finer = any_finer || static_cast<float>(f64.at(i)) != f64.at(i);
    CHECK(any_finer);

    // uniform stays inside [lo, hi) in the dtype's own values: rounding alone would make some of
    // [0, 1) into 1 in bfloat16; they become the largest bfloat16 below 1 instead.
    const auto u = gen("100000:uniform:bf16");
    double top = 0;
    for (std::int64_t i = 0; i < u.numel(); ++i) top = std::max(top, u.at(i));
    CHECK(top == 1.0 - 0x1p-8);
    const auto narrow = gen("1000:uniform[1,1.001]:bf16");
    for (std::int64_t i = 0; i < narrow.numel(); ++i) REQUIRE(narrow.at(i) == 1.0);

    // integers: every value of [lo, hi) appears, nothing else.
    const struct {
        const char* text;
        double lo, hi;
    } ranges[] = {{"20000:integers[0,10]:i64", 0, 10},    {"20000:integers[-3,3]:i32", -3, 3},
                  {"20000:integers[0,256]:u8", 0, 256},   {"20000:integers[0,2]:bool", 0, 2},
                  {"20000:integers[-7,7]", -7, 7},        {"20000:integers[-2048,-2040]:f16", -2048, -2040},
                  {"20000:integers[100,101]:bf16", 100, 101}};
    for (const auto& row : ranges) {
        CAPTURE(std::string(row.text));
        const auto t = gen(row.text, 3);
        std::vector<int> seen(static_cast<std::size_t>(row.hi - row.lo), 0);
        for (std::int64_t i = 0; i < t.numel(); ++i) {
            const double v = t.at(i);
            REQUIRE(v >= row.lo);
            REQUIRE(v < row.hi);
            REQUIRE(v == std::trunc(v));
            ++seen[static_cast<std::size_t>(v - row.lo)];
        }
        CHECK(std::ranges::none_of(seen, [](int n) { return n == 0; }));
    }
    // Wide ranges reach their ends' neighbourhood and are roughly uniform.
    const auto wide = gen("100000:integers[-4000000000000,4000000000000]:i64", 4);
    double lowest = 0, highest = 0, sum = 0;
    for (std::int64_t i = 0; i < wide.numel(); ++i) {
        lowest = std::min(lowest, wide.at(i));
        highest = std::max(highest, wide.at(i));
        sum += wide.at(i);
    }
    CHECK(lowest < -3.9e12);
    CHECK(highest > 3.9e12);
    CHECK(std::fabs(sum / 100000) < 3e10);  // the mean's standard deviation is 7.3e9
    // A mask: bytes 0 and 1.
    const auto mask = gen("1000:integers[0,2]:bool");
    CHECK(std::ranges::all_of(mask.bytes, [](unsigned char b) { return b <= 1; }));

    // sign, const and range in integer dtypes.
    const auto s = gen("1000:sign:i64");
    for (std::int64_t i = 0; i < s.numel(); ++i) REQUIRE((s.at(i) == 1 || s.at(i) == -1));
    const auto c = gen("3:const[-7]:i32");
    CHECK(c.bytes.size() == 12);
    for (std::int64_t i = 0; i < 3; ++i) CHECK(c.at(i) == -7);
    const auto r = gen("3000000:range:i32");
    CHECK(r.at(2999999) == 2999999);
    CHECK(gen("256:range:u8").at(255) == 255);
    CHECK(gen("2:range:bool").bytes == std::vector<unsigned char>{0, 1});

    // Element i depends only on (seed, i), in every dtype, threads or not.
    for (const char* pair : {"integers[0,1000]:i64", "normal:bf16", "uniform:f16", "sign:i32"}) {
        CAPTURE(std::string(pair));
        const auto big = gen(std::string("3000000:") + pair, 9);
        const auto small = gen(std::string("1000:") + pair, 9);
        CHECK(std::memcmp(big.bytes.data(), small.bytes.data(), small.bytes.size()) == 0);
    }
}

TEST_CASE("float32 generators still make the data they made before dtypes existed") {
    // FNV-1a of each tensor's bytes, and its first element's bits, from the generator before the
    // dtype suffix: data that tests, benchmarks and recorded results were made from.
    const struct {
        const char* spec;
        std::uint64_t seed, hash;
        std::uint32_t first;
    } table[] = {
        {"1000:uniform", 0, 0xbd00a12b2ba37460ull, 0x3dfb2458u},
        {"1000:uniform", 42, 0xfb3e19700eb435e6ull, 0x3eaca8c8u},
        {"1000:uniform[-3,0.1]", 0, 0x0e42e09bf88c5289ull, 0xc027abaeu},
        {"1000:uniform[-3,0.1]", 42, 0x7acbcc0a8fb720e5ull, 0xbffa3065u},
        {"1001:normal[1,2]", 0, 0xa7b2efe60f9ad547ull, 0x4095b71cu},
        {"1001:normal[1,2]", 42, 0x9b65fa053a50b568ull, 0x407b71c4u},
        {"1000:sign", 0, 0xc6eca62e51ffbae5ull, 0xbf800000u},
        {"1000:sign", 42, 0x6cdcd32cbf16e0e5ull, 0xbf800000u},
        {"10x100:softmax", 0, 0xff0dc3df93181251ull, 0x3d00569du},
        {"10x100:softmax", 42, 0x2e1c67e09666e277ull, 0x3cc14e9bu},
        {"5:const[0.1]", 0, 0x1ec339a4617fc6ffull, 0x3dcccccdu},
        {"1000:range", 0, 0x3b47b52f982867a8ull, 0x00000000u},
        {"3000000:normal", 0, 0x42efa9b5243b04ccull, 0x3feb6e38u},
        {"3000000:normal", 42, 0x7071c15304b380c8ull, 0x3fbb71c4u},
        {"3000:uniform[1,1.0000001]", 0, 0xd7c077086dc31de5ull, 0x3f800000u},
        {"2000001:uniform[-1,1]", 0, 0xa19c7b1135cbd431ull, 0xbf4136eau},
        {"2000001:uniform[-1,1]", 42, 0xbbe57198f44090ffull, 0xbea6ae70u},
    };
    for (const auto& row : table) {
        CAPTURE(std::string(row.spec));
        CAPTURE(row.seed);
        for (const std::string suffix : {"", ":f32", ":float32"}) {
            const auto t = gen(row.spec + suffix, row.seed);
            REQUIRE(t.dtype == lossjit::DType::float32);
            std::uint64_t h = 0xCBF29CE484222325ull;
            for (unsigned char b : t.bytes) {
                h ^= b;
                h *= 0x100000001B3ull;
            }
            CHECK(h == row.hash);
            CHECK(std::bit_cast<std::uint32_t>(t.floats()[0]) == row.first);
        }
    }
}

TEST_CASE("relative_error: the one definition every check uses, NaN and infinities decided") {
    const double inf = INFINITY, nan = NAN;
    const struct {
        double value, reference, expected;
    } table[] = {
        {1.0, 1.0, 0.0},        {1.5, 1.0, 0.5},          {-1.0, 1.0, 2.0},  {0.0, 0.0, 0.0},
        {1e-31, 0.0, 1e-1},     {nan, nan, 0.0},          {inf, inf, 0.0},   {-inf, -inf, 0.0},
        {nan, 1.0, inf},        {1.0, nan, inf},          {inf, 1.0, inf},   {1.0, inf, inf},
        {inf, -inf, inf},       {nan, inf, inf},
    };
    for (const auto& row : table) {
        CAPTURE(row.value);
        CAPTURE(row.reference);
        const double error = lossjit::util::relative_error(row.value, row.reference);
        if (std::isinf(row.expected)) CHECK(error == row.expected);
        else CHECK(error == doctest::Approx(row.expected));
    }
}

TEST_CASE("largest_error_relative_to_max: gradients against their largest element; mismatches never pass") {
    const double inf = INFINITY, nan = NAN;
    const struct {
        std::vector<double> values, reference;
        double expected;
    } table[] = {
        {{0.5, 0.0}, {1.0, 0.0}, 0.5},         // relative to the largest |reference|, not per element
        {{1e-9, 2.0}, {0.0, 2.0}, 5e-10},      // an exact 0 in the reference is not a division by 0
        {{nan, 1.0}, {nan, 1.0}, 0.0},         // NaN where the reference has NaN: agreed
        {{inf, 1.0}, {inf, 2.0}, 0.5},         // the same infinity: agreed, and no scale of its own
        {{nan, 1.0}, {0.0, 1.0}, inf},         // NaN against a number
        {{0.0, 1.0}, {nan, 1.0}, inf},         // a number against NaN
        {{inf, 1.0}, {-inf, 1.0}, inf},
        {{1.0}, {1.0, 2.0}, inf},              // lengths differ
        {{0.0, 0.0}, {0.0, 0.0}, 0.0},
    };
    for (const auto& row : table) {
        CAPTURE(row.expected);
        const double error = lossjit::util::largest_error_relative_to_max(row.values, row.reference);
        if (std::isinf(row.expected)) CHECK(error == row.expected);
        else CHECK(error == doctest::Approx(row.expected));
    }
    const std::vector<float> map{1.0f, 2.0f, 3.0f};
    CHECK(lossjit::util::largest_relative_error(map, std::vector<double>{1.0, 2.0, 2.0}) == doctest::Approx(0.5));
    CHECK(lossjit::util::largest_relative_error(map, std::vector<float>{1.0f, 2.0f}) == inf);
}

TEST_CASE("human_bytes: binary units, as docs/cache.md spells them") {
    const std::pair<double, const char*> table[] = {
        {0, "0 B"},           {1023, "1023 B"},           {1024, "1.0 KiB"},           {16 * 1024 + 512, "16.5 KiB"},
        {256.0 * (1 << 20), "256.0 MiB"}, {4.0 * (1ull << 30), "4.0 GiB"}, {1.5 * (1ull << 40), "1.5 TiB"},
        {2048.0 * (1ull << 40), "2048.0 TiB"},
    };
    for (const auto& [bytes, text] : table) CHECK(lossjit::util::human_bytes(bytes) == text);
}

TEST_CASE("write_file_atomically: replaces the file whole, leaves no temporary file, names the path on failure") {
    TempDir dir;
    const std::filesystem::path file = dir.file("state.txt");
    lossjit::util::write_file_atomically(file, {"one ", "two"});
    CHECK(read_file(file.string()) == "one two");
    lossjit::util::write_file_atomically(file, {"three"});
    CHECK(read_file(file.string()) == "three");
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) CHECK(!contains(entry.path().filename().string(), ".tmp"));

    // The temporary name the cache's and the tuning store's cleaners recognise.
    const std::string temp = lossjit::util::temp_path_for(file).filename().string();
    CHECK(temp.rfind("state.txt.tmp.", 0) == 0);

    const std::string missing = dir.file("no/such/dir/x.txt");
    const auto outcome = lossjit::util::try_write_file_atomically(missing, {"x"});
    CHECK(outcome.failed == lossjit::util::WriteStep::Create);
    const std::string message = usage_error_of([&] { lossjit::util::write_file_atomically(missing, {"x"}); });
    CHECK(contains(message, missing));
    CHECK(contains(message, "cannot create a temporary file beside it"));
}

}  // TEST_SUITE
