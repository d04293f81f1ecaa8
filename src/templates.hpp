// The files of templates/, embedded at build time (cmake/embed_templates.cmake).
#pragma once

#include <string_view>

namespace lossjit::templates {
extern const std::string_view prelude_cuh;
extern const std::string_view reduce_cu;
extern const std::string_view map_cu;
extern const std::string_view value_and_grad_cu;
extern const std::string_view value_and_grad_columns_cu;
extern const std::string_view accumulate_cuh;
}  // namespace lossjit::templates
