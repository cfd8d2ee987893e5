// 8-bit float conversions (gfx940+): every lane converts its inputs with
// the builtins HIP's fp8 types use; the test compares with the formats'
// definitions (FNUZ on MI300, OCP on gfx950).
#include <hip/hip_runtime.h>

typedef float Float2 __attribute__((ext_vector_type(2)));

// The kernels are empty on processors without the conversions (the test
// library builds every source for gfx908 and gfx90a too).
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define FP8 1
#else
#define FP8 0
#endif

// Each byte of In[L] to f32, fp8 and bf8.
extern "C" __global__ void fp8_decode(float *Fp8, float *Bf8, const int *In) {
#if FP8
  int L = threadIdx.x, V = In[L];
  Fp8[4 * L + 0] = __builtin_amdgcn_cvt_f32_fp8(V, 0);
  Fp8[4 * L + 1] = __builtin_amdgcn_cvt_f32_fp8(V, 1);
  Fp8[4 * L + 2] = __builtin_amdgcn_cvt_f32_fp8(V, 2);
  Fp8[4 * L + 3] = __builtin_amdgcn_cvt_f32_fp8(V, 3);
  Bf8[4 * L + 0] = __builtin_amdgcn_cvt_f32_bf8(V, 0);
  Bf8[4 * L + 1] = __builtin_amdgcn_cvt_f32_bf8(V, 1);
  Bf8[4 * L + 2] = __builtin_amdgcn_cvt_f32_bf8(V, 2);
  Bf8[4 * L + 3] = __builtin_amdgcn_cvt_f32_bf8(V, 3);
#endif
}

// Each word of In[L] to two f32.
extern "C" __global__ void fp8_decode_packed(float *Fp8, float *Bf8, const int *In) {
#if FP8
  int L = threadIdx.x, V = In[L];
  Float2 Low = __builtin_amdgcn_cvt_pk_f32_fp8(V, false), High = __builtin_amdgcn_cvt_pk_f32_fp8(V, true);
  Fp8[4 * L + 0] = Low.x;
  Fp8[4 * L + 1] = Low.y;
  Fp8[4 * L + 2] = High.x;
  Fp8[4 * L + 3] = High.y;
  Low = __builtin_amdgcn_cvt_pk_f32_bf8(V, false);
  High = __builtin_amdgcn_cvt_pk_f32_bf8(V, true);
  Bf8[4 * L + 0] = Low.x;
  Bf8[4 * L + 1] = Low.y;
  Bf8[4 * L + 2] = High.x;
  Bf8[4 * L + 3] = High.y;
#endif
}

// A[L] and B[L] into the low, then the high word of Old[L].
extern "C" __global__ void fp8_encode(int *Fp8, int *Bf8, const float *A, const float *B, const int *Old) {
#if FP8
  int L = threadIdx.x;
  Fp8[2 * L + 0] = __builtin_amdgcn_cvt_pk_fp8_f32(A[L], B[L], Old[L], false);
  Fp8[2 * L + 1] = __builtin_amdgcn_cvt_pk_fp8_f32(A[L], B[L], Old[L], true);
  Bf8[2 * L + 0] = __builtin_amdgcn_cvt_pk_bf8_f32(A[L], B[L], Old[L], false);
  Bf8[2 * L + 1] = __builtin_amdgcn_cvt_pk_bf8_f32(A[L], B[L], Old[L], true);
#endif
}

// A[L], stochastically rounded with R[L], into each byte of Old[L].
extern "C" __global__ void fp8_encode_stochastic(int *Fp8, int *Bf8, const float *A, const int *R, const int *Old) {
#if FP8
  int L = threadIdx.x;
  Fp8[4 * L + 0] = __builtin_amdgcn_cvt_sr_fp8_f32(A[L], R[L], Old[L], 0);
  Fp8[4 * L + 1] = __builtin_amdgcn_cvt_sr_fp8_f32(A[L], R[L], Old[L], 1);
  Fp8[4 * L + 2] = __builtin_amdgcn_cvt_sr_fp8_f32(A[L], R[L], Old[L], 2);
  Fp8[4 * L + 3] = __builtin_amdgcn_cvt_sr_fp8_f32(A[L], R[L], Old[L], 3);
  Bf8[4 * L + 0] = __builtin_amdgcn_cvt_sr_bf8_f32(A[L], R[L], Old[L], 0);
  Bf8[4 * L + 1] = __builtin_amdgcn_cvt_sr_bf8_f32(A[L], R[L], Old[L], 1);
  Bf8[4 * L + 2] = __builtin_amdgcn_cvt_sr_bf8_f32(A[L], R[L], Old[L], 2);
  Bf8[4 * L + 3] = __builtin_amdgcn_cvt_sr_bf8_f32(A[L], R[L], Old[L], 3);
#endif
}
