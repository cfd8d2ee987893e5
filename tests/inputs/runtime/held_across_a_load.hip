// A HIP program whose kernels hold 122 values in v2..v123 across a global
// load at 128 VGPRs (tests/inputs/kernels/live_at_the_limit.hip), one of
// them with a private array in scratch already: a tool's payload at the
// load finds no free register and saves live VGPRs in scratch, so the
// instrumented kernels need more scratch than the program's packets give
// (HIP writes them from the code object it was handed). Several
// workgroups of several waves: a wave given too little scratch would
// write into its neighbour's. It checks its own results.
#include "../kernels/live_at_the_limit.hip"
#include <cstdio>
#include <vector>

// Each wave loads its own 64 inputs through an SGPR pointer (the asm's
// `s` operands need a uniform one).
#define HELD_ACROSS_A_LOAD(out, in)                                                  \
  asm volatile("v_mbcnt_lo_u32_b32 v1, -1, 0\n"                                      \
               "v_mbcnt_hi_u32_b32 v1, -1, v1\n"                                     \
               "v_lshlrev_b32 v1, 2, v1\n" FILL_VGPRS "\n"                           \
               "global_load_dword v0, v1, %1\n"                                      \
               "s_waitcnt vmcnt(0)\n" SUM_VGPRS "\n"                                 \
               "global_store_dword v1, v0, %0\n"                                     \
               "s_waitcnt vmcnt(0)"                                                  \
               :                                                                     \
               : "s"(out), "s"(in)                                                   \
               : "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "v32", "v33", "v34", "v35", "v36", "v37", "v38", "v39", "v40", "v41", "v42", "v43", "v44", "v45", "v46", "v47", "v48", "v49", "v50", "v51", "v52", "v53", "v54", "v55", "v56", "v57", "v58", "v59", "v60", "v61", "v62", "v63", "v64", "v65", "v66", "v67", "v68", "v69", "v70", "v71", "v72", "v73", "v74", "v75", "v76", "v77", "v78", "v79", "v80", "v81", "v82", "v83", "v84", "v85", "v86", "v87", "v88", "v89", "v90", "v91", "v92", "v93", "v94", "v95", "v96", "v97", "v98", "v99", "v100", "v101", "v102", "v103", "v104", "v105", "v106", "v107", "v108", "v109", "v110", "v111", "v112", "v113", "v114", "v115", "v116", "v117", "v118", "v119", "v120", "v121", "v122", "v123")

// The first of this wave's work-items in the grid (uniform: an SGPR).
__device__ int waveBase() {
  return blockIdx.x * blockDim.x + __builtin_amdgcn_readfirstlane(threadIdx.x & ~63u);
}

// out[i] = in[i] + the values held, + 1 where i % 3 == 0.
__global__ void __launch_bounds__(256) heldAcrossALoad(int* out, const int* in) {
  int base = waveBase();
  HELD_ACROSS_A_LOAD(out + base, in + base);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i % 3 == 0) out[i] += 1;
}

// The same, with a private array the kernel keeps in scratch across the
// load: out[i] = in[i] + the values held + in[i] * ((i + pick) % 16).
// At 4 waves per SIMD (128 VGPRs), where the compiler left alone takes a few more
// (at no cost in waves, which would leave the payload room).
__global__ void __launch_bounds__(256) __attribute__((amdgpu_waves_per_eu(4))) heldAcrossALoadWithScratch(int* out, const int* in, int pick) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  volatile int local[16];
  for (int k = 0; k < 16; k++) local[k] = in[i] * k;
  int base = waveBase();
  HELD_ACROSS_A_LOAD(out + base, in + base);
  out[i] += local[(i + pick) % 16];
}

int main() {
  const int groups = 4, size = 256, n = groups * size;
  int held = 0;
  for (int v = 2; v < 124; v++) held += 7 * v;
  std::vector<int> input(n);
  for (int i = 0; i < n; i++) input[i] = i * 13 - 500;
  int *in, *out;
  hipMalloc(&in, n * sizeof(int));
  hipMalloc(&out, n * sizeof(int));
  hipMemcpy(in, input.data(), n * sizeof(int), hipMemcpyHostToDevice);
  std::vector<int> result(n);
  int wrong = 0;
  heldAcrossALoad<<<groups, size>>>(out, in);
  hipMemcpy(result.data(), out, n * sizeof(int), hipMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) wrong += result[i] != input[i] + held + (i % 3 == 0);
  const int pick = 5;
  heldAcrossALoadWithScratch<<<groups, size>>>(out, in, pick);
  hipMemcpy(result.data(), out, n * sizeof(int), hipMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) wrong += result[i] != input[i] + held + input[i] * ((i + pick) % 16);
  printf("%s: %d wrong\n", wrong ? "FAILED" : "PASSED", wrong);
  hipFree(in);
  hipFree(out);
  return wrong != 0;
}
