// kinds: the dispatcher (kinds.hpp). Which kind a program is, and the entry points that hand each
// request to its kind.
#include "codegen/kinds/kinds.hpp"

#include <algorithm>

#include "lossjit/errors.hpp"

namespace lossjit {

KernelSpec KernelSpec::choose(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                              const Knobs& knobs, bool tuned, const GpuFacts& gpu) {
    KernelSpec spec = program.by_rows() ? kinds::choose_by_rows(program, layout, operands, knobs, tuned, gpu)
                                        : kinds::choose_elementwise(program, layout, operands, knobs, tuned, gpu);  // or the columns loop
    // The registers knob replaces the bound a kind chose, for every kind alike: blocks no more than
    // an SM holds (kMaxBlocksPerSm; threads: kMinRegisterBound keeps them within 2048). kMaxRegisters is
    // no bound at all, whatever the block (128 threads would otherwise ask for 2 blocks: 256 registers).
    if (knobs.max_registers > 0) {
        long long blocks = knobs.max_registers >= kMaxRegisters ? 1 : blocks_at_registers(knobs.max_registers, spec.block_threads);
        blocks = std::min<long long>(blocks, kMaxBlocksPerSm);
        if (gpu.threads_per_sm > 0) blocks = std::min<long long>(blocks, std::max(1, gpu.threads_per_sm / spec.block_threads));
        spec.min_blocks_per_sm = static_cast<int>(blocks);
    }
    return spec;
}

LaunchGrid plan_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                     const Occupancy& occupancy) {
    switch (spec.loop) {
        case KernelSpec::Loop::Rows:
        case KernelSpec::Loop::Strided: return kinds::elementwise_grid(program, spec, layout, occupancy);
        case KernelSpec::Loop::Columns: return kinds::columns_grid(program, spec, layout, occupancy);
        case KernelSpec::Loop::ByRow: return kinds::by_rows_grid(program, spec, layout, occupancy);
    }
    throw InternalError("plan_grid: invalid loop");
}

std::string emit_cuda(const ir::Program& program, const KernelSpec& spec) {
    if (program.by_rows()) return kinds::emit_by_rows(program, spec);
    return kinds::emit_elementwise(program, spec);  // and the columns loop's
}

}  // namespace lossjit
