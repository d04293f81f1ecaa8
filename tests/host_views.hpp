// What the tests of the CPU reference share: host float64 vectors as views, and a map's output on
// the reference as a flat vector.
#pragma once

#include <span>
#include <vector>

#include "lossjit/lossjit.hpp"

namespace lossjit_test {

inline lossjit::TensorView view(const std::vector<double>& v, lossjit::Shape shape) {
    return lossjit::TensorView{v.data(), lossjit::DType::float64, shape, {}};
}

inline std::vector<double> map_of(const lossjit::Loss& loss, std::span<const lossjit::TensorView> inputs) {
    const lossjit::Shape shape = loss.output_shape(inputs);
    std::vector<double> out(static_cast<std::size_t>(lossjit::element_count(shape)));
    loss.reference_map(inputs, lossjit::OutputView{out.data(), lossjit::DType::float64, shape, {}});
    return out;
}

}  // namespace lossjit_test
