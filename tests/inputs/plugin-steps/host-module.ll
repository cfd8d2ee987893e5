; The host half of a tool: the plugin must not touch it.
target triple = "x86_64-unknown-linux-gnu"

@.str = private unnamed_addr constant [14 x i8] c"gpuinstr_hook\00", section "llvm.metadata"
@.str.1 = private unnamed_addr constant [9 x i8] c"tool.hip\00", section "llvm.metadata"
@__gpuinstr_reserved = global i8 0
@llvm.global.annotations = appending global [1 x { ptr, ptr, ptr, i32, ptr }] [{ ptr, ptr, ptr, i32, ptr } { ptr @hook, ptr @.str, ptr @.str.1, i32 1, ptr null }], section "llvm.metadata"

define void @hook() {
  ret void
}
