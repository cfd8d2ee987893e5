// Loads a host library with glibc's dynamic loader (constructors run, the
// HIP runtime registers the fat binary) and prints where the
// __hip_fatbin_wrapper at the given offset points after relocation, and
// whether a bundle is there. Used by tests/tests/instrument.rs.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *want;
static unsigned long wrapper_offset;
static int found;
static unsigned long pointed;
static int each(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size; (void)data;
  if (!info->dlpi_name || !strstr(info->dlpi_name, want)) return 0;
  const unsigned char *wrapper = (const unsigned char *)(info->dlpi_addr + wrapper_offset);
  const char *bundle = *(const char *const *)(wrapper + 8);
  pointed = (unsigned long)bundle - info->dlpi_addr;
  found = memcmp(bundle, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0 ? 1 : 2;
  return 1;
}
int main(int argc, char **argv) {
  if (argc != 3) return 2;
  void *library = dlopen(argv[1], RTLD_NOW);
  if (!library) { printf("dlopen: %s\n", dlerror()); return 1; }
  want = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
  wrapper_offset = strtoul(argv[2], 0, 0);
  dl_iterate_phdr(each, 0);
  printf("%s at %#lx\n", found == 1 ? "bundle" : "no bundle", pointed);
  return found == 1 ? 0 : 1;
}
