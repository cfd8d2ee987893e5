// Matrix cores: MFMA instructions and their accumulation registers (AGPRs
// on gfx908; AGPRs or VGPRs on gfx90a), which the library corpus lacks.
#include <hip/hip_runtime.h>

typedef float Float4 __attribute__((ext_vector_type(4)));
typedef float Float16 __attribute__((ext_vector_type(16)));

__global__ void mfmaSmall(float *Out, const float *A, const float *B, int Steps) {
  Float4 Acc = {0, 0, 0, 0};
  for (int K = 0; K < Steps; ++K)
    Acc = __builtin_amdgcn_mfma_f32_4x4x1f32(A[K * 64 + threadIdx.x], B[K * 64 + threadIdx.x], Acc, 0, 0, 0);
  for (int I = 0; I < 4; ++I)
    Out[threadIdx.x * 4 + I] = Acc[I];
}

__global__ void mfmaLarge(float *Out, const float *A, const float *B, int Steps) {
  Float16 Acc = {};
  for (int K = 0; K < Steps; ++K)
    Acc = __builtin_amdgcn_mfma_f32_16x16x1f32(A[K * 64 + threadIdx.x], B[K * 64 + threadIdx.x], Acc, 0, 0, 0);
  for (int I = 0; I < 16; ++I)
    Out[threadIdx.x * 16 + I] = Acc[I];
}
