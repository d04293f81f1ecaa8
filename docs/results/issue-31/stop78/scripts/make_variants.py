# Stop 78's harness variants (rounds 269-271), each a hand edit of main's printed cross-entropy value +
# gradient kernel for an H200 at 16384 x 32768 (ce_now.cuh, as build.sh prints it): the kernel renamed,
# and a translation unit that launches it (tu_<name>.cu, launch_<name>).
#   nb: the next row's index loaded after the row's merges, as the hand-written C loads it
#   ns: the gradient's seed a RowProgram member the kernel sets once (the printer's change tried in
#       this stop, reverted: its kernel is this one)
#   nq: the seed read once by the kernel into shared memory, each row reading it there
#   nx: the seed without its loads (grads.scale[0]: right only where upstream and factor are null)
#   nc, nd, ne: prepared after round 271 for round 274 (below)
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


# Prepared after round 271, not run (r274.sh): what C does in its once-a-row code, with the seed read
# once and no register held across the row for the row after next.
#   nc: nb + nq (the index after the merges, the seed in shared memory) + the row after next's base
#       computed where its first tile is loaded, at the row's end
#   nd: nq + the row after next's base computed at the row's end (the index where main loads it)
def late_after_next(s):
    s = edit(s, '''        long long after_next_base_[2] = {};
        if (after_next_row_ < rows_) {
            long long after_c[lj::kMaxRank];
            lj::coords<R - 1>(e, after_next_row_, after_c);
            after_next_base_[0] = lj::offset<R - 1>(after_c, in.strides[0]);
        }
''', '')
    return edit(s, '''            if (after_next_row_ < rows_) {  // the row after next's first tile, in flight across the next row's merges
''', '''            if (after_next_row_ < rows_) {  // the row after next's first tile, in flight across the next row's merges
                long long after_next_base_[2] = {};
                long long after_c[lj::kMaxRank];
                lj::coords<R - 1>(e, after_next_row_, after_c);
                after_next_base_[0] = lj::offset<R - 1>(after_c, in.strides[0]);
''')


def nc(s):
    return late_after_next(nq(nb(s)))


def nd(s):
    return late_after_next(nq(s))


for name, make in (('nc', nc), ('nd', nd)):
    open(f'k_{name}.cuh', 'w').write(make(now).replace('lossjit_kernel(', f'lossjit_kernel_{name}('))
    open(f'tu_{name}.cu', 'w').write(TU.format(v=name))


#   ne: as printer_ne.patch prints it: the next row's index loaded at the start of the gradient's
#       pass (after the merges, as nb, a few statements later), the seed a RowProgram member (ns), the
#       row after next's base at the row's end
def ne(s):
    s = edit(s, '''        long long next_base_[2] = {};
        if (refill_) {
            long long next_c[lj::kMaxRank];''', '''        long long next_base_[2] = {};
        long long next_at_1 = 0;
        if (refill_) {
            long long next_c[lj::kMaxRank];''')
    s = edit(s, '''            ahead.index1 = lj::load_index(dtype(1), in.ptr[1], lj::offset<R - 1>(next_c, in.strides[1]));
''', '''            next_at_1 = lj::offset<R - 1>(next_c, in.strides[1]);
''')
    s = edit(s, '''            ahead.a1 = {};  // the next row's first walk starts
''', '''            if (refill_) {
                ahead.index1 = lj::load_index(dtype(1), in.ptr[1], next_at_1);
            }
            ahead.a1 = {};  // the next row's first walk starts
''')
    return late_after_next(ns(s))


for name, make in (('ne', ne),):
    open(f'k_{name}.cuh', 'w').write(make(now).replace('lossjit_kernel(', f'lossjit_kernel_{name}('))
    open(f'tu_{name}.cu', 'w').write(TU.format(v=name))
