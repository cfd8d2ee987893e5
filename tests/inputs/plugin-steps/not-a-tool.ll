; An amdgcn module compiled with the plugin loaded that is not a gpuinstr tool:
; no GPUINSTR_DEVICE_MODULE, no hooks.
target triple = "amdgcn-amd-amdhsa"

define void @hook() {
  ret void
}
