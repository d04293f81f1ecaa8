# Stop 78's harness variants (rounds 269-271), each a hand edit of main's printed cross-entropy value +
# gradient kernel for an H200 at 16384 x 32768 (ce_now.cuh, as build.sh prints it): the kernel renamed,
# and a translation unit that launches it (tu_<name>.cu, launch_<name>).
#   nb: the next row's index loaded after the row's merges, as the hand-written C loads it
#   ns: the gradient's seed a RowProgram member the kernel sets once (the printer's change tried in
#       this stop, reverted: its kernel is this one)
#   nq: the seed read once by the kernel into shared memory, each row reading it there
#   nx: the seed without its loads (grads.scale[0]: right only where upstream and factor are null)
# Usage (in the folder holding ce_now.cuh): python3 make_variants.py
SEED = '        const Value seed_ = (Value)grads.total_scale(0);\n'


def nb(s):
    s = s.replace('''        long long next_base_[2] = {};
        if (refill_) {
            long long next_c[lj::kMaxRank];''', '''        long long next_base_[2] = {};
        long long next_index_at_ = 0;
        if (refill_) {
            long long next_c[lj::kMaxRank];''')
    s = edit(s, '''            next_base_[0] = lj::offset<R - 1>(next_c, in.strides[0]);
            ahead.index1 = lj::load_index(dtype(1), in.ptr[1], lj::offset<R - 1>(next_c, in.strides[1]));
        }''', '''            next_base_[0] = lj::offset<R - 1>(next_c, in.strides[0]);
            next_index_at_ = lj::offset<R - 1>(next_c, in.strides[1]);
        }''')
    return edit(s, '''            r1_ = a1.value();
        }''', '''            r1_ = a1.value();
        }
        if (refill_) ahead.index1 = lj::load_index(dtype(1), in.ptr[1], next_index_at_);  // nb: after the merges''')


def ns(s):
    s = edit(s, SEED, '')
    s = edit(s, '    static constexpr int kTotals = 1;\n',
             '    static constexpr int kTotals = 1;\n    Value seed_;  // upstream gradient / divisor (times its factor)\n')
    return edit(s, 'const RowProgram program{  };', 'const RowProgram program{ (RowProgram::Value)grads.total_scale(0) };')


def nq(s):
    s = edit(s, SEED, '        const Value seed_ = seed_smem_;  // nq: read once by the kernel, kept in shared memory\n')
    s = edit(s, '''    double totals[RowProgram::kTotals] = {};
    __shared__ double team_totals''', '''    if (threadIdx.x == 0) seed_smem_ = (float)grads.total_scale(0);  // nq (the barrier below publishes it)
    double totals[RowProgram::kTotals] = {};
    __shared__ double team_totals''')
    return s.replace('struct RowProgram {', '__shared__ float seed_smem_;  // nq\nstruct RowProgram {', 1)


def nx(s):
    return edit(s, SEED, '        const Value seed_ = (Value)grads.scale[0];  // nx: the seed without its loads (upstream and factor null here)\n')


def edit(s, old, new):
    if s.count(old) != 1:
        raise SystemExit(f'ce_now.cuh is not the kernel these edits expect: {old[:60]!r}')
    return s.replace(old, new)


TU = '''#include "k_{v}.cuh"
#include <cuda_runtime.h>
void launch_{v}(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr) {{
    static bool set = false;
    if (!set) {{
        cudaFuncSetAttribute(lossjit_kernel_{v}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        set = true;
    }}
    lossjit_kernel_{v}<<<grid, block, smem>>>(ex, in, out, gr);
}}
'''
now = open('ce_now.cuh').read()
for name, make in (('nb', nb), ('ns', ns), ('nq', nq), ('nx', nx)):
    open(f'k_{name}.cuh', 'w').write(make(now).replace('lossjit_kernel(', f'lossjit_kernel_{name}('))
    open(f'tu_{name}.cu', 'w').write(TU.format(v=name))
