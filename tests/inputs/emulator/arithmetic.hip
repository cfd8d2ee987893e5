// Kernels for the emulator's tests: the arithmetic hipcc emits for ordinary
// code (float and double math, integer division, conversions, cross-lane
// shuffles), each checked against the same computation on the CPU.
#include <hip/hip_runtime.h>

__global__ void vectorAdd(float *C, const float *A, const float *B, int N) {
  int I = blockIdx.x * blockDim.x + threadIdx.x;
  if (I < N)
    C[I] = A[I] + B[I];
}

__global__ void doubleMath(double *Out, const double *X, double A) {
  int I = threadIdx.x;
  double V = X[I];
  Out[I] = A * V + V * V - 0.5 * V;
}

__global__ void integerDivision(int *Quotient, unsigned *Remainder, const int *Num, const int *Den) {
  int I = threadIdx.x;
  Quotient[I] = Num[I] / Den[I];
  Remainder[I] = static_cast<unsigned>(Num[I]) % static_cast<unsigned>(Den[I]);
}

__global__ void floatDivision(float *Out, const float *Num, const float *Den) {
  int I = threadIdx.x;
  Out[I] = Num[I] / Den[I];
}

__global__ void conversions(int *AsInt, float *AsFloat, double *AsDouble, const float *In) {
  int I = threadIdx.x;
  AsInt[I] = static_cast<int>(In[I]);
  AsFloat[I] = static_cast<float>(static_cast<unsigned>(I * 7919u));
  AsDouble[I] = static_cast<double>(In[I]) * 3.0;
}

__global__ void shuffles(int *Out, const int *In) {
  int I = threadIdx.x;
  int V = In[I];
  // A butterfly sum over the wave: every lane ends with the wave's total.
  for (int Mask = 1; Mask < 64; Mask <<= 1)
    V += __shfl_xor(V, Mask);
  Out[I] = V + __shfl(In[I], (I + 1) & 63);
}

#include <hip/hip_fp16.h>

__global__ void halfMath(__half *Out, __half2 *PairsOut, const __half *A, const __half *B, const __half2 *Pairs) {
  int I = threadIdx.x;
  Out[I] = __hadd(__hmul(A[I], B[I]), __hsub(B[I], A[I]));
  PairsOut[I] = __hfma2(Pairs[I], Pairs[I], __hmul2(Pairs[I], __floats2half2_rn(0.5f, 2.0f)));
}

// 16-bit integer arithmetic (v_add_u16, v_mul_lo_u16, 16-bit shifts, min/max).
__global__ void shortMath(unsigned short *Out, short *Signed, const unsigned short *A, const unsigned short *B) {
  int I = threadIdx.x;
  unsigned short X = A[I], Y = B[I];
  unsigned short Sum = X + Y, Product = X * Y, Difference = X - Y;
  unsigned short Shifted = (unsigned short)(Sum << (Y & 7)) >> (X & 3);
  Out[I] = (unsigned short)(Product + Difference) ^ Shifted;
  short S = (short)X, T = (short)Y;
  short Low = S < T ? S : T;
  Signed[I] = (short)(Low >> 2) - (short)(S > T ? S : T);
}

__global__ void doubleDivision(double *Out, const double *Num, const double *Den) {
  int I = threadIdx.x;
  Out[I] = Num[I] / Den[I];
}

// Complex multiply-accumulate as rocSPARSE's csrmv does it: on gfx90a the
// compiler uses packed f32 (v_pk_fma_f32, v_pk_mul_f32) whose high half reads
// a source register the low half writes.
__global__ void complexDot(float2 *Out, const float2 *A, const float2 *X, float2 Alpha, int N) {
  int I = threadIdx.x;
  float2 Sum = {0.0f, 0.0f};
  for (int K = 0; K < N; ++K) {
    float2 P = A[I * N + K], Q = X[K];
    Sum.x = fmaf(P.x, Q.x, fmaf(-P.y, Q.y, Sum.x));
    Sum.y = fmaf(P.x, Q.y, fmaf(P.y, Q.x, Sum.y));
  }
  Out[I] = make_float2(Alpha.x * Sum.x - Alpha.y * Sum.y, Alpha.x * Sum.y + Alpha.y * Sum.x);
}

// Saturating integer arithmetic: LLVM's usub.sat, uadd.sat and sadd.sat
// become VOP3 adds and subtracts with the clamp bit (rocPRIM's reductions).
__global__ void saturatingMath(unsigned *Out, int *Signed, const unsigned *A, const unsigned *B) {
  int I = threadIdx.x;
  unsigned X = A[I], Y = B[I];
  unsigned Sum = X + Y;
  Out[2 * I] = X > Y ? X - Y : 0;
  Out[2 * I + 1] = Sum < X ? 0xffffffffu : Sum;
  Signed[I] = __builtin_elementwise_add_sat((int)X, (int)Y);
}

// The workgroup's own shape in dimension Dim: the full shape, or what the
// grid leaves of it in the last workgroup, from the dispatch packet
// (workgroup_size_* are 16-bit at byte 4, grid_size_* 32-bit at byte 12).
// Neither HIP's blockDim nor the device library's local size says it for
// every ROCm: both give the full shape from ROCm 5.7 on.
__device__ int ownGroupSize(int Dim, int GroupId) {
  const char *Packet = (const char *)__builtin_amdgcn_dispatch_ptr();
  int Group = reinterpret_cast<const unsigned short *>(Packet + 4)[Dim];
  int Grid = reinterpret_cast<const unsigned int *>(Packet + 12)[Dim];
  return min(Group, Grid - GroupId * Group);
}

// Each work-item's place in its workgroup and the workgroup's shape, on a
// grid that ends in partial workgroups. GroupWidth and GroupHeight are the
// full shape.
__global__ void workgroupShape(int4 *Out, int Width, int GroupWidth, int GroupHeight) {
  int X = blockIdx.x * GroupWidth + threadIdx.x;
  int Y = blockIdx.y * GroupHeight + threadIdx.y;
  Out[Y * Width + X] = make_int4(threadIdx.x, threadIdx.y, ownGroupSize(0, blockIdx.x), ownGroupSize(1, blockIdx.y));
}

// 16-bit three-operand minimum, maximum and median (v_min3/v_max3/v_med3
// _u16/_i16 on gfx9; rocPRIM's merge sort has v_med3_u16).
__global__ void smallMinMax(unsigned short *Out, short *SignedOut, const unsigned short *A, const unsigned short *B,
                            const unsigned short *C) {
  int I = threadIdx.x;
  unsigned short X = A[I], Y = B[I], Z = C[I];
  Out[4 * I + 0] = min(min(X, Y), Z);
  Out[4 * I + 1] = max(max(Y, Z), X);
  Out[4 * I + 2] = min(max(X, (unsigned short)1000), (unsigned short)60000);
  Out[4 * I + 3] = min(max(X, Y), Z);
  short SX = X, SY = Y, SZ = Z;
  SignedOut[4 * I + 0] = min(min(SX, SY), SZ);
  SignedOut[4 * I + 1] = max(max(SY, SZ), SX);
  SignedOut[4 * I + 2] = min(max(SX, (short)-1000), (short)3000);
  SignedOut[4 * I + 3] = min(max(SX, SY), SZ);
}

// LDS accesses past the workgroup's 512 bytes (Shift 64, 128 work-items):
// the upper half's writes and reads fall outside the allocation.
__global__ void ldsPastTheEnd(int *Out, int Shift) {
  __shared__ int Slots[128];
  int T = threadIdx.x;
  Slots[T] = T + 1;
  __syncthreads();
  Slots[T + Shift] = -1;
  __syncthreads();
  Out[T] = Slots[T] + 100 * Slots[(T + Shift) & 255];
}
