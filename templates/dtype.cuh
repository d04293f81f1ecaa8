// ---- element types: loads that widen to the program's value type, stores that round ----------
// The numbers (kFloat32, ...) are the ABI's (abi.cuh); src/codegen/emit.cpp names them.
// Loads and stores take the dtype as a value, not a template argument: the loops call them with
// Element::dtype(k) inside unrolled loops over k, where it is a constant after unrolling, and the
// switch folds away. The rounding is what the CPU reference does (src/runtime/dtype.cpp).
namespace lj {

__device__ __forceinline__ float bf16_to_float(unsigned int bits) { return __uint_as_float(bits << 16); }
__device__ __forceinline__ float f16_to_float(unsigned int bits) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)bits));
    return f;
}
// Round to nearest even, as the host's float_to_bfloat16; a NaN stays a NaN.
__device__ __forceinline__ unsigned int float_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    const unsigned int b = __float_as_uint(f);
    if (f != f) return (b >> 16) | 0x40u;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
#endif
}
__device__ __forceinline__ unsigned int float_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// The bytes of one element of type `dt`.
__device__ __forceinline__ int dtype_size(int dt) {
    switch (dt) {
        case kFloat64: case kInt64: return 8;
        case kFloat32: case kInt32: return 4;
        case kBFloat16: case kFloat16: return 2;
        default: return 1;
    }
}

// Element i of `p`, of type `dt`, as a T (float or double). Integers convert with rounding to
// nearest, bools to 0 or 1.
template <class T>
__device__ __forceinline__ T load1(int dt, const void* p, long long i) {
    switch (dt) {
        case kFloat32: return (T)__ldg(static_cast<const float*>(p) + i);
        case kFloat64: return (T)__ldg(static_cast<const double*>(p) + i);
        case kBFloat16: return (T)bf16_to_float(__ldg(static_cast<const unsigned short*>(p) + i));
        case kFloat16: return (T)f16_to_float(__ldg(static_cast<const unsigned short*>(p) + i));
        case kInt32: return (T)__ldg(static_cast<const int*>(p) + i);
        case kInt64: return (T)__ldg(static_cast<const long long*>(p) + i);
        case kUInt8: return (T)__ldg(static_cast<const unsigned char*>(p) + i);
        default: return __ldg(static_cast<const unsigned char*>(p) + i) != 0 ? T(1) : T(0);
    }
}

// Elements i .. i+3 in as few loads as the type allows (one of 4 to 16 bytes; two of 16 for 8-byte
// types). i is a multiple of 4 and the row 4-element aligned (checked at launch: vector_alignment).
template <class T>
__device__ __forceinline__ void load4(int dt, const void* p, long long i, T (&v)[4]) {
    switch (dt) {
        case kFloat32: {
            const float4 q = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(p) + i));
            v[0] = (T)q.x, v[1] = (T)q.y, v[2] = (T)q.z, v[3] = (T)q.w;
            return;
        }
        case kFloat64: {
            const double2 a = __ldg(reinterpret_cast<const double2*>(static_cast<const double*>(p) + i));
            const double2 b = __ldg(reinterpret_cast<const double2*>(static_cast<const double*>(p) + i + 2));
            v[0] = (T)a.x, v[1] = (T)a.y, v[2] = (T)b.x, v[3] = (T)b.y;
            return;
        }
        case kBFloat16: {
            const uint2 q = __ldg(reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(p) + i));
            v[0] = (T)__uint_as_float(q.x << 16), v[1] = (T)__uint_as_float(q.x & 0xffff0000u);
            v[2] = (T)__uint_as_float(q.y << 16), v[3] = (T)__uint_as_float(q.y & 0xffff0000u);
            return;
        }
        case kFloat16: {
            const uint2 q = __ldg(reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(p) + i));
            v[0] = (T)f16_to_float(q.x & 0xffffu), v[1] = (T)f16_to_float(q.x >> 16);
            v[2] = (T)f16_to_float(q.y & 0xffffu), v[3] = (T)f16_to_float(q.y >> 16);
            return;
        }
        case kInt32: {
            const int4 q = __ldg(reinterpret_cast<const int4*>(static_cast<const int*>(p) + i));
            v[0] = (T)q.x, v[1] = (T)q.y, v[2] = (T)q.z, v[3] = (T)q.w;
            return;
        }
        case kInt64: {
            const longlong2 a = __ldg(reinterpret_cast<const longlong2*>(static_cast<const long long*>(p) + i));
            const longlong2 b = __ldg(reinterpret_cast<const longlong2*>(static_cast<const long long*>(p) + i + 2));
            v[0] = (T)a.x, v[1] = (T)a.y, v[2] = (T)b.x, v[3] = (T)b.y;
            return;
        }
        default: {  // uint8, bool: one 4-byte load
            const unsigned int q = __ldg(reinterpret_cast<const unsigned int*>(static_cast<const unsigned char*>(p) + i));
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const unsigned int byte = (q >> (8 * j)) & 0xffu;
                v[j] = dt == kBool ? (byte != 0 ? T(1) : T(0)) : (T)byte;
            }
            return;
        }
    }
}

// Stores x at element i of `p`, of floating type `dt` (the runtime refuses other outputs). float64
// values bound for a 16-bit type go through float32, as the host's store_from_double does.
template <class T>
__device__ __forceinline__ void store1(int dt, void* p, long long i, T x) {
    switch (dt) {
        case kFloat64: static_cast<double*>(p)[i] = (double)x; return;
        case kBFloat16: static_cast<unsigned short*>(p)[i] = (unsigned short)float_to_bf16((float)x); return;
        case kFloat16: static_cast<unsigned short*>(p)[i] = (unsigned short)float_to_f16((float)x); return;
        default: static_cast<float*>(p)[i] = (float)x; return;
    }
}

template <class T>
__device__ __forceinline__ void store4(int dt, void* p, long long i, const T (&x)[4]) {
    switch (dt) {
        case kFloat64: {
            double2* q = reinterpret_cast<double2*>(static_cast<double*>(p) + i);
            q[0] = make_double2((double)x[0], (double)x[1]);
            q[1] = make_double2((double)x[2], (double)x[3]);
            return;
        }
        case kBFloat16:
            *reinterpret_cast<uint2*>(static_cast<unsigned short*>(p) + i) =
                make_uint2(float_to_bf16((float)x[0]) | (float_to_bf16((float)x[1]) << 16),
                           float_to_bf16((float)x[2]) | (float_to_bf16((float)x[3]) << 16));
            return;
        case kFloat16:
            *reinterpret_cast<uint2*>(static_cast<unsigned short*>(p) + i) =
                make_uint2(float_to_f16((float)x[0]) | (float_to_f16((float)x[1]) << 16),
                           float_to_f16((float)x[2]) | (float_to_f16((float)x[3]) << 16));
            return;
        default:
            *reinterpret_cast<float4*>(static_cast<float*>(p) + i) =
                make_float4((float)x[0], (float)x[1], (float)x[2], (float)x[3]);
            return;
    }
}

// Elements i .. i+7 of a type of 2 bytes or fewer in one access (16 bytes of bfloat16 or float16, 8
// of uint8 or bool); i is a multiple of 8 and the row 8-element aligned (vector_alignment).
template <class T>
__device__ __forceinline__ void load8_narrow(int dt, const void* p, long long i, T (&v)[8]) {
    if (dt == kBFloat16 || dt == kFloat16) {
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(p) + i));
        const unsigned int w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int h = 0; h < 4; ++h) {
            if (dt == kBFloat16) {
                v[2 * h] = (T)__uint_as_float(w[h] << 16), v[2 * h + 1] = (T)__uint_as_float(w[h] & 0xffff0000u);
            } else {
                v[2 * h] = (T)f16_to_float(w[h] & 0xffffu), v[2 * h + 1] = (T)f16_to_float(w[h] >> 16);
            }
        }
    } else {  // uint8, bool: one 8-byte load
        const uint2 q = __ldg(reinterpret_cast<const uint2*>(static_cast<const unsigned char*>(p) + i));
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned int byte = ((j < 4 ? q.x : q.y) >> (8 * (j & 3))) & 0xffu;
            v[j] = dt == kBool ? (byte != 0 ? T(1) : T(0)) : (T)byte;
        }
    }
}

// The bits of VW elements as loaded, before conversion: element j of a type of s bytes lives in words
// j*s/4 .. (s >= 4), or in the (j mod 4/s)-th part of word j*s/4 (s < 4). Words a type does not
// use are never written, and cost no registers. The rows loop loads a whole tile this way and
// converts each element only when it is used: converted at load time, eight 16-bit elements take
// eight registers instead of four, and a tile of them cuts the blocks an SM holds.
template <int VW>
struct Raw {
    unsigned int w[VW * 2];
};

template <int VW>
__device__ __forceinline__ void load_raw(int dt, const void* p, long long i, Raw<VW>& r) {
    static_assert(VW % 4 == 0, "raw loads are vector loads");
    switch (dt) {
        case kFloat32: case kInt32:
#pragma unroll
            for (int q = 0; q < VW / 4; ++q) {
                const uint4 a = __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned int*>(p) + i) + q);
                r.w[4 * q] = a.x, r.w[4 * q + 1] = a.y, r.w[4 * q + 2] = a.z, r.w[4 * q + 3] = a.w;
            }
            return;
        case kFloat64: case kInt64:
#pragma unroll
            for (int q = 0; q < VW / 2; ++q) {
                const uint4 a = __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned long long*>(p) + i) + q);
                r.w[4 * q] = a.x, r.w[4 * q + 1] = a.y, r.w[4 * q + 2] = a.z, r.w[4 * q + 3] = a.w;
            }
            return;
        case kBFloat16: case kFloat16:
            if (VW == 4) {
                const uint2 a = __ldg(reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(p) + i));
                r.w[0] = a.x, r.w[1] = a.y;
            } else {
#pragma unroll
                for (int q = 0; q < VW / 8; ++q) {
                    const uint4 a = __ldg(reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(p) + i) + q);
                    r.w[4 * q] = a.x, r.w[4 * q + 1] = a.y, r.w[4 * q + 2] = a.z, r.w[4 * q + 3] = a.w;
                }
            }
            return;
        default:  // uint8, bool
            if (VW == 4) {
                r.w[0] = __ldg(reinterpret_cast<const unsigned int*>(static_cast<const unsigned char*>(p) + i));
            } else {
#pragma unroll
                for (int q = 0; q < VW / 8; ++q) {
                    const uint2 a = __ldg(reinterpret_cast<const uint2*>(static_cast<const unsigned char*>(p) + i) + q);
                    r.w[2 * q] = a.x, r.w[2 * q + 1] = a.y;
                }
            }
            return;
    }
}

// Element j of raw bits loaded by load_raw, as a T; the same values as load1 gives.
template <int VW, class T>
__device__ __forceinline__ T unpack(int dt, const Raw<VW>& r, int j) {
    switch (dt) {
        case kFloat32: return (T)__uint_as_float(r.w[j]);
        case kInt32: return (T)(int)r.w[j];
        case kFloat64:
            return (T)__longlong_as_double((long long)(((unsigned long long)r.w[2 * j + 1] << 32) | r.w[2 * j]));
        case kInt64: return (T)(long long)(((unsigned long long)r.w[2 * j + 1] << 32) | r.w[2 * j]);
        case kBFloat16: return (T)__uint_as_float(j % 2 == 0 ? r.w[j / 2] << 16 : r.w[j / 2] & 0xffff0000u);
        case kFloat16: return (T)f16_to_float(j % 2 == 0 ? r.w[j / 2] & 0xffffu : r.w[j / 2] >> 16);
        default: {
            const unsigned int byte = (r.w[j / 4] >> (8 * (j % 4))) & 0xffu;
            return dt == kBool ? (byte != 0 ? T(1) : T(0)) : (T)byte;
        }
    }
}

// VW elements from i: VW == 1 element by element; VW a multiple of 4 in vector accesses of up to 16
// bytes (VW == 8: one for types of 2 bytes or fewer, else groups of four as load4). i is a multiple
// of VW and the row VW-element aligned (KernelSpec::choose checks: vector_alignment).
template <int VW, class T>
__device__ __forceinline__ void load_row(int dt, const void* p, long long i, T (&v)[VW]) {
    static_assert(VW == 1 || VW % 4 == 0, "vector width 1 or a multiple of 4");
    if constexpr (VW == 4) {
        load4<T>(dt, p, i, v);
    } else if constexpr (VW == 1) {
        v[0] = load1<T>(dt, p, i);
    } else {
        if (VW == 8 && (dt == kBFloat16 || dt == kFloat16 || dt == kUInt8 || dt == kBool)) {
            load8_narrow<T>(dt, p, i, reinterpret_cast<T(&)[8]>(v));
        } else {
#pragma unroll
            for (int q = 0; q < VW / 4; ++q) load4<T>(dt, p, i + 4 * q, reinterpret_cast<T(&)[4]>(v[4 * q]));
        }
    }
}
template <int VW, class T>
__device__ __forceinline__ void store_row(int dt, void* p, long long i, const T (&x)[VW]) {
    static_assert(VW == 1 || VW % 4 == 0, "vector width 1 or a multiple of 4");
    if constexpr (VW == 4) {
        store4<T>(dt, p, i, x);
    } else if constexpr (VW == 1) {
        store1<T>(dt, p, i, x[0]);
    } else {
        if (VW == 8 && (dt == kBFloat16 || dt == kFloat16)) {  // one 16-byte store
            unsigned int w[4];
#pragma unroll
            for (int h = 0; h < 4; ++h)
                w[h] = dt == kBFloat16 ? float_to_bf16((float)x[2 * h]) | (float_to_bf16((float)x[2 * h + 1]) << 16)
                                       : float_to_f16((float)x[2 * h]) | (float_to_f16((float)x[2 * h + 1]) << 16);
            *reinterpret_cast<uint4*>(static_cast<unsigned short*>(p) + i) = make_uint4(w[0], w[1], w[2], w[3]);
        } else {
#pragma unroll
            for (int q = 0; q < VW / 4; ++q) store4<T>(dt, p, i + 4 * q, reinterpret_cast<const T(&)[4]>(x[4 * q]));
        }
    }
}

}  // namespace lj
