// What compilers emit for math nobody here hand-picked: the device
// library's double sin/cos (large arguments reduce with v_trig_preop_f64),
// packed 16-bit integer vectors (v_pk_mul_lo_u16, v_pk_add_u16, packed
// shifts, min/max) and 8-bit vectors.
#include <hip/hip_runtime.h>

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
