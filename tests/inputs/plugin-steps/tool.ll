; A small gpuinstr tool module in the shape clang 15 emits for HIP device
; code: two hooks, intrinsic bindings (two C++ instantiations with one IR
; signature, a user intrinsic in another namespace, an unused one), a hook
; handle kernel, managed variables, the reserved variable, constant data and
; kernel-state amdgcn intrinsics. Every plugin step is snapshot-tested on it.
target datalayout = "e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7"
target triple = "amdgcn-amd-amdhsa"

@.str = private unnamed_addr addrspace(1) constant [19 x i8] c"gpuinstr_intrinsic\00", section "llvm.metadata"
@.str.1 = private unnamed_addr addrspace(1) constant [14 x i8] c"gpuinstr_hook\00", section "llvm.metadata"
@.str.2 = private unnamed_addr addrspace(1) constant [9 x i8] c"tool.hip\00", section "llvm.metadata"
@Counter.managed = protected addrspace(1) externally_initialized global i64 0, align 8
@Counter = protected addrspace(1) externally_initialized global ptr addrspace(1) null
@__gpuinstr_reserved.managed = protected addrspace(1) externally_initialized global i8 0, align 1
@__gpuinstr_reserved = protected addrspace(1) externally_initialized global ptr addrspace(1) null
@Scratch = protected addrspace(1) global i32 0, align 4
@Weights = internal unnamed_addr addrspace(4) constant [2 x i32] [i32 3, i32 5], align 4
@__hip_cuid_0123abcd = addrspace(1) global i8 0
@llvm.global.annotations = appending addrspace(1) global [6 x { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) }] [
  { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) } { ptr addrspace(1) addrspacecast (ptr @_ZN8gpuinstr7readRegIjEET_NS_3RegE to ptr addrspace(1)), ptr addrspace(1) @.str, ptr addrspace(1) @.str.2, i32 10, ptr addrspace(1) null },
  { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) } { ptr addrspace(1) addrspacecast (ptr @_ZN8gpuinstr7readRegIiEET_NS_3RegE to ptr addrspace(1)), ptr addrspace(1) @.str, ptr addrspace(1) @.str.2, i32 10, ptr addrspace(1) null },
  { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) } { ptr addrspace(1) addrspacecast (ptr @_ZN8gpuinstr10dispatchIdEv to ptr addrspace(1)), ptr addrspace(1) @.str, ptr addrspace(1) @.str.2, i32 12, ptr addrspace(1) null },
  { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) } { ptr addrspace(1) addrspacecast (ptr @_ZN6mytool4hwIdEv to ptr addrspace(1)), ptr addrspace(1) @.str, ptr addrspace(1) @.str.2, i32 14, ptr addrspace(1) null },
  { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) } { ptr addrspace(1) addrspacecast (ptr @countWaves to ptr addrspace(1)), ptr addrspace(1) @.str.1, ptr addrspace(1) @.str.2, i32 20, ptr addrspace(1) null },
  { ptr addrspace(1), ptr addrspace(1), ptr addrspace(1), i32, ptr addrspace(1) } { ptr addrspace(1) addrspacecast (ptr @recordPlace to ptr addrspace(1)), ptr addrspace(1) @.str.1, ptr addrspace(1) @.str.2, i32 30, ptr addrspace(1) null }
], section "llvm.metadata"
@llvm.compiler.used = appending addrspace(1) global [7 x ptr] [ptr addrspacecast (ptr addrspace(1) @Counter to ptr), ptr addrspacecast (ptr addrspace(1) @Counter.managed to ptr), ptr addrspacecast (ptr addrspace(1) @__gpuinstr_reserved to ptr), ptr addrspacecast (ptr addrspace(1) @__gpuinstr_reserved.managed to ptr), ptr @countWaves, ptr @recordPlace, ptr @__gpuinstr_hook_handle_countWaves], section "llvm.metadata"

; readReg<unsigned> and readReg<int>: one IR signature, one intrinsic.
define internal i32 @_ZN8gpuinstr7readRegIjEET_NS_3RegE(i32 %reg) #0 {
  tail call void asm sideeffect "", "X,~{memory}"(i32 %reg)
  %value = tail call i32 asm sideeffect "", "=v,~{memory}"()
  ret i32 %value
}

define internal i32 @_ZN8gpuinstr7readRegIiEET_NS_3RegE(i32 %reg) #0 {
  tail call void asm sideeffect "", "X,~{memory}"(i32 %reg)
  %value = tail call i32 asm sideeffect "", "=v,~{memory}"()
  ret i32 %value
}

; Declared by every tool through the SDK header; nothing calls it.
define internal i64 @_ZN8gpuinstr10dispatchIdEv() #0 {
  %value = tail call i64 asm sideeffect "", "=v,~{memory}"()
  ret i64 %value
}

; A tool's own intrinsic, in its own namespace.
define internal i32 @_ZN6mytool4hwIdEv() #0 {
  %value = tail call i32 asm sideeffect "", "=v,~{memory}"()
  ret i32 %value
}

; Compiled at -O0: optnone and noinline on a helper.
define internal i32 @_ZL5scalei(i32 %x) #2 {
  %p = getelementptr [2 x i32], ptr addrspace(4) @Weights, i64 0, i64 1
  %w = load i32, ptr addrspace(4) %p, align 4
  %r = mul i32 %x, %w
  ret i32 %r
}

define internal void @countWaves(i1 zeroext %waveLevel) #1 {
  %exec = tail call i64 @llvm.read_register.i64(metadata !0)
  %lanes = tail call i64 @llvm.ctpop.i64(i64 %exec)
  %n = select i1 %waveLevel, i64 1, i64 %lanes
  %counter = load ptr addrspace(1), ptr addrspace(1) @Counter, align 8
  %old = atomicrmw add ptr addrspace(1) %counter, i64 %n syncscope("agent-one-as") monotonic, align 8
  ret void
}

define internal void @recordPlace() #1 {
  %s4 = tail call i32 @_ZN8gpuinstr7readRegIjEET_NS_3RegE(i32 65540)
  %v0 = tail call i32 @_ZN8gpuinstr7readRegIiEET_NS_3RegE(i32 131072)
  %hw = tail call i32 @_ZN6mytool4hwIdEv()
  %group = tail call i32 @llvm.amdgcn.workgroup.id.x()
  %lane = tail call i32 @llvm.amdgcn.workitem.id.y()
  %hidden = tail call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %sizep = getelementptr inbounds i16, ptr addrspace(4) %hidden, i64 6
  %size = load i16, ptr addrspace(4) %sizep, align 4
  %size32 = zext i16 %size to i32
  %a = add i32 %s4, %v0
  %b = add i32 %a, %hw
  %c = add i32 %b, %group
  %d = add i32 %c, %lane
  %e = add i32 %d, %size32
  %f = call i32 @_ZL5scalei(i32 %e)
  store i32 %f, ptr addrspace(1) @Scratch, align 4
  ret void
}

define protected amdgpu_kernel void @__gpuinstr_hook_handle_countWaves() #3 {
  ret void
}

declare i64 @llvm.read_register.i64(metadata) #4
declare i64 @llvm.ctpop.i64(i64) #5
declare i32 @llvm.amdgcn.workgroup.id.x() #5
declare i32 @llvm.amdgcn.workitem.id.y() #5
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr() #5

attributes #0 = { convergent noinline nounwind "target-cpu"="gfx90a" }
attributes #1 = { convergent nounwind "target-cpu"="gfx90a" }
attributes #2 = { noinline nounwind optnone "target-cpu"="gfx90a" }
attributes #3 = { nounwind "target-cpu"="gfx90a" "amdgpu-flat-work-group-size"="1,1024" }
attributes #4 = { nounwind readonly }
attributes #5 = { nounwind readnone speculatable willreturn }

!0 = !{!"exec"}
