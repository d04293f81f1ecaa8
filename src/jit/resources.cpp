#include "jit/resources.hpp"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace lossjit {
namespace {

// The attributes ptxas writes into `.nv.info`, each as a format byte, an attribute byte and a
// payload. Only the formats below are known; any other ends the reading (nothing is guessed).
constexpr std::uint8_t kFormatNoValue = 0x01, kFormatByte = 0x02, kFormatHalf = 0x03, kFormatSized = 0x04;
// Sized attributes whose payload is (symbol index: u32, value: u32).
constexpr std::uint8_t kAttributeFrameSize = 0x11, kAttributeRegisterCount = 0x2f;
// Past this a frame size is not one ptxas could have given a thread (local memory is 512 KB a thread).
constexpr std::uint32_t kMaxFrameBytes = 512 * 1024;

// Bounds-checked reads from the image: every offset comes from the file itself.
class Bytes {
public:
    explicit Bytes(const std::string& data) : data_(data) {}
    template <class T>
    bool read(std::uint64_t offset, T& out) const {
        if (offset > data_.size() || sizeof(T) > data_.size() - offset) return false;
        std::memcpy(&out, data_.data() + offset, sizeof(T));
        return true;
    }
    bool contains(std::uint64_t offset, std::uint64_t size) const {
        return offset <= data_.size() && size <= data_.size() - offset;
    }
    std::string_view string_at(std::uint64_t offset, std::uint64_t limit) const {
        if (offset >= limit || limit > data_.size()) return {};
        const char* begin = data_.data() + offset;
        const void* nul = std::memchr(begin, '\0', limit - offset);
        return nul ? std::string_view(begin, static_cast<const char*>(nul) - begin) : std::string_view{};
    }

private:
    const std::string& data_;
};

}  // namespace

std::optional<KernelResources> read_resources(const KernelImage& image, std::string_view function) {
    if (!image.is_cubin()) return std::nullopt;
    const Bytes bytes(image.data);
    Elf64_Ehdr header;
    if (!bytes.read(0, header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_machine != EM_CUDA || header.e_shentsize != sizeof(Elf64_Shdr) ||
        !bytes.contains(header.e_shoff, std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr)))
        return std::nullopt;
    auto section = [&](unsigned index, Elf64_Shdr& out) {
        return index < header.e_shnum && bytes.read(header.e_shoff + std::uint64_t{index} * sizeof(Elf64_Shdr), out);
    };
    Elf64_Shdr names;
    if (!section(header.e_shstrndx, names) || !bytes.contains(names.sh_offset, names.sh_size)) return std::nullopt;

    // The function's symbol index, and the one `.nv.info` section (the kernels' attributes by symbol).
    std::optional<std::uint32_t> symbol;
    std::optional<Elf64_Shdr> info;
    for (unsigned i = 0; i < header.e_shnum; ++i) {
        Elf64_Shdr s;
        if (!section(i, s)) return std::nullopt;
        if (s.sh_type == SHT_SYMTAB) {
            Elf64_Shdr strings;
            if (s.sh_entsize != sizeof(Elf64_Sym) || !section(s.sh_link, strings) || !bytes.contains(s.sh_offset, s.sh_size) ||
                !bytes.contains(strings.sh_offset, strings.sh_size))
                return std::nullopt;
            for (std::uint64_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); ++k) {
                Elf64_Sym sym;
                if (!bytes.read(s.sh_offset + k * sizeof(Elf64_Sym), sym)) return std::nullopt;
                if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC &&
                    bytes.string_at(strings.sh_offset + sym.st_name, strings.sh_offset + strings.sh_size) == function)
                    symbol = static_cast<std::uint32_t>(k);
            }
        } else if (bytes.string_at(names.sh_offset + s.sh_name, names.sh_offset + names.sh_size) == ".nv.info") {
            if (!bytes.contains(s.sh_offset, s.sh_size)) return std::nullopt;
            info = s;
        }
    }
    if (!symbol || !info) return std::nullopt;

    std::optional<std::uint32_t> registers, frame;  // for `symbol`
    for (std::uint64_t at = info->sh_offset, end = info->sh_offset + info->sh_size; at < end;) {
        std::uint8_t format, attribute;
        std::uint16_t half;
        if (end - at < 4 || !bytes.read(at, format) || !bytes.read(at + 1, attribute) || !bytes.read(at + 2, half))
            return std::nullopt;
        at += 4;
        if (format == kFormatNoValue || format == kFormatByte || format == kFormatHalf) continue;  // the u16 was all
        if (format != kFormatSized || end - at < half) return std::nullopt;
        std::uint32_t owner, value;
        if ((attribute == kAttributeFrameSize || attribute == kAttributeRegisterCount) && half == 8 && bytes.read(at, owner) &&
            bytes.read(at + 4, value) && owner == *symbol) {
            auto& slot = attribute == kAttributeRegisterCount ? registers : frame;
            if (slot) return std::nullopt;  // said twice: not the layout known
            slot = value;
        }
        at += half;
    }
    if (!registers || !frame || *registers == 0 || *registers > 255 || *frame > kMaxFrameBytes) return std::nullopt;
    return KernelResources{static_cast<int>(*registers), static_cast<int>(*frame)};
}

}  // namespace lossjit
