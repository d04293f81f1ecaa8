// semantics: the meaning of a program's reduction, shared by the kernel launch and the CPU reference.
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

}  // namespace lossjit
