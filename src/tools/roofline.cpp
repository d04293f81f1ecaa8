#include "tools/roofline.hpp"

#include <string_view>

#include "jit/compile.hpp"

namespace lossjit {
namespace templates {
extern const std::string_view roofline_cu;  // generated from roofline.cu by cmake/embed_templates.cmake
}

std::unique_ptr<cuda::Module> load_roofline(std::shared_ptr<cuda::Context> context, const std::string& target) {
    const KernelImage image = compile_cuda(std::string(templates::roofline_cu), target);
    return std::make_unique<cuda::Module>(std::move(context), image.data);
}

}  // namespace lossjit
