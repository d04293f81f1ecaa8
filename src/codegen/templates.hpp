// The files of templates/, embedded at build time (cmake/embed_templates.cmake).
#pragma once

#include <string_view>

namespace lossjit::templates {
extern const std::string_view abi_cuh;     // every kernel: the parameter structs (the host includes the file too)
extern const std::string_view prelude_cuh;  // every kernel, followed by dtype_cuh; then the pieces it uses:
extern const std::string_view dtype_cuh;
extern const std::string_view sum_sink_cuh;
extern const std::string_view grad_sink_cuh;
extern const std::string_view store_sink_cuh;
extern const std::string_view rows_cuh;
extern const std::string_view strided_cuh;
extern const std::string_view columns_cuh;
extern const std::string_view finish_cuh;
extern const std::string_view reduce_cu;
extern const std::string_view map_cu;
extern const std::string_view value_and_grad_cu;
extern const std::string_view value_and_grad_columns_cu;
extern const std::string_view accumulate_cuh;
extern const std::string_view by_rows_cuh;  // programs that reduce along rows (kinds/by_rows_emit.cpp)
extern const std::string_view row_runs_cuh;  // ... whose rows are two runs of memory (KernelSpec::row_split)
extern const std::string_view scatter_cuh;   // ... with gradients scattered into classes (RowGradient::Scattered)
extern const std::string_view by_rows_cu;
}  // namespace lossjit::templates
