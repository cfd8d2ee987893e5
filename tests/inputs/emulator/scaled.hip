// gfx950's scaled conversions (v_cvt_scalef32_*) as clang's builtins
// reach them, one lane per case: widening from codes and narrowing from
// values, with the byte and word selects, the MX scale of each lane, and
// stochastic rounding with a zero seed (which truncates).
#include <hip/hip_runtime.h>

typedef float v2f __attribute__((ext_vector_type(2)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef float v32f __attribute__((ext_vector_type(32)));
typedef _Float16 v2h __attribute__((ext_vector_type(2)));
typedef _Float16 v32h __attribute__((ext_vector_type(32)));
typedef __bf16 v2bf __attribute__((ext_vector_type(2)));
typedef short v2s __attribute__((ext_vector_type(2)));
typedef unsigned v6u __attribute__((ext_vector_type(6)));

template <typename T> __device__ unsigned bits(T value) { return __builtin_bit_cast(unsigned, value); }

// The tests build every file for gfx908 and gfx90a too: the kernels are
// empty there.
#if defined(__gfx950__) || !defined(__HIP_DEVICE_COMPILE__)
#define SCALED 1
#else
#define SCALED 0
#endif

// out: 16 dwords a lane; fp6: 6 dwords a lane; wide32: 32 dwords a lane.
extern "C" __global__ void scaled_widen(unsigned* out, float* wide32, const unsigned* codes, const unsigned* fp6,
                                        const float* scales) {
#if SCALED
  int l = threadIdx.x;
  unsigned c = codes[l];
  float s = scales[l];
  unsigned* o = out + 16 * l;
  o[0] = bits(__builtin_amdgcn_cvt_scalef32_f32_fp8(c, s, 0));
  o[1] = bits(__builtin_amdgcn_cvt_scalef32_f32_fp8(c, s, 3));
  o[2] = bits(__builtin_amdgcn_cvt_scalef32_f32_bf8(c, s, 2));
  v2f p = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(c, s, 1);
  o[3] = bits(p.x);
  o[4] = bits(p.y);
  o[5] = bits(__builtin_amdgcn_cvt_scalef32_pk_f16_fp8(c, s, true));
  o[6] = bits(__builtin_amdgcn_cvt_scalef32_pk_bf16_fp4(c, s, 3));
  v2h old = __builtin_bit_cast(v2h, 0x5a5a5a5au);
  o[7] = bits(__builtin_amdgcn_cvt_scalef32_f16_fp8(old, c, s, 1, true));
  v2f q = __builtin_amdgcn_cvt_scalef32_pk_f32_bf8(c, s, false);
  o[8] = bits(q.x);
  o[9] = bits(q.y);
  // (A vector of 6 takes 8 dwords in memory: the codes are read one by one.)
  v6u packed;
  for (int p = 0; p < 6; ++p) packed[p] = fp6[6 * l + p];
  v32f w = __builtin_amdgcn_cvt_scalef32_pk32_f32_fp6(packed, s);
  for (int e = 0; e < 32; ++e) wide32[32 * l + e] = w[e];
#endif
}

// out: 8 dwords a lane; fp6: 6 dwords a lane.
extern "C" __global__ void scaled_narrow(unsigned* out, unsigned* fp6, const float* a, const float* b,
                                         const float* scales) {
#if SCALED
  int l = threadIdx.x;
  float x = a[l], y = b[l], s = scales[l];
  unsigned old = 0x5a5a5a5au + l;
  unsigned* o = out + 8 * l;
  o[0] = bits(__builtin_amdgcn_cvt_scalef32_pk_fp8_f32(__builtin_bit_cast(v2s, old), x, y, s, true));
  o[1] = __builtin_amdgcn_cvt_scalef32_pk_fp4_f32(old, x, y, s, 2);
  v2h h = {(_Float16)x, (_Float16)y};
  o[2] = __builtin_amdgcn_cvt_scalef32_pk_fp4_f16(old, h, s, 1);
  v2bf g = {(__bf16)x, (__bf16)y};
  o[3] = bits(__builtin_amdgcn_cvt_scalef32_pk_bf8_bf16(__builtin_bit_cast(v2s, old), g, s, false));
  o[4] = __builtin_amdgcn_cvt_scalef32_sr_fp8_f32(old, x, 0u, s, 1);
  v2f pair = {x, y};
  o[5] = __builtin_amdgcn_cvt_scalef32_sr_pk_fp4_f32(old, pair, 0u, s, 3);
  // 32 values: this lane's pair and its neighbours', interleaved in two halves.
  v16f lo, hi;
  for (int e = 0; e < 16; ++e) {
    lo[e] = a[(l + e) % 64];
    hi[e] = b[(l + e) % 64];
  }
  v6u packed = __builtin_amdgcn_cvt_scalef32_2xpk16_fp6_f32(lo, hi, s);
  for (int p = 0; p < 6; ++p) fp6[6 * l + p] = packed[p];
#endif
}
