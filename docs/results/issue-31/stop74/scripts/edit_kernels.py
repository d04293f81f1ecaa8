#!/usr/bin/env python3
"""Rounds 248-249: hand edits of a generated cross-entropy value + gradient kernel (`lossjit emit ...
--grad x`), each written beside it, for LJX_PATCH (exp74.patch: a kernel whose variant line matches a
file's is compiled from the file).

  stcs   the gradient stored with __stcs (streaming, evict-first) instead of lj::store_row
  take   x[y] picked in the gradient's walk by the lane holding it (added to its own per-thread total)
         instead of loaded from memory after the first walk; __maxnreg__(96) (ptxas had chosen 64
         registers and spilled)
  merge  the row's logsumexp merged with one block barrier (the warps' (max, sum) double-buffered by
         the row's parity) instead of Team::all_reduce's two-phase merge (two barriers)
  all    the three

Usage: edit_kernels.py KERNEL.cu PARITY   (PARITY: bulk_parity_ for the bulk-copied cache,
take_parity_ for main's walk ahead; only `merge` applies to the latter)"""
import sys

STORE = 'lj::store_row<VW>(grad_dtype(0), grads.ptr[0], grad_base + lj::along_row<VW>(j, grads.strides[R - 1]), rg[0]);'
STCS = ('__stcs(reinterpret_cast<float4*>(static_cast<float*>(grads.ptr[0]) + grad_base + j), '
        'make_float4(rg[0][0], rg[0][1], rg[0][2], rg[0][3]));')
TAKE_LOAD = '''            if (i_y >= 0 && i_y < C) {
                const long long j = i_y, col = j;
                const Value x_x = lj::load1<Value>(dtype(0), in.ptr[0], base[0] + j * in.strides[0][R - 1]);
                n3 = x_x;
            }
'''
GRAD = '                            rg[0][q] = (Value)((hot_y ? n6 : 0.0f) + (seed_ * exp(x_x - n1)));'
ROW_TOTAL = '            row_totals[0] += (double)(n4);'
MERGE = '            a1 = Team::all_reduce(a1);'
ONE_BARRIER = '''            {  // one barrier: warps' (max, sum) double-buffered by the row's parity
                float m_ = a1.m;
                #pragma unroll
                for (int o = 16; o > 0; o >>= 1) m_ = fmaxf(m_, __shfl_xor_sync(0xffffffffu, m_, o));
                double s_ = a1.m == m_ ? a1.s : a1.s * (double)exp(a1.m - m_);
                #pragma unroll
                for (int o = 16; o > 0; o >>= 1) s_ += __shfl_xor_sync(0xffffffffu, s_, o);
                __shared__ float pm_[2][32];
                __shared__ double ps_[2][32];
                const int b_ = (int)(PARITY);
                if ((threadIdx.x & 31) == 0) { pm_[b_][threadIdx.x >> 5] = m_; ps_[b_][threadIdx.x >> 5] = s_; }
                __syncthreads();
                constexpr int kW = Team::kTeam / 32;
                const int l_ = threadIdx.x & 31;
                const float wm = l_ < kW ? pm_[b_][l_] : -__int_as_float(0x7f800000);
                const double ws = l_ < kW ? ps_[b_][l_] : 0.0;
                float M_ = wm;
                #pragma unroll
                for (int o = 16; o > 0; o >>= 1) M_ = fmaxf(M_, __shfl_xor_sync(0xffffffffu, M_, o));
                double S_ = wm == M_ ? ws : ws * (double)exp(wm - M_);
                #pragma unroll
                for (int o = 16; o > 0; o >>= 1) S_ += __shfl_xor_sync(0xffffffffu, S_, o);
                a1.m = M_;
                a1.s = S_;
            }'''


def replace(s, old, new, count):
    if s.count(old) != count:
        raise SystemExit(f"expected {count} of {old[:60]!r}, found {s.count(old)}")
    return s.replace(old, new)


def stcs(s):
    return replace(s, STORE, STCS, 2)


def take(s):
    s = replace(s, TAKE_LOAD, '', 1)
    s = replace(s, GRAD, GRAD + '\n                            if (hot_y) totals[0] -= (double)x_x;', 2)
    s = replace(s, ROW_TOTAL, '            row_totals[0] += (double)(n1);', 1)
    return s.replace('extern "C" __global__ void __launch_bounds__(512)', 'extern "C" __global__ void __maxnreg__(96)')


def merge(s, parity):
    return replace(s, MERGE, ONE_BARRIER.replace('PARITY', parity), 1)


if __name__ == "__main__":
    path, parity = sys.argv[1], sys.argv[2]
    src = open(path).read()
    stem = path[:-3]
    open(f"{stem}_merge.cu", "w").write(merge(src, parity))
    if parity == "bulk_parity_":
        open(f"{stem}_stcs.cu", "w").write(stcs(src))
        open(f"{stem}_take.cu", "w").write(take(src))
        open(f"{stem}_all.cu", "w").write(merge(take(stcs(src)), parity))
