// A kernel's parameters, in order: the one list from which the emitter prints the kernel's
// parameter list (every template's {{PARAMETER_LIST}}) and the host binds its arguments
// (LaunchArgs::bind). Their types are the ABI's (templates/abi.cuh).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline.hpp"

namespace lossjit {

struct KernelSpec;

enum class Parameter : unsigned char {
    Extents,     // lj::Extents extents: the collapsed dims
    Inputs,      // lj::Inputs<F::kInputs> in: the inputs' pointers and strides
    Param,       // double param_<name>: one per program parameter, in order
    Output,      // lj::Output out: where a map writes
    ReduceOut,   // lj::ReduceOut out: a reduction's partials, counter, result
    RowsOut,     // lj::RowsOut out: the same for a program of several totals, per total
    Grads,       // lj::Grads<G> grads: where the gradients go, and their scale
    SumScratch,  // lj::SumScratch sums: the partial sums of summed gradients
    Statistics,  // const double* statistics: the values of the statistics a program reads
                 // (ir::Program::statistics), computed on the device by their own kernels first
};

// Where a kernel takes a program parameter's value from: the caller's parameter's own kernel
// argument, or a statistic's slot of `statistics`.
std::string parameter_source(const ir::ParamDecl& param);

// The parameters of the kernel `spec` selects for `program`.
std::vector<Parameter> kernel_parameters(const ir::Program& program, const KernelSpec& spec);

// Their declarations as the kernel's parameter list; `functor` names the type that holds the
// kernel's constants (Element, RowProgram).
std::string parameter_list(std::span<const Parameter> parameters, const ir::Program& program, std::string_view functor);

}  // namespace lossjit
