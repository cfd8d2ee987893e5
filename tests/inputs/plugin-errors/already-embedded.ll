; expect: this device module already carries embedded bitcode (is -fembed-bitcode on?)
; expect: remove -fembed-bitcode when compiling a tool
; What clang's -fembed-bitcode leaves in a module when the plugin runs after it.
target triple = "amdgcn-amd-amdhsa"

@__gpuinstr_reserved = addrspace(1) externally_initialized global ptr addrspace(1) null
@llvm.embedded.module = private constant [4 x i8] c"BC\C0\DE", section ".llvmbc"
@llvm.cmdline = private constant [1 x i8] zeroinitializer, section ".llvmcmd"
@llvm.compiler.used = appending global [2 x ptr] [ptr @llvm.embedded.module, ptr @llvm.cmdline], section "llvm.metadata"
