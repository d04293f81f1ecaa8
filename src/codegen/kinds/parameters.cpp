// parameters: the kernel's parameter list (parameters.hpp).
#include "codegen/kinds/parameters.hpp"

#include <fmt/format.h>

#include "codegen/kernel_spec.hpp"
#include "ir/print.hpp"
#include "lossjit/errors.hpp"

namespace lossjit {

std::vector<Parameter> kernel_parameters(const ir::Program& program, const KernelSpec& spec) {
    std::vector<Parameter> list{Parameter::Extents, Parameter::Inputs};
    for (const auto& p : program.params)
        if (p.statistic < 0) list.push_back(Parameter::Param);
    const bool map_forward = program.is_map() && program.derivatives.empty();
    if (map_forward) list.push_back(Parameter::Output);
    else if (spec.loop == KernelSpec::Loop::ByRow) list.push_back(program.is_map() ? Parameter::Output : Parameter::RowsOut);
    else list.push_back(Parameter::ReduceOut);
    if (!program.derivatives.empty()) list.push_back(Parameter::Grads);
    if (spec.sums()) list.push_back(Parameter::SumScratch);
    if (program.reads_statistics()) list.push_back(Parameter::Statistics);
    return list;
}

std::string parameter_source(const ir::ParamDecl& param) {
    return param.statistic >= 0 ? fmt::format("statistics[{}]", param.statistic) : cuda_param_name(param.name);
}

std::string parameter_list(std::span<const Parameter> parameters, const ir::Program& program, std::string_view functor) {
    std::string out;
    std::size_t param = 0;
    for (const Parameter p : parameters) {
        std::string declaration;
        switch (p) {
            case Parameter::Extents: declaration = "const lj::Extents extents"; break;
            case Parameter::Inputs: declaration = fmt::format("const lj::Inputs<{}::kInputs> in", functor); break;
            case Parameter::Param:
                // Passed as double whatever the program computes in; converted once per thread.
                declaration = fmt::format("const double {}", cuda_param_name(program.params.at(param++).name));
                break;
            case Parameter::Output: declaration = "const lj::Output out"; break;
            case Parameter::ReduceOut: declaration = "const lj::ReduceOut out"; break;
            case Parameter::RowsOut: declaration = "const lj::RowsOut out"; break;
            case Parameter::Grads: declaration = fmt::format("const lj::Grads<{}::kGrads> grads", functor); break;
            case Parameter::SumScratch: declaration = "const lj::SumScratch sums"; break;
            case Parameter::Statistics: declaration = "const double* __restrict__ statistics"; break;
        }
        // The extents and inputs on the first line, each other parameter on a line of its own.
        out += out.empty() ? "" : p == Parameter::Inputs ? ", " : ",\n    ";
        out += declaration;
    }
    // The caller's parameters are the first ones (statistics come after them).
    while (param < program.params.size() && program.params[param].statistic >= 0) ++param;
    if (param != program.params.size()) throw InternalError("kernel parameters and program parameters disagree");
    return out;
}

}  // namespace lossjit
