#!/usr/bin/env python3
"""Stop 75: L2 eviction hints in a generated cross-entropy value + gradient kernel (row cache keeping
part of each row; the columns past the cache are read from memory in both walks).
 keep   first walk's loads of uncached columns evict_last, the second walk's reloads evict_first
 first  keep + the first walk's loads of cached columns evict_first (never read from memory again)
 store  first + the gradient's stores evict_first
 sonly  the gradient's stores evict_first alone
 none   unchanged (the hook's control)
Usage: edit_l2.py KERNEL.cu OUT.cu MODE"""
import re, sys
src, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(src).read()
HELP = r'''
namespace ljx {
__device__ __forceinline__ unsigned long long policy_last() { unsigned long long p; asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned long long policy_first() { unsigned long long p; asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ unsigned long long policy_normal() { unsigned long long p; asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ void ld4(const void* base, long long i, float (&v)[4], unsigned long long pol) {
    const float* p = static_cast<const float*>(base) + i;
    asm("ld.global.nc.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"(p), "l"(pol));
}
__device__ __forceinline__ void st4(void* base, long long i, const float (&v)[4], unsigned long long pol) {
    float* p = static_cast<float*>(base) + i;
    asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3]), "l"(pol) : "memory");
}
}
'''
LOAD = re.compile(r'(else )?lj::load_row<VW>\(dtype\(0\), in\.ptr\[0\], ((?:after_next_|next_)?base_?\[0\]) \+ j \* in\.strides\[0\]\[R - 1\], ([^;]*)\);')
STORE = 'lj::store_row<VW>(grad_dtype(0), grads.ptr[0], grad_base + lj::along_row<VW>(j, grads.strides[R - 1]), rg[0]);'
counts = {'reload': 0, 'first': 0, 'store': 0}
def load(m):
    if m.group(1):
        counts['reload'] += 1
        return f'else ljx::ld4(in.ptr[0], {m.group(2)} + j, {m.group(3)}, ljx::policy_first());'
    counts['first'] += 1
    cached = 'ljx::policy_first()' if mode in ('first', 'store') else 'ljx::policy_normal()'
    return (f'ljx::ld4(in.ptr[0], {m.group(2)} + j, {m.group(3)}, Team::template block_column<VW>(j) < cache_columns '
            f'? {cached} : ljx::policy_last());')
if mode != 'none':
    s = s.replace('struct RowProgram {', HELP + 'struct RowProgram {', 1)
    if mode in ('keep', 'first', 'store'):
        s = LOAD.sub(load, s)
    if mode in ('store', 'sonly'):
        counts['store'] = s.count(STORE)
        s = s.replace(STORE, 'ljx::st4(grads.ptr[0], grad_base + j, rg[0], ljx::policy_first());')
    if not counts['store'] and mode in ('store', 'sonly') or not counts['first'] and mode != 'sonly':
        raise SystemExit(f'nothing replaced: {counts}')
open(out, 'w').write(s)
print(out, counts)
