// What compilers emit for math nobody here hand-picked: the device
// library's double sin/cos (large arguments reduce with v_trig_preop_f64),
// packed 16-bit integer vectors (v_pk_mul_lo_u16, v_pk_add_u16, packed
// shifts, min/max) and 8-bit vectors.
#include <hip/hip_runtime.h>
#if HIP_VERSION_MAJOR >= 6
#include <hip/hip_bf16.h>
#endif

typedef unsigned short ushort2v __attribute__((ext_vector_type(2)));
typedef short short2v __attribute__((ext_vector_type(2)));
typedef unsigned char uchar4v __attribute__((ext_vector_type(4)));

__global__ void sinCos(double *Sin, double *Cos, const double *X) {
  int I = threadIdx.x;
  double S, C;
  sincos(X[I], &S, &C);
  Sin[I] = S;
  Cos[I] = C + cos(X[I] * 0.5);
}

__global__ void packedShorts(ushort2v *Out, short2v *SignedOut, const ushort2v *A, const ushort2v *B) {
  int I = threadIdx.x;
  ushort2v X = A[I], Y = B[I];
  Out[4 * I + 0] = X * Y;
  Out[4 * I + 1] = X + Y - (Y >> (X & (ushort2v)7));
  Out[4 * I + 2] = X << (Y & (ushort2v)15);
  Out[4 * I + 3] = X * Y + X;
  short2v S = __builtin_convertvector(X, short2v), T = __builtin_convertvector(Y, short2v);
  short2v Low = S < T ? S : T, High = S > T ? S : T;
  SignedOut[2 * I + 0] = (Low >> (short2v)2) - High;
  ushort2v Min = X < Y ? X : Y, Max = X > Y ? X : Y;
  SignedOut[2 * I + 1] = __builtin_convertvector(Max - Min, short2v);
}

__global__ void bytes(uchar4v *Out, const uchar4v *A, const uchar4v *B) {
  int I = threadIdx.x;
  uchar4v X = A[I], Y = B[I];
  Out[2 * I + 0] = X * Y + (X >> (uchar4v)1);
  Out[2 * I + 1] = X > Y ? X - Y : Y - X;
}

// Half precision as HIP code writes it: division (v_div_fixup_f16 after
// an f32 reciprocal), three-operand min/max/median, fract, ldexp, frexp,
// sin and cos (in revolutions).
__global__ void halfMath(_Float16 *Out, short *Exponents, const _Float16 *A, const _Float16 *B, const _Float16 *C) {
  int I = threadIdx.x;
  _Float16 X = A[I], Y = B[I], Z = C[I];
  Out[9 * I + 0] = X / Y;
  Out[9 * I + 1] = __builtin_amdgcn_fmed3h(X, Y, Z);
  Out[9 * I + 2] = __builtin_fminf16(__builtin_fminf16(X, Y), Z);
  Out[9 * I + 3] = __builtin_fmaxf16(__builtin_fmaxf16(X, Y), Z);
  Out[9 * I + 4] = __builtin_amdgcn_fracth(X);
  Out[9 * I + 5] = __builtin_amdgcn_ldexph(X, I - 32);
  Out[9 * I + 6] = __builtin_amdgcn_frexp_manth(X);
  Out[9 * I + 7] = __builtin_amdgcn_sinh(Z);
  Out[9 * I + 8] = __builtin_amdgcn_cosh(Z);
  Exponents[I] = __builtin_amdgcn_frexp_exph(X);
}

// gfx950's conversions: bf16 to f32, two f32 to packed bf16 and f16.
__global__ void wideAndNarrow(float *Wide, unsigned *Bf16Pairs, unsigned *HalfPairs, const unsigned short *Bf16,
                              const float *A, const float *B) {
#if defined(__gfx950__)
  int I = threadIdx.x;
  Wide[I] = (float)__builtin_bit_cast(__bf16, Bf16[I]);
  __bf16 Low = (__bf16)A[I], High = (__bf16)B[I];
  Bf16Pairs[I] = __builtin_bit_cast(unsigned short, Low) | (unsigned)__builtin_bit_cast(unsigned short, High) << 16;
  _Float16 HalfLow = (_Float16)A[I], HalfHigh = (_Float16)B[I];
  HalfPairs[I] =
      __builtin_bit_cast(unsigned short, HalfLow) | (unsigned)__builtin_bit_cast(unsigned short, HalfHigh) << 16;
#endif
}

// Dot products as HIP's builtins reach them (gfx908 and newer pick the
// accumulating VOP2 forms where there is no clamp).
typedef short DotShort2 __attribute__((ext_vector_type(2)));
typedef unsigned short DotUShort2 __attribute__((ext_vector_type(2)));
typedef _Float16 DotHalf2 __attribute__((ext_vector_type(2)));
__global__ void dots(int *Out, float *FloatOut, const int *A, const int *B, const int *C, const DotHalf2 *H,
                     const DotHalf2 *K, const float *F) {
  int I = threadIdx.x, X = A[I], Y = B[I], Z = C[I];
  Out[8 * I + 0] = __builtin_amdgcn_sdot4(X, Y, Z, false);
  Out[8 * I + 1] = __builtin_amdgcn_udot4(X, Y, Z, false);
  Out[8 * I + 2] = __builtin_amdgcn_sdot8(X, Y, Z, false);
  Out[8 * I + 3] = __builtin_amdgcn_udot8(X, Y, Z, false);
  Out[8 * I + 4] = __builtin_amdgcn_sdot2(__builtin_bit_cast(DotShort2, X), __builtin_bit_cast(DotShort2, Y), Z, false);
  Out[8 * I + 5] = __builtin_amdgcn_udot2(__builtin_bit_cast(DotUShort2, X), __builtin_bit_cast(DotUShort2, Y), Z, false);
  Out[8 * I + 6] = __builtin_amdgcn_sdot4(X, Y, Z, true);
  Out[8 * I + 7] = __builtin_amdgcn_udot4(X, Y, Z, true);
  FloatOut[2 * I + 0] = __builtin_amdgcn_fdot2(H[I], K[I], F[I], false);
  FloatOut[2 * I + 1] = __builtin_amdgcn_fdot2(H[I], K[I], F[I], true);
}

// gfx950's lane swaps across rows (clang 21's builtins; both registers change).
__global__ void laneSwaps(unsigned *Out, const unsigned *A, const unsigned *B) {
#if defined(__gfx950__)
  int I = threadIdx.x;
  auto Sixteen = __builtin_amdgcn_permlane16_swap(A[I], B[I], false, false);
  auto ThirtyTwo = __builtin_amdgcn_permlane32_swap(A[I], B[I], false, false);
  Out[4 * I + 0] = Sixteen[0];
  Out[4 * I + 1] = Sixteen[1];
  Out[4 * I + 2] = ThirtyTwo[0];
  Out[4 * I + 3] = ThirtyTwo[1];
#endif
}

// What plain source becomes on MI300 and MI350: a literal folded into an
// fma (v_fmaak_f32, v_fmamk_f32 on gfx940+), IEEE minimum and maximum
// (gfx950's v_minimum3_f32/v_maximum3_f32; clang 20 and newer have the
// builtins) and packed bf16 atomic adds (global_atomic_pk_add_bf16 on
// gfx940+, a compare-and-swap loop before; HIP 6 and newer).
__global__ void foldedForms(float *Out, unsigned *Sums, const float *A, const float *B, const float *C,
                            const unsigned *Pairs) {
  int I = threadIdx.x;
  float X = A[I], Y = B[I], Z = C[I];
  float Folded = X * Y + 3.7f; // dependent, so not one packed fma
  Out[4 * I + 0] = Folded;
  Out[4 * I + 1] = Folded * 1.3f + Z;
#if __has_builtin(__builtin_elementwise_minimum)
  Out[4 * I + 2] = __builtin_elementwise_minimum(__builtin_elementwise_minimum(X, Y), Z);
  Out[4 * I + 3] = __builtin_elementwise_maximum(__builtin_elementwise_maximum(X, Y), Z);
#endif
#if HIP_VERSION_MAJOR >= 6
  __hip_bfloat162 Pair;
  __builtin_memcpy(&Pair, &Pairs[I], sizeof Pair);
  unsafeAtomicAdd(reinterpret_cast<__hip_bfloat162 *>(Sums) + I % 4, Pair);
#endif
}

// gfx950's bf16 dot products (the accumulating VOP2 form without clamp)
// and its LFSR step.
__global__ void gfx950Extras(float *Dots, unsigned *Random, const unsigned *A, const unsigned *B, const float *F) {
#if defined(__gfx950__)
  typedef __bf16 DotBf16x2 __attribute__((ext_vector_type(2)));
  int I = threadIdx.x;
  DotBf16x2 X = __builtin_bit_cast(DotBf16x2, A[I]), Y = __builtin_bit_cast(DotBf16x2, B[I]);
  Dots[2 * I + 0] = __builtin_amdgcn_fdot2_f32_bf16(X, Y, F[I], false);
  Dots[2 * I + 1] = __builtin_amdgcn_fdot2_f32_bf16(X, Y, F[I], true);
  Random[I] = __builtin_amdgcn_prng_b32(A[I]);
#endif
}
