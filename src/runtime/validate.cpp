// validate: the checks of what callers pass a Loss (validate.hpp).
#include "runtime/validate.hpp"

#include "cuda/driver.hpp"

namespace lossjit {

void check_count(std::span<const std::string> names, std::size_t count) {
    if (count == names.size()) return;
    throw UsageError(fmt::format("the program takes {} input{} ({}), but {} {} given", names.size(),
                                 names.size() == 1 ? "" : "s", fmt::join(names, ", "), count,
                                 count == 1 ? "was" : "were"));
}

std::vector<OperandShape> operand_shapes(std::span<const std::string> names, std::span<const TensorView> inputs) {
    check_count(names, inputs.size());
    std::vector<OperandShape> shapes;
    shapes.reserve(inputs.size());
    for (std::size_t k = 0; k < inputs.size(); ++k)
        shapes.push_back({names[k], inputs[k].shape.to_vector(), inputs[k].strides.to_vector()});
    return shapes;
}

void check_differentiable(const std::string& name, DType dtype) {
    if (!is_floating(dtype))
        throw UsageError(fmt::format("'{}' is {}: an integer or bool input has no gradient", name, to_string(dtype)));
}

void check_views(std::span<const std::string> names, std::span<const TensorView> views) {
    check_count(names, views.size());
    for (std::size_t k = 0; k < views.size(); ++k) check_data(names[k], views[k].dtype, views[k].data, views[k].numel());
}

void check_indices(const ir::Program& program, std::span<const TensorView> views) {
    const auto index = program.index_inputs();
    for (std::size_t k = 0; k < index.size() && k < views.size(); ++k) {
        if (index[k] && is_floating(views[k].dtype))
            throw UsageError(fmt::format("'{}' is an index (x[{}]) and must be of an integer dtype (int64, int32, uint8), "
                                         "not {}", program.inputs[k], program.inputs[k], to_string(views[k].dtype)));
    }
}

bool is_dense(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
    if (strides.empty()) return true;
    if (strides.size() != shape.size()) return false;
    const auto dense = contiguous_strides(Shape(shape.begin(), shape.end()));
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (shape[d] != 1 && strides[d] != dense[d]) return false;
    return true;
}

void check_gradients(std::span<const std::string> wrt, std::span<const int> slots, std::span<const OutputView> grads,
                     std::span<const TensorView> inputs, const Shape& shape) {
    for (std::size_t k = 0; k < wrt.size(); ++k) {
        const auto& input = inputs[static_cast<std::size_t>(slots[k])];
        const auto& g = grads[k];
        check_differentiable(wrt[k], input.dtype);
        check_data([&] { return fmt::format("the gradient of '{}'", wrt[k]); }, g.dtype, g.data, g.numel(), true);
        if (g.shape != input.shape || !is_dense(g.shape, g.strides))
            throw UsageError(fmt::format("the gradient of '{}' must be a contiguous tensor of its shape [{}]",
                                         wrt[k], fmt::join(input.shape, ", ")));
        // An input with fewer elements than the output is summed into: on the GPU its own view must
        // be contiguous (the columns loop reads it as one row).
        if (element_count(input.shape) != element_count(shape) && !is_dense(input.shape, input.strides))
            throw UnsupportedError(fmt::format("'{}' is broadcast to [{}] and not contiguous: its gradient on the GPU "
                                         "needs a contiguous tensor", wrt[k], fmt::join(shape, ", ")));
    }
}

DevicePointers::Range DevicePointers::check_pointer(const std::string& name, const void* data) const {
    int ordinal = -1;
    const auto address = reinterpret_cast<CUdeviceptr>(data);
    const CUresult r = cuda::api().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address);
    if (r != CUDA_SUCCESS) throw UsageError(fmt::format("{} is not CUDA device memory (a host pointer?)", name));
    if (ordinal != device_)
        throw UsageError(fmt::format("{} is memory of CUDA device {}, but this loss runs on device {}", name, ordinal,
                                     device_));
    CUdeviceptr start = 0;
    std::size_t size = 0;
    if (cuda::api().cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address) != CUDA_SUCCESS ||
        cuda::api().cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, address) != CUDA_SUCCESS)
        return {address, address + 1};  // the pointer alone, as before ranges were asked for
    return {static_cast<std::uintptr_t>(start), static_cast<std::uintptr_t>(start + size)};
}

}  // namespace lossjit
