// Asks for more device memory than the emulated GPU has, in 64 MiB pieces
// (each written at its start) and in one piece larger than the device: each request past
// it gets hipErrorOutOfMemory (never the kernel's OOM killer), and memory
// freed can be allocated again.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <vector>

int main() {
  size_t Free = 0, Total = 0;
  if (hipMemGetInfo(&Free, &Total) != hipSuccess)
    return 1;
  printf("device memory: %zu MiB\n", Total >> 20);
  const size_t Piece = size_t(64) << 20;
  std::vector<void *> Pieces;
  hipError_t Error = hipSuccess;
  for (int I = 0; I < 4096; ++I) {
    void *Pointer = nullptr;
    Error = hipMalloc(&Pointer, Piece);
    if (Error != hipSuccess)
      break;
    // Usable (writing all of it would only make the emulator slow).
    if (hipMemset(Pointer, I & 0xff, 1 << 20) != hipSuccess || hipDeviceSynchronize() != hipSuccess)
      return 1;
    Pieces.push_back(Pointer);
  }
  printf("pieces allocated: %zu, then %s\n", Pieces.size(), hipGetErrorName(Error));
  void *Huge = nullptr;
  printf("larger than the device: %s\n", hipGetErrorName(hipMalloc(&Huge, Total + Piece)));
  for (void *Pointer : Pieces)
    hipFree(Pointer);
  void *Again = nullptr;
  Error = hipMalloc(&Again, Piece);
  printf("after freeing: %s\n", hipGetErrorName(Error));
  hipFree(Again);
  return 0;
}
