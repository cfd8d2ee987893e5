// A constant table read from its second entry on: the compiler addresses it
// as `table+4` in a pc-relative pair (issue 20, item 4).
#include <hip/hip_runtime.h>

__global__ void lookup(const int *In, int *Out) {
  const int Table[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  int I = threadIdx.x;
  Out[I] = Table[(In[I] & 7) + 1];
}
