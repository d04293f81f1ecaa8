// NumPy .npy reading and writing, restricted to what lossjit computes with: the little-endian dtypes
// of include/lossjit/dtype.hpp, in C order. Format reference: numpy/lib/format.py (NEP 1).
#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "tools/host.hpp"
#include "util/atomic_file.hpp"

namespace lossjit {

// The data is read and written with no byte swapping; lossjit only runs on little-endian hosts
// (x86-64 and aarch64 with CUDA).
static_assert(std::endian::native == std::endian::little, "lossjit assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
// numpy aligns the data to 64 bytes since 1.14 so that it can be memory-mapped for any dtype.
constexpr std::size_t kAlignment = 64;
// numpy refuses headers over 10000 bytes by default; a generous cap still keeps a corrupt length
// field from making us allocate gigabytes for the header.
constexpr std::size_t kMaxHeaderSize = std::size_t{1} << 20;

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw UsageError(path + ": " + problem);
}

std::string errno_text(int err) { return std::strerror(err); }

// --- A parser for the header, a Python dict literal such as
//     {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// It accepts the subset of Python literals that numpy's writers produce (and older Python 2
// writers: long integers like 3L), so that a malformed header is reported rather than misread.

struct PyValue {
    enum class Kind { string, boolean, integer, none, sequence } kind = Kind::none;
    std::string text;  // string contents
    bool flag = false;
    std::int64_t number = 0;
    std::vector<PyValue> items;
};

class HeaderParser {
public:
    HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

    // Returns the dict's entries in file order.
    std::vector<std::pair<std::string, PyValue>> parse_dict() {
        std::vector<std::pair<std::string, PyValue>> entries;
        expect('{');
        while (true) {
            skip_space();
            if (peek() == '}') break;
            PyValue key = parse_value(0);
            if (key.kind != PyValue::Kind::string) error("dictionary key is not a string");
            expect(':');
            entries.emplace_back(std::move(key.text), parse_value(0));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() != '}') error("expected ',' or '}'");
        }
        ++pos_;
        skip_space();
        if (pos_ != text_.size()) error("unexpected text after the dictionary");
        return entries;
    }

private:
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

    void skip_space() {
        while (pos_ < text_.size() &&
               (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                text_[pos_] == '\r')) {
            ++pos_;
        }
    }

    void expect(char c) {
        skip_space();
        if (peek() != c) error(std::string("expected '") + c + "'");
        ++pos_;
    }

    [[noreturn]] void error(const std::string& what) const {
        std::string shown(text_.substr(0, 200));
        while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
        fail(path_, "malformed .npy header (" + what + " at offset " + std::to_string(pos_) +
                        "): " + shown);
    }

    PyValue parse_value(int depth) {
        // Only dtype descriptions of structured arrays nest, and only a few levels deep.
        if (depth > 16) error("nesting too deep");
        skip_space();
        char c = peek();
        if (c == '\'' || c == '"') return parse_string(c);
        if (c == '(' || c == '[') return parse_sequence(c == '(' ? ')' : ']', depth);
        if (c == '-' || (c >= '0' && c <= '9')) return parse_integer();
        if (c >= 'A' && c <= 'Z') return parse_name();
        error("unexpected character");
    }

    PyValue parse_string(char quote) {
        ++pos_;
        PyValue v;
        v.kind = PyValue::Kind::string;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
            v.text += text_[pos_++];
        }
        if (pos_ == text_.size()) error("unterminated string");
        ++pos_;
        return v;
    }

    PyValue parse_sequence(char close, int depth) {
        ++pos_;
        PyValue v;
        v.kind = PyValue::Kind::sequence;
        while (true) {
            skip_space();
            if (peek() == close) break;
            v.items.push_back(parse_value(depth + 1));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() != close) error(std::string("expected ',' or '") + close + "'");
        }
        ++pos_;
        return v;
    }

    PyValue parse_integer() {
        PyValue v;
        v.kind = PyValue::Kind::integer;
        const char* first = text_.data() + pos_;
        const char* last = text_.data() + text_.size();
        auto [end, ec] = std::from_chars(first, last, v.number);
        if (ec == std::errc::result_out_of_range) error("integer out of range");
        if (ec != std::errc()) error("bad integer");
        pos_ += static_cast<std::size_t>(end - first);
        if (peek() == 'L') ++pos_;
        return v;
    }

    PyValue parse_name() {
        std::size_t start = pos_;
        while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
        std::string_view name = text_.substr(start, pos_ - start);
        PyValue v;
        if (name == "True" || name == "False") {
            v.kind = PyValue::Kind::boolean;
            v.flag = name == "True";
        } else if (name == "None") {
            v.kind = PyValue::Kind::none;
        } else {
            pos_ = start;
            error("unexpected name '" + std::string(name) + "'");
        }
        return v;
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    const std::string& path_;
};

struct Header {
    Shape shape;
    DType dtype = DType::float32;
};

// The descr each dtype is written with, as numpy writes it: numpy spells one-byte types with '|'
// (no byte order). numpy has no bfloat16; ml_dtypes registers one whose descr is '<V2', a 2-byte
// void, so that is what np.save writes for it and what np.load gives back (a void array that
// .view(ml_dtypes.bfloat16) reinterprets).
struct NpyType {
    std::string_view descr;
    DType dtype;
};
constexpr NpyType kWritten[] = {
    {"<f4", DType::float32}, {"<f8", DType::float64}, {"<f2", DType::float16}, {"<V2", DType::bfloat16},
    {"<i4", DType::int32},   {"<i8", DType::int64},   {"|u1", DType::uint8},   {"|b1", DType::boolean},
};
// Other spellings of bfloat16 that writers use: '|V2' is numpy's own spelling of a plain 2-byte
// void, and some writers put ml_dtypes' name, str(a.dtype), in the header.
constexpr NpyType kAlsoRead[] = {{"|V2", DType::bfloat16}, {"bfloat16", DType::bfloat16}};

std::string_view descr_of(DType dtype) {
    for (const auto& t : kWritten)
        if (t.dtype == dtype) return t.descr;
    throw InternalError("save_npy: no .npy descr for " + std::string(to_string(dtype)));
}

std::string supported_descrs() {
    std::string out;
    for (const auto& t : kWritten) {
        if (!out.empty()) out += ", ";
        out += fmt::format("'{}' ({})", t.descr, to_string(t.dtype));
    }
    return out;
}

// Reads a descr, or fails with what to do instead. A 2-byte void is taken for bfloat16: that is the
// one way ml_dtypes' arrays reach a .npy file, and numpy itself never writes a 2-byte void for a
// numeric type.
DType dtype_of(const std::string& descr, const std::string& path) {
    for (const auto& t : kWritten)
        if (t.descr == descr) return t.dtype;
    for (const auto& t : kAlsoRead)
        if (t.descr == descr) return t.dtype;
    if (descr.size() > 1 && descr[0] == '>') {
        const std::string little = fmt::format("<{}", descr.substr(1));
        for (const auto& t : kWritten) {
            if (t.descr != little) continue;
            // .astype cannot byte-swap a void; a big-endian bfloat16 needs a.byteswap() instead.
            const std::string fix = t.dtype == DType::bfloat16 ? "" : fmt::format(" (convert with .astype('{}'))", little);
            fail(path, fmt::format("dtype '{}' is big-endian; lossjit reads little-endian data only{}", descr, fix));
        }
    }
    std::string hint;
    const char kind = descr.size() > 1 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')
                          ? descr[1]
                          : '\0';
    if (kind == 'f') hint = " (convert with .astype(np.float32) or np.float64)";
    if (kind == 'i' || kind == 'u') hint = " (convert with .astype(np.int32) or np.int64, or np.uint8 for bytes)";
    if (kind == 'V') hint = " (a 2-byte void, '<V2', is read as bfloat16; this one has another size)";
    fail(path, fmt::format("dtype '{}' is not supported; lossjit reads {}{}", descr, supported_descrs(), hint));
}

Header interpret_header(std::string_view text, const std::string& path) {
    auto entries = HeaderParser(text, path).parse_dict();
    const PyValue* descr = nullptr;
    const PyValue* fortran = nullptr;
    const PyValue* shape = nullptr;
    for (const auto& [key, value] : entries) {
        const PyValue** slot = key == "descr"           ? &descr
                               : key == "fortran_order" ? &fortran
                               : key == "shape"         ? &shape
                                                        : nullptr;
        if (slot == nullptr) fail(path, "malformed .npy header (unexpected key '" + key + "')");
        if (*slot != nullptr) fail(path, "malformed .npy header (duplicate key '" + key + "')");
        *slot = &value;
    }
    for (auto [value, key] : {std::pair{descr, "descr"}, std::pair{fortran, "fortran_order"},
                              std::pair{shape, "shape"}}) {
        if (value == nullptr) {
            fail(path, std::string("malformed .npy header (missing key '") + key + "')");
        }
    }

    if (descr->kind != PyValue::Kind::string) {
        fail(path, "structured dtypes are not supported; lossjit reads plain arrays of " + supported_descrs());
    }
    Header h;
    h.dtype = dtype_of(descr->text, path);

    if (fortran->kind != PyValue::Kind::boolean) {
        fail(path, "malformed .npy header ('fortran_order' is not True or False)");
    }
    if (fortran->flag) {
        fail(path, "array is stored in Fortran order; lossjit reads C-ordered arrays only (save "
                   "np.ascontiguousarray(a))");
    }

    if (shape->kind != PyValue::Kind::sequence) {
        fail(path, "malformed .npy header ('shape' is not a tuple)");
    }
    for (const PyValue& extent : shape->items) {
        if (extent.kind != PyValue::Kind::integer || extent.number < 0) {
            fail(path, "malformed .npy header ('shape' must hold non-negative integers)");
        }
        h.shape.push_back(extent.number);
    }
    return h;
}

std::uint32_t read_le(const unsigned char* bytes, std::size_t n) {
    std::uint32_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | bytes[i];
    return v;
}

// Reads exactly n bytes unless the file ends first; returns how many were read.
std::size_t read_bytes(std::FILE* f, void* out, std::size_t n, const std::string& path) {
    std::size_t got = std::fread(out, 1, n, f);
    if (got < n && std::ferror(f)) fail(path, "read error: " + errno_text(errno));
    return got;
}

std::string shape_tuple(const Shape& shape) {
    std::string out = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(shape[i]);
    }
    if (shape.size() == 1) out += ',';
    return out + ")";
}

}  // namespace

HostTensor load_npy(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a .npy file");
    File file(std::fopen(path.c_str(), "rb"));
    if (!file) fail(path, "cannot open: " + errno_text(errno));
    std::FILE* f = file.get();
    // Unknown for pipes and the like; then only the reads themselves detect truncation.
    const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
    const bool size_known = !ec;

    unsigned char preamble[12];
    std::size_t got = read_bytes(f, preamble, 8, path);
    if (got < kMagicSize || std::memcmp(preamble, kMagic, kMagicSize) != 0) {
        fail(path, "not a .npy file (it does not start with the magic bytes \\x93NUMPY)");
    }
    if (got < 8) fail(path, "truncated .npy file (it ends inside the format version)");
    const unsigned major = preamble[6];
    const unsigned minor = preamble[7];
    if (major < 1 || major > 3 || minor != 0) {
        fail(path, "unsupported .npy format version " + std::to_string(major) + "." +
                       std::to_string(minor) + " (1.0, 2.0 and 3.0 are supported)");
    }
    // Version 1.0 has a 16-bit header length; 2.0 and 3.0 widened it to 32 bits.
    const std::size_t length_bytes = major == 1 ? 2 : 4;
    if (read_bytes(f, preamble + 8, length_bytes, path) < length_bytes) {
        fail(path, "truncated .npy file (it ends inside the header length)");
    }
    const std::size_t header_size = read_le(preamble + 8, length_bytes);
    const std::size_t data_offset = 8 + length_bytes + header_size;
    if (header_size > kMaxHeaderSize) {
        fail(path, "malformed .npy header (its length field says " + std::to_string(header_size) +
                       " bytes)");
    }
    if (size_known && file_size < data_offset) {
        fail(path, "truncated .npy file (the header needs " + std::to_string(header_size) +
                       " bytes but the file ends before that)");
    }
    std::string header(header_size, '\0');
    if (read_bytes(f, header.data(), header_size, path) < header_size) {
        fail(path, "truncated .npy file (it ends inside the header)");
    }

    const Header h = interpret_header(header, path);
    std::int64_t count = 0;
    try {
        count = element_count(h.shape);
    } catch (const UsageError& e) {
        fail(path, e.what());
    }
    const auto n = static_cast<std::uint64_t>(count);
    const std::size_t size = size_of(h.dtype);
    const std::string what = "shape " + format_shape(h.shape) + " of " + std::string(to_string(h.dtype));
    // Compared in elements so that a huge shape cannot overflow the byte count, and before
    // allocating so that a corrupt header cannot make us allocate memory the file cannot fill.
    if (size_known && (file_size - data_offset) / size < n) {
        fail(path, "truncated .npy file (" + what + " needs " + std::to_string(n * size) + " data bytes but only " +
                       std::to_string(file_size - data_offset) + " are present)");
    }
    HostTensor t;
    try {
        t = HostTensor(h.shape, h.dtype);
    } catch (const UsageError&) {
        fail(path, "cannot allocate memory for " + what);
    }
    // One read straight into the tensor: for multi-GiB inputs any staging copy would dominate.
    const std::size_t want = t.bytes.size();
    if (read_bytes(f, t.bytes.data(), want, path) < want) {
        fail(path, "truncated .npy file (" + what + " needs " + std::to_string(want) +
                       " data bytes but the file ends early)");
    }
    // numpy takes any nonzero byte for True, but a kernel may load a bool as its byte (to add it,
    // say): 0 or 1 is the only form that means the same to every reader.
    if (t.dtype == DType::boolean) {
        for (unsigned char& b : t.bytes) b = b != 0 ? 1 : 0;
    }
    return t;
}

void save_npy(const std::string& path, const HostTensor& t) {
    std::int64_t count = 0;
    try {
        count = element_count(t.shape);
    } catch (const UsageError& e) {
        fail(path, e.what());
    }
    const std::size_t size = size_of(t.dtype);
    if (t.bytes.size() % size != 0 || static_cast<std::uint64_t>(count) != t.bytes.size() / size) {
        fail(path, "cannot save: shape " + format_shape(t.shape) + " has " + std::to_string(count) +
                       " elements but the tensor holds " + std::to_string(t.bytes.size()) + " bytes of " +
                       std::string(to_string(t.dtype)));
    }

    std::string dict = "{'descr': '" + std::string(descr_of(t.dtype)) +
                       "', 'fortran_order': False, 'shape': " + shape_tuple(t.shape) + ", }";
    // Pad with spaces and end with a newline so that the data starts on an aligned offset, as
    // numpy's own writer does.
    const bool wide = dict.size() + 1 + 10 + kAlignment > 0xFFFF;
    const std::size_t preamble = wide ? 12 : 10;
    const std::size_t unpadded = preamble + dict.size() + 1;
    const std::size_t padded = (unpadded + kAlignment - 1) / kAlignment * kAlignment;
    dict.append(padded - unpadded, ' ');
    dict += '\n';
    const std::size_t header_size = dict.size();

    std::string bytes(kMagic, kMagicSize);
    bytes += static_cast<char>(wide ? 2 : 1);
    bytes += '\0';
    for (std::size_t i = 0; i < preamble - 8; ++i) {
        bytes += static_cast<char>((header_size >> (8 * i)) & 0xFF);
    }
    bytes += dict;

    // Readers never see a half-written file.
    const std::string_view data(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    util::write_file_atomically(path, {bytes, data});
}

}  // namespace lossjit
