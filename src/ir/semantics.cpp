// semantics: what a program means beyond its nodes (what its reduction divides by, the dtype of its
// output), shared by the kernel launch and the CPU reference.
#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {

double reduction_divisor(const ir::Program& program, const Shape& shape) {
    switch (program.reduction) {
        case ir::Reduction::Sum: return 1.0;
        case ir::Reduction::Mean: return static_cast<double>(element_count(shape));
        case ir::Reduction::BatchMean:
            if (shape.empty())
                throw UsageError("batchmean divides by the size of dimension 0, but the inputs are scalars");
            return static_cast<double>(shape[0]);
        case ir::Reduction::None: break;
    }
    throw InternalError("reduction_divisor called for a map");
}

double gradient_scale(const ir::Program& program, const Shape& shape) { return 1.0 / reduction_divisor(program, shape); }

DType default_output_dtype(const ir::Program& program, std::span<const TensorView> inputs) {
    std::vector<DType> dtypes;
    for (int slot : read_inputs(program))
        if (static_cast<std::size_t>(slot) < inputs.size()) dtypes.push_back(inputs[static_cast<std::size_t>(slot)].dtype);
    return result_dtype(dtypes);
}

}  // namespace lossjit
