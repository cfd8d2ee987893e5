/* Prints, as Rust constants, the CoMGR enum values the driver uses, from the
 * amd_comgr.h this build compiles against (driver/build.rs runs it): the
 * values differ between CoMGR 2 (ROCm 5-6) and CoMGR 3 (ROCm 6.4+). */
#if __has_include(<amd_comgr/amd_comgr.h>)
#include <amd_comgr/amd_comgr.h>
#else
#include <amd_comgr.h>
#endif
#include <stdio.h>

#define CONSTANT(rust, c) printf("pub const %s: u32 = %u;\n", rust, (unsigned)(c))

int main(void) {
  CONSTANT("STATUS_SUCCESS", AMD_COMGR_STATUS_SUCCESS);
  CONSTANT("DATA_KIND_LOG", AMD_COMGR_DATA_KIND_LOG);
  CONSTANT("DATA_KIND_RELOCATABLE", AMD_COMGR_DATA_KIND_RELOCATABLE);
  CONSTANT("DATA_KIND_EXECUTABLE", AMD_COMGR_DATA_KIND_EXECUTABLE);
  CONSTANT("ACTION_LINK_RELOCATABLE_TO_EXECUTABLE", AMD_COMGR_ACTION_LINK_RELOCATABLE_TO_EXECUTABLE);
  printf("/// The CoMGR interface version this build compiled against.\n");
  printf("pub const INTERFACE_VERSION: (u32, u32) = (%u, %u);\n", (unsigned)AMD_COMGR_INTERFACE_VERSION_MAJOR,
         (unsigned)AMD_COMGR_INTERFACE_VERSION_MINOR);
  return 0;
}
