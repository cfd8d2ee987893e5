// MFMA, one kernel per instruction (built for gfx908, gfx90a, MI300 and, with
// clang 21, gfx950): every lane loads its A and B operands
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
typedef float Float2 __attribute__((ext_vector_type(2)));
typedef _Float16 Half8 __attribute__((ext_vector_type(8)));

#if defined(__gfx950__)
#define GFX950 1
#else
#define GFX950 0
#endif

#if defined(__gfx908__) || defined(__gfx90a__) || GFX94X || GFX950
#define ALL 1
#else
#define ALL 0
#endif
#if defined(__gfx90a__) || GFX94X || GFX950
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

#if GFX94X || GFX950
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

// gfx940+: negated f64 sources (blgp bit 0 negates A, bit 2 negates C).
extern "C" __global__ void f64_16x16x4f64_neg(double *Out, const double *A, const double *B, const double *C) {
#if GFX940_ON
  int L = threadIdx.x;
  Double4 Acc;
  for (int R = 0; R < 4; ++R)
    Acc[R] = C[L * 4 + R];
  Acc = __builtin_amdgcn_mfma_f64_16x16x4f64(A[L], B[L], Acc, 0, 0, 5);
  for (int R = 0; R < 4; ++R)
    Out[L * 4 + R] = Acc[R];
#endif
}

// xf32: gfx940-gfx942 only.
MFMA(f32_16x16x8xf32, GFX94X, Float2, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x8_xf32)
MFMA(f32_32x32x4xf32, GFX94X, Float2, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x4_xf32)

// fp8/bf8 (8 per lane in a long): FNUZ formats on gfx94x, OCP on gfx950.
MFMA(f32_16x16x32_fp8_fp8, GFX940_ON, long, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8)
MFMA(f32_16x16x32_fp8_bf8, GFX940_ON, long, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8)
MFMA(f32_16x16x32_bf8_fp8, GFX940_ON, long, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8)
MFMA(f32_16x16x32_bf8_bf8, GFX940_ON, long, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8)
MFMA(f32_32x32x16_fp8_fp8, GFX940_ON, long, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8)
MFMA(f32_32x32x16_fp8_bf8, GFX940_ON, long, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8)
MFMA(f32_32x32x16_bf8_fp8, GFX940_ON, long, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8)
MFMA(f32_32x32x16_bf8_bf8, GFX940_ON, long, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8)

// gfx950: twice the k of the f16, bf16 and i8 forms before it (clang 21
// is the first of ours that knows them).
#if __clang_major__ >= 21
typedef __bf16 Bf16x8 __attribute__((ext_vector_type(8)));
MFMA(f32_16x16x32_f16, GFX950, Half8, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x32_f16)
MFMA(f32_32x32x16_f16, GFX950, Half8, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x16_f16)
MFMA(f32_16x16x32_bf16, GFX950, Bf16x8, Float4, float, 4, __builtin_amdgcn_mfma_f32_16x16x32_bf16)
MFMA(f32_32x32x16_bf16, GFX950, Bf16x8, Float16, float, 16, __builtin_amdgcn_mfma_f32_32x32x16_bf16)
MFMA(i32_16x16x64_i8, GFX950, Int4, Int4, int, 4, __builtin_amdgcn_mfma_i32_16x16x64_i8)
MFMA(i32_32x32x32_i8, GFX950, Int4, Int16, int, 16, __builtin_amdgcn_mfma_i32_32x32x32_i8)
#endif

// Sparse MFMA (SMFMAC, gfx940+): A holds 2 of every 4 k, Index[L] says
// where; abid picks the index set when cbsz is 0.
typedef short Short8 __attribute__((ext_vector_type(8)));
typedef int Int2 __attribute__((ext_vector_type(2)));
#define SMFMAC(NAME, AIN, BIN, ACC, OUT, N, BUILTIN, ABID)                                                  \
  extern "C" __global__ void NAME(OUT *Out, const AIN *A, const BIN *B, const OUT *C, const int *Index) { \
    if (GFX940_ON) {                                                                                      \
      int L = threadIdx.x;                                                                                \
      ACC Acc;                                                                                            \
      for (int R = 0; R < N; ++R)                                                                         \
        Acc[R] = C[L * N + R];                                                                            \
      Acc = BUILTIN(A[L], B[L], Acc, Index[L], 0, ABID);                                                  \
      for (int R = 0; R < N; ++R)                                                                         \
        Out[L * N + R] = Acc[R];                                                                          \
    }                                                                                                     \
  }

SMFMAC(smfmac_f32_16x16x32_f16, Half4, Half8, Float4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_f16, 0)
SMFMAC(smfmac_f32_16x16x32_f16_set2, Half4, Half8, Float4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_f16, 2)
SMFMAC(smfmac_f32_32x32x16_f16, Half4, Half8, Float16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x16_f16, 0)
SMFMAC(smfmac_f32_16x16x32_bf16, Short4, Short8, Float4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x32_bf16, 0)
SMFMAC(smfmac_f32_32x32x16_bf16, Short4, Short8, Float16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x16_bf16, 3)
SMFMAC(smfmac_i32_16x16x64_i8, Int2, Int4, Int4, int, 4, __builtin_amdgcn_smfmac_i32_16x16x64_i8, 0)
SMFMAC(smfmac_i32_32x32x32_i8, Int2, Int4, Int16, int, 16, __builtin_amdgcn_smfmac_i32_32x32x32_i8, 1)
SMFMAC(smfmac_f32_16x16x64_fp8_fp8, Int2, Int4, Float4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x64_fp8_fp8, 0)
SMFMAC(smfmac_f32_16x16x64_bf8_fp8, Int2, Int4, Float4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x64_bf8_fp8, 1)
SMFMAC(smfmac_f32_32x32x32_fp8_bf8, Int2, Int4, Float16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x32_fp8_bf8, 0)
SMFMAC(smfmac_f32_32x32x32_bf8_bf8, Int2, Int4, Float16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x32_bf8_bf8, 0)

// gfx950's F8F6F4 MFMAs: cbsz and blgp are A's and B's formats (0 fp8,
// 1 bf8, 2 fp6, 3 bf6, 4 fp4), each lane's A and B in up to 8 registers;
// with scales (E8M0, the byte op_sel picks) or, with constant 0 scales,
// the unscaled instruction.
#if __clang_major__ >= 21
typedef int Int8 __attribute__((ext_vector_type(8)));
#define F8F6F4(NAME, ACC, N, BUILTIN, FA, FB, OPA, OPB, SCALED)                                          \
  extern "C" __global__ void NAME(float *Out, const Int8 *A, const Int8 *B, const float *C, const int *ScaleA, \
                                  const int *ScaleB) {                                                        \
    if (GFX950) {                                                                                             \
      int L = threadIdx.x;                                                                                    \
      ACC Acc;                                                                                                \
      for (int R = 0; R < N; ++R)                                                                             \
        Acc[R] = C[L * N + R];                                                                                \
      if (SCALED)                                                                                             \
        Acc = BUILTIN(A[L], B[L], Acc, FA, FB, OPA, ScaleA[L], OPB, ScaleB[L]);                               \
      else                                                                                                    \
        Acc = BUILTIN(A[L], B[L], Acc, FA, FB, 0, 0, 0, 0);                                                   \
      for (int R = 0; R < N; ++R)                                                                             \
        Out[L * N + R] = Acc[R];                                                                              \
    }                                                                                                         \
  }

F8F6F4(f8f6f4_16_fp8_fp8, Float4, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 0, 0, 0, 0, 0)
F8F6F4(f8f6f4_16_bf8_fp4, Float4, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 1, 4, 1, 2, 1)
F8F6F4(f8f6f4_16_fp6_bf6, Float4, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 2, 3, 3, 0, 1)
F8F6F4(f8f6f4_16_fp4_fp4, Float4, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 4, 4, 0, 1, 1)
F8F6F4(f8f6f4_16_bf6_fp8, Float4, 4, __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4, 3, 0, 0, 0, 0)
F8F6F4(f8f6f4_32_fp8_bf6, Float16, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 0, 3, 2, 3, 1)
F8F6F4(f8f6f4_32_fp4_bf8, Float16, 16, __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4, 4, 1, 0, 0, 0)
#endif

// gfx950's own SMFMACs: twice the k, A in 4 registers and B in 8, each half
// of K laid out as the half-K form lays it out; 16-bit forms have two index
// sets (abid), 8-bit forms one.
#if __clang_major__ >= 21
typedef _Float16 Half16 __attribute__((ext_vector_type(16)));
typedef __bf16 Bf16x16 __attribute__((ext_vector_type(16)));
#define SMFMAC950(NAME, AIN, BIN, ACC, OUT, N, BUILTIN, ABID)                                               \
  extern "C" __global__ void NAME(OUT *Out, const AIN *A, const BIN *B, const OUT *C, const int *Index) { \
    if (GFX950) {                                                                                         \
      int L = threadIdx.x;                                                                                \
      ACC Acc;                                                                                            \
      for (int R = 0; R < N; ++R)                                                                         \
        Acc[R] = C[L * N + R];                                                                            \
      Acc = BUILTIN(A[L], B[L], Acc, Index[L], 0, ABID);                                                  \
      for (int R = 0; R < N; ++R)                                                                         \
        Out[L * N + R] = Acc[R];                                                                          \
    }                                                                                                     \
  }
SMFMAC950(smfmac_f32_16x16x64_f16, Half8, Half16, Float4, float, 4, __builtin_amdgcn_smfmac_f32_16x16x64_f16, 1)
SMFMAC950(smfmac_f32_32x32x32_bf16, Bf16x8, Bf16x16, Float16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x32_bf16, 0)
SMFMAC950(smfmac_i32_16x16x128_i8, Int4, Int8, Int4, int, 4, __builtin_amdgcn_smfmac_i32_16x16x128_i8, 0)
SMFMAC950(smfmac_f32_32x32x64_fp8_bf8, Int4, Int8, Float16, float, 16, __builtin_amdgcn_smfmac_f32_32x32x64_fp8_bf8, 0)
#endif
