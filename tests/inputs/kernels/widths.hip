// Arithmetic with a width, where the emulator once got it wrong: LDS
// addresses from a base that is negative for some lanes plus an offset the
// compiler folds into the instruction (a 32-bit sum), and a write to a
// MODE field with s_setreg_imm32_b32 (its field and value come in the
// opposite order to the assembly's).
#include <hip/hip_runtime.h>

// out[t] = (in[t + 1] + in[t + 9]) mixed with in[0..8 * shift) (a loop that
// gives the kernel some length), plus in[64..64 + t % 4), + flush, where `shift` (16, known only at
// run time) makes `t - shift` negative for the first 16 lanes: the LDS
// reads are at (t - shift) * 4 plus offsets the compiler folds in. `flush`
// is 1 where the single-precision denormal mode reads back as set.
__global__ void __launch_bounds__(64) negativeBases(int* out, const int* in, int shift) {
  __shared__ int values[128];
  int t = threadIdx.x;
  values[t] = in[t];
  values[t + 64] = in[t + 64];
  __syncthreads();
  int base = t - shift;
  int sum = values[base + 17] + values[base + 25];
  for (int j = 0; j < 8 * shift; j++) sum = ((sum * 3 + in[j & 63]) ^ (sum >> 7)) + (sum << 5);
  // A loop whose trip count differs between lanes (a branch that diverges).
  for (int j = 0; j < (t & 3); j++) sum += in[64 + j];
  unsigned mode;
  asm volatile("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3\n"
               "s_getreg_b32 %0, hwreg(HW_REG_MODE, 4, 2)"
               : "=s"(mode));
  out[t] = sum + (mode == 3 ? 1 : 0);
}
