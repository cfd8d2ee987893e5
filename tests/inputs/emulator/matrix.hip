// MFMA, one kernel per instruction (built for gfx908, gfx90a and MI300): every lane loads its A and B operands
// and its accumulator registers (C), runs D = A*B + C once and stores its
// accumulator registers; the test compares with a CPU matmul. Instructions
// a processor lacks leave the output untouched there.
#include <hip/hip_runtime.h>

// MI300: gfx940 with clang 15, gfx942 from clang 17.
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define GFX94X 1
#else
#define GFX94X 0
#endif

typedef float Float4 __attribute__((ext_vector_type(4)));
typedef float Float16 __attribute__((ext_vector_type(16)));
typedef float Float32 __attribute__((ext_vector_type(32)));
typedef int Int4 __attribute__((ext_vector_type(4)));
typedef int Int16 __attribute__((ext_vector_type(16)));
typedef int Int32 __attribute__((ext_vector_type(32)));
typedef double Double4 __attribute__((ext_vector_type(4)));
typedef _Float16 Half4 __attribute__((ext_vector_type(4)));
typedef short Short2 __attribute__((ext_vector_type(2)));
typedef short Short4 __attribute__((ext_vector_type(4)));

#if defined(__gfx908__) || defined(__gfx90a__) || GFX94X
#define ALL 1
#else
#define ALL 0
#endif
#if defined(__gfx90a__) || GFX94X
#define GFX90A_ON 1
#else
#define GFX90A_ON 0
#endif
// The first bf16 forms and 8-bit 32x32x8/16x16x16 are gfx908/gfx90a only.
#if defined(__gfx908__) || defined(__gfx90a__)
#define BEFORE_GFX940 1
#else
#define BEFORE_GFX940 0
#endif

// Out[lane * N + r] = (A[lane] * B[lane] + C[lane * N + r]) in accumulator register r.
#define MFMA(NAME, WHERE, IN, ACC, OUT, N, BUILTIN)                                     \
  extern "C" __global__ void NAME(OUT *Out, const IN *A, const IN *B, const OUT *C) {              \
    if (WHERE) {                                                                        \
      int L = threadIdx.x;                                                              \
      ACC Acc;                                                                          \
      for (int R = 0; R < N; ++R)                                                       \
        Acc[R] = C[L * N + R];                                                          \
      Acc = BUILTIN(A[L], B[L], Acc, 0, 0, 0);                                          \
      for (int R = 0; R < N; ++R)                                                       \
        Out[L * N + R] = Acc[R];                                                        \
    }                                                                                   \
  }

MFMA(f32_32x32x1f32, ALL, float, Float32, float, 32, __builtin_amdgcn_mfma_f32_32x32x1f32)
MFMA(f32_32x32x2f32, ALL, float, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x2f32)
MFMA(f32_16x16x1f32, ALL, float, Float16, float, 16, __builtin_amdgcn_mfma_f32_16x16x1f32)
MFMA(f32_16x16x4f32, ALL, float, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x4f32)
MFMA(f32_4x4x1f32, ALL, float, Float4, float, 4, __builtin_amdgcn_mfma_f32_4x4x1f32)

MFMA(f32_32x32x4f16, ALL, Half4, Float32, float, 32, __builtin_amdgcn_mfma_f32_32x32x4f16)
MFMA(f32_32x32x8f16, ALL, Half4, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x8f16)
MFMA(f32_16x16x4f16, ALL, Half4, Float16, float, 16, __builtin_amdgcn_mfma_f32_16x16x4f16)
MFMA(f32_16x16x16f16, ALL, Half4, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x16f16)
MFMA(f32_4x4x4f16, ALL, Half4, Float4, float, 4, __builtin_amdgcn_mfma_f32_4x4x4f16)

MFMA(f32_32x32x2bf16, BEFORE_GFX940, Short2, Float32, float, 32, __builtin_amdgcn_mfma_f32_32x32x2bf16)
MFMA(f32_32x32x4bf16, BEFORE_GFX940, Short2, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x4bf16)
MFMA(f32_16x16x2bf16, BEFORE_GFX940, Short2, Float16, float, 16, __builtin_amdgcn_mfma_f32_16x16x2bf16)
MFMA(f32_16x16x8bf16, BEFORE_GFX940, Short2, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x8bf16)
MFMA(f32_4x4x2bf16, BEFORE_GFX940, Short2, Float4, float, 4, __builtin_amdgcn_mfma_f32_4x4x2bf16)

MFMA(f32_32x32x4bf16_1k, GFX90A_ON, Short4, Float32, float, 32, __builtin_amdgcn_mfma_f32_32x32x4bf16_1k)
MFMA(f32_32x32x8bf16_1k, GFX90A_ON, Short4, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x8bf16_1k)
MFMA(f32_16x16x4bf16_1k, GFX90A_ON, Short4, Float16, float, 16, __builtin_amdgcn_mfma_f32_16x16x4bf16_1k)
MFMA(f32_16x16x16bf16_1k, GFX90A_ON, Short4, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k)
MFMA(f32_4x4x4bf16_1k, GFX90A_ON, Short4, Float4, float, 4, __builtin_amdgcn_mfma_f32_4x4x4bf16_1k)

MFMA(i32_32x32x4i8, ALL, int, Int32, int, 32, __builtin_amdgcn_mfma_i32_32x32x4i8)
MFMA(i32_32x32x8i8, BEFORE_GFX940, int, Int16, int, 16, __builtin_amdgcn_mfma_i32_32x32x8i8)
MFMA(i32_16x16x4i8, ALL, int, Int16, int, 16, __builtin_amdgcn_mfma_i32_16x16x4i8)
MFMA(i32_16x16x16i8, BEFORE_GFX940, int, Int4, int, 4, __builtin_amdgcn_mfma_i32_16x16x16i8)
MFMA(i32_4x4x4i8, ALL, int, Int4, int, 4, __builtin_amdgcn_mfma_i32_4x4x4i8)

#if GFX94X
#define GFX940_ON 1
#else
#define GFX940_ON 0
#endif
MFMA(i32_32x32x16i8, GFX940_ON, long, Int16, int, 16, __builtin_amdgcn_mfma_i32_32x32x16_i8)
MFMA(i32_16x16x32i8, GFX940_ON, long, Int4, int, 4, __builtin_amdgcn_mfma_i32_16x16x32_i8)

MFMA(f64_16x16x4f64, GFX90A_ON, double, Double4, double, 4, __builtin_amdgcn_mfma_f64_16x16x4f64)

// One f64 accumulator register pair: not a vector.
extern "C" __global__ void f64_4x4x4f64(double *Out, const double *A, const double *B, const double *C) {
#if GFX90A_ON
  int L = threadIdx.x;
  Out[L] = __builtin_amdgcn_mfma_f64_4x4x4f64(A[L], B[L], C[L], 0, 0, 0);
#endif
}
