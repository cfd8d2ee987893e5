// Asks for more device memory than the emulated GPU has, in 64 MiB pieces
// and in one piece larger than the device: each request past it gets
// hipErrorOutOfMemory (never the kernel's OOM killer), the pieces it got are
// usable, and memory freed can be allocated again.
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
    Pieces.push_back(Pointer);
  }
  printf("pieces allocated: %zu, then %s\n", Pieces.size(), hipGetErrorName(Error));
  void *Huge = nullptr;
  printf("larger than the device: %s\n", hipGetErrorName(hipMalloc(&Huge, Total + Piece)));
  // The runtime's own buffers (a queue, kernel arguments) come from the same
  // memory when a memset first needs them: give one piece back first, as a
  // program that fills a real GPU must, or the memset itself runs out.
  if (Pieces.empty() || hipFree(Pieces.back()) != hipSuccess)
    return 1;
  Pieces.pop_back();
  // Usable (writing all of it would only make the emulator slow).
  for (size_t I = 0; I < Pieces.size(); ++I)
    if (hipMemset(Pieces[I], int(I & 0xff), 1 << 20) != hipSuccess || hipDeviceSynchronize() != hipSuccess)
      return 1;
  printf("pieces written: %zu\n", Pieces.size());
  for (void *Pointer : Pieces)
    if (hipFree(Pointer) != hipSuccess)
      return 1;
  void *Again = nullptr;
  Error = hipMalloc(&Again, Piece);
  printf("after freeing: %s\n", hipGetErrorName(Error));
  return hipFree(Again) == hipSuccess ? 0 : 1;
}
