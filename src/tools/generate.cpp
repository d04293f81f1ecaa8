// Shape strings and deterministic input generators.
//
// Every generated element is a pure function of (seed, element index): a counter-based hash rather
// than a sequential PRNG, so that the data can be filled by any number of threads in any order and
// still come out bit-identical, and so that a test can recompute any single element.
//
// Every dtype draws the same numbers (in double) and rounds them into the tensor as HostTensor::set
// does, so p=N:normal:bf16 holds exactly the bfloat16 roundings of p=N:normal (uniform then clamps
// into [lo, hi) in the dtype's values).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "tools/host.hpp"

namespace lossjit {

namespace {

constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;
constexpr std::size_t kMaxRank = 8;
// Below this, starting threads costs more than it saves.
constexpr std::int64_t kParallelThreshold = std::int64_t{1} << 20;

constexpr char kValidKinds[] =
    "valid kinds: uniform[lo,hi] (default [0,1]), normal[mean,std] (default [0,1]), sign, "
    "softmax, const[v], range, integers[lo,hi]";

// The largest |z| standard_normals can return: its u1 is at least 2^-33.
const double kNormalTail = std::sqrt(-2.0 * std::log(0x1p-33));

// --- Hashing ---

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The splitmix64 finalizer: a bijection on 64 bits with good avalanche, cheap enough to run once
// per element.
constexpr std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Element i's bits are splitmix64's i-th output for a state derived from the seed. Mixing the seed
// first keeps nearby seeds (0, 1, 2, ...) from producing shifted copies of one stream.
struct Stream {
    std::uint64_t key;
    explicit Stream(std::uint64_t seed) : key(mix64(seed ^ 0x6C6F73736A697421ull)) {}
    std::uint64_t operator()(std::uint64_t i) const { return mix64(key + (i + 1) * kGolden); }
};

// Standard normals for elements [begin, end), passed to put(i, z). Box-Muller turns one 64-bit hash
// (two 32-bit uniforms) into a pair of normals, so elements 2k and 2k+1 share hash k and one
// logarithm; that halves the dominant cost while element i still depends only on (seed, i).
// u1 lies in (0, 1), so the logarithm is finite; the tail reaches about 6.7 sigma, plenty for test
// data.
template <class Put>
void standard_normals(const Stream& stream, std::int64_t begin, std::int64_t end, Put put) {
    for (std::int64_t k = begin >> 1; 2 * k < end; ++k) {
        const std::uint64_t h = stream(static_cast<std::uint64_t>(k));
        const double u1 = (static_cast<double>(h >> 32) + 0.5) * 0x1p-32;
        const double u2 = static_cast<double>(h & 0xFFFFFFFFull) * 0x1p-32;
        const double radius = std::sqrt(-2.0 * std::log(u1));
        const double angle = 2.0 * std::numbers::pi * u2;
        if (2 * k >= begin) put(2 * k, radius * std::cos(angle));
        if (2 * k + 1 < end) put(2 * k + 1, radius * std::sin(angle));
    }
}

// --- Parallel filling ---

int thread_count(std::int64_t elements) {
    if (elements < kParallelThreshold) return 1;
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    // At least half a million elements per thread so start-up cost stays negligible.
    return static_cast<int>(std::min<std::int64_t>(hw, std::max<std::int64_t>(1, elements >> 19)));
}

// Calls fn(begin, end) on `threads` contiguous ranges covering [0, units). The calling thread
// takes the first range; the first exception from any range is rethrown after all have finished.
template <class Fn>
void for_chunks(std::int64_t units, int threads, Fn fn) {
    if (threads <= 1 || units <= 1) {
        fn(std::int64_t{0}, units);
        return;
    }
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
    auto bound = [&](int k) {
        return units / threads * k + std::min<std::int64_t>(k, units % threads);
    };
    {
        std::vector<std::jthread> workers;  // jthread joins on destruction, even while unwinding
        workers.reserve(static_cast<std::size_t>(threads - 1));
        for (int k = 1; k < threads; ++k) {
            workers.emplace_back([&, k] {
                try {
                    fn(bound(k), bound(k + 1));
                } catch (...) {
                    errors[static_cast<std::size_t>(k)] = std::current_exception();
                }
            });
        }
        try {
            fn(bound(0), bound(1));
        } catch (...) {
            errors[0] = std::current_exception();
        }
    }
    for (const auto& e : errors) {
        if (e) std::rethrow_exception(e);
    }
}

// --- Kinds ---

enum class Kind { uniform, normal, sign, softmax, constant, range, integers };

struct KindInfo {
    std::string_view name;
    Kind kind;
    std::vector<double> defaults;  // arity when arguments may be omitted
    std::size_t required;          // arity when they may not (0 = no arguments at all)
    bool real;                     // draws real numbers: floating dtypes only
};

const std::vector<KindInfo>& kinds() {
    static const std::vector<KindInfo> table = {
        {"uniform", Kind::uniform, {0.0, 1.0}, 2, true},
        {"normal", Kind::normal, {0.0, 1.0}, 2, true},
        {"sign", Kind::sign, {}, 0, false},
        {"softmax", Kind::softmax, {}, 0, true},
        {"const", Kind::constant, {}, 1, false},
        {"range", Kind::range, {}, 0, false},
        {"integers", Kind::integers, {}, 2, false},
    };
    return table;
}

std::string format_args(const std::vector<double>& args) {
    std::string out = "[";
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (i > 0) out += ',';
        char buf[32];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, args[i]);
        out.append(buf, ec == std::errc() ? end : buf);
    }
    return out + "]";
}

// --- The values of a floating dtype ---

// x rounded as HostTensor::set rounds it into a floating dtype.
double round_to(DType dtype, double x) {
    if (dtype == DType::float32) return static_cast<float>(x);  // the common case, without the dispatch
    unsigned char element[8];
    store_from_double(element, dtype, 0, x);
    return load_as_double(element, dtype, 0, DType::float64);
}

// The dtype's next value above (up) or below x, a value of the dtype.
double step(DType dtype, double x, bool up) {
    const double toward = up ? INFINITY : -INFINITY;
    switch (dtype) {
        case DType::float64: return std::nextafter(x, toward);
        case DType::float32: return std::nextafter(static_cast<float>(x), static_cast<float>(toward));
        case DType::bfloat16:
        case DType::float16: {
            // Sign and magnitude: as an ordered integer, -magnitude for negative values (both zeros
            // are 0), so the neighbours are one apart.
            const bool bf16 = dtype == DType::bfloat16;
            const std::uint16_t bits = bf16 ? float_to_bfloat16(static_cast<float>(x)) : float_to_float16(static_cast<float>(x));
            const int ordered = (bits & 0x8000) ? -(bits & 0x7fff) : bits;
            const int next = ordered + (up ? 1 : -1);
            const auto out = static_cast<std::uint16_t>(next < 0 ? 0x8000 | -next : next);
            return bf16 ? bfloat16_to_float(out) : float16_to_float(out);
        }
        default: throw InternalError("generate: step on a non-floating dtype");
    }
}

double smallest_value_at_least(DType dtype, double x) {
    const double r = round_to(dtype, x);
    return r < x ? step(dtype, r, true) : r;
}

double largest_value_below(DType dtype, double x) {
    const double r = round_to(dtype, x);
    return r >= x ? step(dtype, r, false) : r;
}

// --- The integers a dtype holds exactly ---

// Every integer in [min, max] is a value of the dtype, and (for floats) the next integer out is
// not. For int64 the bound compares as 2^63, which no argument (at most 2^53) and no element index
// (below 2^62) reaches.
struct Integers {
    std::int64_t min, max;
};

Integers exact_integers(DType dtype) {
    switch (dtype) {
        case DType::float32: return {-(std::int64_t{1} << 24), std::int64_t{1} << 24};
        case DType::float64: return {-(std::int64_t{1} << 53), std::int64_t{1} << 53};
        case DType::bfloat16: return {-256, 256};
        case DType::float16: return {-2048, 2048};
        case DType::int32: return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
        case DType::int64: return {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
        case DType::uint8: return {0, 255};
        case DType::boolean: return {0, 1};
    }
    throw InternalError("generate: invalid DType");
}

bool holds_integers(DType dtype, double lo, double hi) {
    const Integers in = exact_integers(dtype);
    return lo >= static_cast<double>(in.min) && hi <= static_cast<double>(in.max);
}

// "(float16 holds every integer in [-2048, 2048])", for messages.
std::string integers_text(DType dtype) {
    const Integers in = exact_integers(dtype);
    return fmt::format("({} holds {} integer in [{}, {}])", to_string(dtype), is_floating(dtype) ? "every" : "each",
                       in.min, in.max);
}

// Integer arguments are read as doubles, which hold every integer up to 2^53 exactly.
constexpr double kMaxIntegerArgument = 0x1p53;

bool is_integer(double x) { return std::trunc(x) == x && std::fabs(x) <= kMaxIntegerArgument; }

std::string dtype_list() {
    std::string out;
    for (DType d : all_dtypes()) {
        if (!out.empty()) out += ", ";
        out += fmt::format("{} ({})", short_name(d), to_string(d));
    }
    return out;
}

// A validated spec. Throws UsageError with a message that does not yet name the spec's text; the
// callers add that.
struct Resolved {
    Kind kind;
    std::vector<double> args;
};

Resolved resolve(const std::string& kind_name, const std::vector<double>& args, const Shape& shape, DType dtype) {
    const KindInfo* info = nullptr;
    for (const KindInfo& k : kinds()) {
        if (k.name == kind_name) info = &k;
    }
    if (info == nullptr) {
        std::string hint;
        if (parse_dtype(kind_name)) hint = fmt::format(" ('{}' is a dtype: it goes after the kind, as in 4096:normal:bf16)", kind_name);
        throw UsageError("unknown kind '" + kind_name + "'" + hint + "; " + kValidKinds);
    }

    Resolved r{info->kind, args};
    if (args.empty() && !info->defaults.empty()) r.args = info->defaults;
    if (r.args.size() != info->required) {
        std::string expected = info->required == 0 ? "takes no arguments"
                               : info->required == 1
                                   ? "takes 1 argument"
                                   : "takes " + std::to_string(info->required) + " arguments";
        if (!info->defaults.empty()) expected += " or none";
        throw UsageError("'" + kind_name + "' " + expected + ", got " + format_args(args) + "; " +
                         kValidKinds);
    }
    const std::string dtype_name(to_string(dtype));
    if (info->real && !is_floating(dtype)) {
        throw UsageError(fmt::format("'{}' draws real numbers, which {} does not hold; use a floating dtype (f32, f64, "
                                     "bf16, f16), or integers[lo,hi] for {} values",
                                     kind_name, dtype_name, dtype_name));
    }
    for (double a : r.args) {
        // An argument the dtype rounds to an infinity would fill the tensor with infinities.
        if (!std::isfinite(a) || (is_floating(dtype) && !std::isfinite(round_to(dtype, a)))) {
            throw UsageError("argument " + format_args({a}) + " of '" + kind_name + "' is not a finite " +
                             (is_floating(dtype) ? dtype_name + " value" : std::string("number")));
        }
    }
    switch (r.kind) {
        case Kind::uniform:
            if (!(r.args[0] < r.args[1])) {
                throw UsageError("uniform[lo,hi] needs lo < hi, got " + format_args(r.args));
            }
            if (smallest_value_at_least(dtype, r.args[0]) > largest_value_below(dtype, r.args[1])) {
                throw UsageError("uniform" + format_args(r.args) + " contains no " + dtype_name + " value");
            }
            break;
        case Kind::normal: {
            if (r.args[1] < 0) {
                throw UsageError("normal[mean,std] needs std >= 0, got " + format_args(r.args));
            }
            // The draws reach mean +- kNormalTail * std; beyond the dtype's range they would be infinities.
            const double reach = r.args[1] * kNormalTail;
            if (!std::isfinite(round_to(dtype, r.args[0] + reach)) || !std::isfinite(round_to(dtype, r.args[0] - reach))) {
                throw UsageError(fmt::format("normal{} reaches {:.3g} +- {:.3g}, beyond the largest {} value", format_args(r.args),
                                             r.args[0], reach, dtype_name));
            }
            break;
        }
        case Kind::softmax:
            if (shape.empty()) {
                throw UsageError("softmax needs a shape of rank >= 1 (it normalizes the last "
                                 "dimension), got a scalar");
            }
            break;
        case Kind::sign:
            if (!holds_integers(dtype, -1, 1)) {
                throw UsageError("sign makes -1 and +1, which " + dtype_name + " does not hold " + integers_text(dtype));
            }
            break;
        case Kind::constant:
            if (!is_floating(dtype) && (!is_integer(r.args[0]) || !holds_integers(dtype, r.args[0], r.args[0]))) {
                throw UsageError("const" + format_args(r.args) + " is not exactly a value of " + dtype_name + " " +
                                 integers_text(dtype));
            }
            break;
        case Kind::range: {
            // A floating dtype rounds the large indices, as float32 always has (tests of 64-bit
            // indexing use range beyond 2^24), but must not make them infinite; an integer dtype
            // must hold them.
            const std::int64_t n = element_count(shape);
            const auto last = static_cast<double>(n - 1);
            if (n > 0 && is_floating(dtype) && !std::isfinite(round_to(dtype, last)))
                throw UsageError(fmt::format("range makes 0 to {}, beyond the largest {} value", n - 1, dtype_name));
            if (n > 0 && !is_floating(dtype) && !holds_integers(dtype, 0, last)) {
                throw UsageError(fmt::format("range makes 0 to {}, beyond what {} holds {}", n - 1, dtype_name,
                                             integers_text(dtype)));
            }
            break;
        }
        case Kind::integers:
            if (!is_integer(r.args[0]) || !is_integer(r.args[1])) {
                throw UsageError("integers[lo,hi] needs integer bounds of magnitude at most 2^53, got " +
                                 format_args(r.args));
            }
            if (!(r.args[0] < r.args[1])) {
                throw UsageError("integers[lo,hi] needs lo < hi, got " + format_args(r.args));
            }
            if (!holds_integers(dtype, r.args[0], r.args[1] - 1)) {
                throw UsageError(fmt::format("integers{} makes {} to {}, which {} does not hold exactly {}",
                                             format_args(r.args), r.args[0], r.args[1] - 1, dtype_name,
                                             integers_text(dtype)));
            }
            break;
    }
    return r;
}

std::string_view trim(std::string_view s) {
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
}

std::string quote(std::string_view s) { return fmt::format("'{}'", s); }

}  // namespace

Shape parse_shape(std::string_view text) {
    auto bad = [&](const std::string& why) -> UsageError {
        return UsageError("invalid shape " + quote(text) + ": " + why +
                          " (expected extents joined by 'x', e.g. 32768x32768, 4096, or scalar)");
    };
    const std::string_view body = trim(text);
    if (body == "scalar") return {};
    if (body.empty()) throw bad("it is empty");

    Shape shape;
    std::size_t start = 0;
    while (true) {
        const std::size_t x = body.find('x', start);
        const std::string_view part =
            body.substr(start, x == std::string_view::npos ? x : x - start);
        if (part.empty()) throw bad("an extent is missing");
        // from_chars would accept a leading '-'; extents are plain digit strings.
        if (!std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            throw bad(quote(part) + " is not a non-negative integer");
        }
        std::uint64_t extent = 0;
        auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), extent);
        if (ec != std::errc() || end != part.data() + part.size() ||
            extent > static_cast<std::uint64_t>(kMaxExtent)) {
            throw bad("extent " + std::string(part) + " exceeds 2^40");
        }
        if (shape.size() == kMaxRank) throw bad("more than 8 dimensions");
        shape.push_back(static_cast<std::int64_t>(extent));
        if (x == std::string_view::npos) break;
        start = x + 1;
    }
    try {
        element_count(shape);
    } catch (const UsageError&) {
        throw bad("more than 2^62 elements");
    }
    return shape;
}

GeneratorSpec parse_generator(std::string_view text) {
    const std::string prefix = "invalid generator " + quote(text) + ": ";
    const std::string_view body = trim(text);
    const std::size_t colon = body.find(':');
    if (colon == std::string_view::npos) {
        throw UsageError(prefix + "expected SHAPE:KIND or SHAPE:KIND:DTYPE such as 32768x32768:uniform, "
                                  "100:uniform[-1,1] or 4096:integers[0,10]:i64; " + kValidKinds);
    }
    GeneratorSpec spec;
    try {
        spec.shape = parse_shape(body.substr(0, colon));
    } catch (const UsageError& e) {
        throw UsageError(prefix + e.what());
    }

    std::string_view rest = trim(body.substr(colon + 1));
    // The arguments hold only numbers and commas, so a second ':' starts the dtype.
    if (const std::size_t second = rest.find(':'); second != std::string_view::npos) {
        const std::string_view name = trim(rest.substr(second + 1));
        const auto dtype = parse_dtype(name);
        if (!dtype) {
            throw UsageError(prefix + (name.empty() ? std::string("the dtype after ':' is missing")
                                                    : "unknown dtype " + quote(name)) +
                             "; valid dtypes: " + dtype_list());
        }
        spec.dtype = *dtype;
        rest = trim(rest.substr(0, second));
    }
    const std::size_t open = rest.find('[');
    spec.kind = std::string(trim(rest.substr(0, open)));
    std::vector<double> args;
    if (open != std::string_view::npos) {
        if (rest.back() != ']') throw UsageError(prefix + "arguments must end with ']'");
        std::string_view inner = rest.substr(open + 1, rest.size() - open - 2);
        if (inner.find_first_of("[]") != std::string_view::npos) {
            throw UsageError(prefix + "unbalanced brackets");
        }
        if (!trim(inner).empty()) {
            std::size_t start = 0;
            while (true) {
                const std::size_t comma = inner.find(',', start);
                std::string_view token = trim(
                    inner.substr(start, comma == std::string_view::npos ? comma : comma - start));
                // from_chars does not take the '+' that people write in "[+1,...]".
                if (token.size() > 1 && token[0] == '+' && token[1] != '-') token.remove_prefix(1);
                double value = 0;
                auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
                if (token.empty() || ec != std::errc() || end != token.data() + token.size() ||
                    !std::isfinite(value)) {
                    throw UsageError(prefix + "argument " + quote(token) +
                                     " is not a finite number");
                }
                args.push_back(value);
                if (comma == std::string_view::npos) break;
                start = comma + 1;
            }
        }
    }
    if (spec.kind.empty()) throw UsageError(prefix + "the kind is missing; " + kValidKinds);
    try {
        spec.args = resolve(spec.kind, args, spec.shape, spec.dtype).args;
    } catch (const UsageError& e) {
        throw UsageError(prefix + e.what());
    }
    return spec;
}

HostTensor generate(const GeneratorSpec& spec, std::uint64_t seed) {
    const Resolved r = [&] {
        try {
            return resolve(spec.kind, spec.args, spec.shape, spec.dtype);
        } catch (const UsageError& e) {
            throw UsageError("invalid generator " + format_shape(spec.shape) + ":" + spec.kind + format_args(spec.args) +
                             (spec.dtype == DType::float32 ? "" : ":" + std::string(to_string(spec.dtype))) + ": " +
                             e.what());
        }
    }();

    HostTensor t(spec.shape, spec.dtype);
    const std::int64_t n = t.numel();
    const DType dtype = t.dtype;
    const Stream stream(seed);
    const int threads = thread_count(n);
    // put(i, v) stores v at element i as HostTensor::set does; float32, the common case, writes
    // directly (set's float32 case is the same static_cast), without a dispatch per element.
    float* const f32 = dtype == DType::float32 ? t.floats().data() : nullptr;
    HostTensor* const out = &t;
    const auto put = [f32, out](std::int64_t i, double v) {
        if (f32 != nullptr) f32[i] = static_cast<float>(v);
        else out->set(i, v);
    };

    switch (r.kind) {
        case Kind::uniform: {
            const double lo = r.args[0];
            const double width = r.args[1] - r.args[0];
            // Rounding lo + width*u into the dtype can land on hi or below lo; clamping to the
            // dtype's values inside [lo, hi) keeps the documented half-open range exact.
            const double lowest = smallest_value_at_least(dtype, r.args[0]);
            const double highest = largest_value_below(dtype, r.args[1]);
            for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) {
                for (std::int64_t i = begin; i < end; ++i) {
                    // 24 bits: exactly the precision of a float32 in [0, 1).
                    const std::uint64_t h = stream(static_cast<std::uint64_t>(i));
                    const double u = static_cast<double>(h >> 40) * 0x1p-24;
                    const double v = round_to(dtype, lo + width * u);
                    put(i, std::min(std::max(v, lowest), highest));
                }
            });
            break;
        }
        case Kind::normal: {
            const double mean = r.args[0];
            const double stddev = r.args[1];
            for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) {
                standard_normals(stream, begin, end, [=](std::int64_t i, double z) { put(i, mean + stddev * z); });
            });
            break;
        }
        case Kind::sign:
            for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) {
                for (std::int64_t i = begin; i < end; ++i) {
                    put(i, (stream(static_cast<std::uint64_t>(i)) >> 63) != 0 ? 1.0 : -1.0);
                }
            });
            break;
        case Kind::softmax: {
            const std::int64_t row = t.shape.back();
            if (row == 0 || n == 0) break;
            // Whole rows per thread, so no row's normalization is split between threads.
            for_chunks(n / row, threads, [=](std::int64_t first, std::int64_t last) {
                std::vector<double> e(static_cast<std::size_t>(row));
                for (std::int64_t r0 = first; r0 < last; ++r0) {
                    const std::int64_t base = r0 * row;
                    standard_normals(stream, base, base + row, [&](std::int64_t i, double z) {
                        e[static_cast<std::size_t>(i - base)] = z;
                    });
                    const double top = *std::max_element(e.begin(), e.end());
                    double sum = 0;
                    for (std::int64_t j = 0; j < row; ++j) {
                        e[j] = std::exp(e[j] - top);  // shifted so exp cannot overflow
                        sum += e[j];
                    }
                    for (std::int64_t j = 0; j < row; ++j) put(base + j, e[j] / sum);
                }
            });
            break;
        }
        case Kind::constant: {
            const double v = r.args[0];
            if (f32 != nullptr) {
                const float value = static_cast<float>(v);
                for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) { std::fill(f32 + begin, f32 + end, value); });
            } else {
                for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) {
                    for (std::int64_t i = begin; i < end; ++i) put(i, v);
                });
            }
            break;
        }
        case Kind::range:
            for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) {
                for (std::int64_t i = begin; i < end; ++i) put(i, static_cast<double>(i));
            });
            break;
        case Kind::integers: {
            // Bounds of magnitude at most 2^53: the width fits in 64 bits and every value in a double.
            const auto lo = static_cast<std::int64_t>(r.args[0]);
            const auto width = static_cast<std::uint64_t>(static_cast<std::int64_t>(r.args[1]) - lo);
            for_chunks(n, threads, [=](std::int64_t begin, std::int64_t end) {
                for (std::int64_t i = begin; i < end; ++i) {
                    // The high half of hash * width: uniform in [0, width) up to a bias below
                    // width / 2^64, and no division.
                    const unsigned __int128 wide =
                        static_cast<unsigned __int128>(stream(static_cast<std::uint64_t>(i))) * width;
                    put(i, static_cast<double>(lo + static_cast<std::int64_t>(wide >> 64)));
                }
            });
            break;
        }
    }
    return t;
}

std::uint64_t seed_for(std::uint64_t base_seed, std::string_view input_name) {
    // FNV-1a spreads the name over 64 bits; mixing it with an already-mixed base seed makes every
    // bit of both matter, so "x" under seed 1 and "y" under seed 2 do not collide by construction.
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (char c : input_name) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001B3ull;
    }
    return mix64(mix64(base_seed + kGolden) ^ h);
}

}  // namespace lossjit
