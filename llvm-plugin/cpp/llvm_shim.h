// The few LLVM C++ entry points the LLVM C API does not offer. This header
// and llvm_shim.cpp are the plugin's only C++; src/ir.rs is the only Rust
// that calls them.
#ifndef GPUINSTR_LLVM_SHIM_H
#define GPUINSTR_LLVM_SHIM_H

#include <llvm-c/Types.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Reports an error through the context's diagnostic handler, so clang
/// prints it as an error at the best source location it has and fails the
/// compilation. Function may be null (then a module-level error is emitted);
/// Instruction may be null (then the function's own location is used).
void gpuinstr_report_error(LLVMModuleRef Module, LLVMValueRef Function,
                           LLVMValueRef Instruction, const char *Message);

/// Writes the namespace-qualified base name of an Itanium-mangled function
/// ("_ZN8gpuinstr7readRegIjEET_NS_3RegE" -> "gpuinstr::readReg") into Out.
/// Returns the full length (which may exceed Capacity), or 0 when the name
/// does not demangle.
size_t gpuinstr_demangle_qualified_name(const char *Mangled, char *Out,
                                        size_t Capacity);

/// Turns a global variable into an external declaration with default
/// visibility (no initializer, not dso_local, no comdat).
void gpuinstr_make_external_declaration(LLVMValueRef GlobalVariable);

/// Turns a function definition into an external declaration with default
/// visibility (body, comdat and inlining attributes removed).
void gpuinstr_delete_function_body(LLVMValueRef Function);

/// Whether a global value has uses left once dead constants (left behind by
/// erased globals such as llvm.used) are dropped.
int gpuinstr_has_live_uses(LLVMValueRef GlobalValue);

/// Sets or clears dso_local on a global value.
void gpuinstr_set_dso_local(LLVMValueRef GlobalValue, int DsoLocal);

/// Erases a function or global variable: it leaves llvm.used and
/// llvm.compiler.used first, any other uses become poison.
void gpuinstr_erase_global_value(LLVMValueRef GlobalValue);

/// Removes every global whose name starts with Prefix from the module,
/// including its entries in llvm.used and llvm.compiler.used. Returns how
/// many were removed.
unsigned gpuinstr_remove_globals_with_prefix(LLVMModuleRef Module,
                                             const char *Prefix);

/// Adds a private constant global named Name holding Data to the module, in
/// the given section, kept alive through llvm.compiler.used.
void gpuinstr_embed_buffer(LLVMModuleRef Module, const char *Name,
                           const char *Data, size_t Size, const char *Section);

/// Pass registration (registration.cpp). The passes the Rust side runs:
/// hide-bindings, embed, or one step by its index (GPUINSTR_PASS_STEP + i).
#define GPUINSTR_PASS_HIDE_BINDINGS 0
#define GPUINSTR_PASS_EMBED 1
#define GPUINSTR_PASS_STEP 2

/// LLVM_PLUGIN_API_VERSION of the LLVM the plugin was built against.
uint32_t gpuinstr_plugin_api_version(void);

/// Registers the plugin's passes with a llvm::PassBuilder (the callback of
/// llvmGetPassPluginInfo, which src/ir.rs defines).
void gpuinstr_register_pass_builder_callbacks(void *PassBuilder);

/// Defined in Rust (src/ir.rs): runs a pass on a module; whether it
/// changed the module.
int gpuinstr_plugin_run(int Kind, LLVMModuleRef Module);

/// Defined in Rust (src/ir.rs): the pass a -passes= name means, or -1.
int gpuinstr_plugin_pass_kind(const char *Name, size_t Length);

#ifdef __cplusplus
}
#endif

#endif
