//! A small safe view of the LLVM IR the plugin edits. This is the plugin's
//! only unsafe code: llvm-sys calls and the C++ shim (cpp/llvm_shim.h).
//!
//! Handles (`Function`, `Global`, `Call`, `Type`) are plain copies of LLVM
//! pointers that borrow their module. The one rule the rest of the plugin
//! keeps: a handle is not used after the `erase` call that consumed it
//! (`erase` takes `self` by value so the borrow checker catches the simple
//! cases).

use std::ffi::{c_char, c_uint, CStr, CString};
use std::fmt;
use std::marker::PhantomData;

use crate::llvm_sys::analysis::{LLVMVerifierFailureAction, LLVMVerifyModule};
use crate::llvm_sys::bit_writer::LLVMWriteBitcodeToMemoryBuffer;
use crate::llvm_sys::core::*;
use crate::llvm_sys::debuginfo::{LLVMInstructionGetDebugLoc, LLVMInstructionSetDebugLoc};
use crate::llvm_sys::prelude::*;
use crate::llvm_sys::{LLVMAttributeFunctionIndex, LLVMLinkage, LLVMOpcode, LLVMTypeKind, LLVMVisibility};

mod shim {
    use crate::llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
    use std::ffi::{c_char, c_int, c_uint};
    extern "C" {
        pub fn gpuinstr_report_error(
            module: LLVMModuleRef,
            function: LLVMValueRef,
            instruction: LLVMValueRef,
            message: *const c_char,
        );
        pub fn gpuinstr_demangle_qualified_name(mangled: *const c_char, out: *mut c_char, capacity: usize) -> usize;
        pub fn gpuinstr_make_external_declaration(global: LLVMValueRef);
        pub fn gpuinstr_erase_global_value(global: LLVMValueRef);
        pub fn gpuinstr_set_dso_local(global: LLVMValueRef, dso_local: c_int);
        pub fn gpuinstr_has_live_uses(global: LLVMValueRef) -> c_int;
        pub fn gpuinstr_remove_globals_with_prefix(module: LLVMModuleRef, prefix: *const c_char) -> c_uint;
        pub fn gpuinstr_embed_buffer(
            module: LLVMModuleRef,
            name: *const c_char,
            data: *const c_char,
            size: usize,
            section: *const c_char,
        );
        pub fn gpuinstr_delete_function_body(function: LLVMValueRef);
        pub fn gpuinstr_plugin_api_version() -> u32;
        pub fn gpuinstr_register_pass_builder_callbacks(pass_builder: *mut std::ffi::c_void);
    }
}

/// LLVM's `PassPluginLibraryInfo` (llvm/Passes/PassPlugin.h), C layout.
#[repr(C)]
pub struct PassPluginLibraryInfo {
    api_version: u32,
    name: *const c_char,
    version: *const c_char,
    register_callbacks: unsafe extern "C" fn(*mut std::ffi::c_void),
}

/// What LLVM calls when clang or opt loads the plugin (`-fpass-plugin=`,
/// `-load-pass-plugin=`). Defined here rather than in C++ so that the
/// cdylib exports it (Rust exports only its own `#[no_mangle]` symbols).
#[no_mangle]
pub extern "C" fn llvmGetPassPluginInfo() -> PassPluginLibraryInfo {
    PassPluginLibraryInfo {
        // SAFETY: a plain function of cpp/registration.cpp returning a constant.
        api_version: unsafe { shim::gpuinstr_plugin_api_version() },
        name: c"gpuinstr-embed".as_ptr(),
        version: c"0.1".as_ptr(),
        register_callbacks: shim::gpuinstr_register_pass_builder_callbacks,
    }
}

/// Runs pass `kind` (cpp/llvm_shim.h's GPUINSTR_PASS_*) on a module; called
/// by cpp/registration.cpp's pass. Returns whether the module changed.
#[no_mangle]
extern "C" fn gpuinstr_plugin_run(kind: i32, module: LLVMModuleRef) -> i32 {
    let module = Module { raw: module, _module: PhantomData };
    // A pass registered under a kind always has one.
    crate::run_pass(kind, module) as i32
}

/// The pass kind of an `opt -passes=` name, or -1.
#[no_mangle]
extern "C" fn gpuinstr_plugin_pass_kind(name: *const c_char, length: usize) -> i32 {
    // SAFETY: LLVM passes the name's bytes and their length (a StringRef).
    let name = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), length) };
    std::str::from_utf8(name).ok().and_then(crate::pass_kind).unwrap_or(-1)
}

/// LLVM's calling convention number for `amdgpu_kernel`.
const AMDGPU_KERNEL_CALLING_CONV: c_uint = 91;

fn c_string(s: &str) -> CString {
    // Names come from LLVM or from our own constants; neither contains NUL.
    CString::new(s.replace('\0', "")).expect("NUL removed")
}

/// Copies an LLVM (pointer, length) string.
fn lossy(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: LLVM returned a pointer to `len` bytes it owns and keeps alive
    // for the duration of this call.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies and frees an LLVM-allocated message.
fn take_message(ptr: *mut c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: `ptr` is a NUL-terminated string allocated by LLVM, freed once here.
    unsafe {
        let text = CStr::from_ptr(ptr).to_string_lossy().into_owned();
        LLVMDisposeMessage(ptr);
        text
    }
}

fn value_name(value: LLVMValueRef) -> String {
    let mut len = 0usize;
    // SAFETY: `value` is a live value of a live module.
    let ptr = unsafe { LLVMGetValueName2(value, &mut len) };
    lossy(ptr, len)
}

/// A source position from debug information.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLocation {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if self.column != 0 {
            write!(f, ":{}", self.column)?;
        }
        Ok(())
    }
}

fn debug_location(value: LLVMValueRef, is_instruction: bool) -> Option<SourceLocation> {
    let mut len: c_uint = 0;
    // SAFETY: `value` is an instruction, function or global variable (the
    // kinds the LLVM debug-location getters accept).
    unsafe {
        let file = LLVMGetDebugLocFilename(value, &mut len);
        if file.is_null() || len == 0 {
            return None;
        }
        let mut dir_len: c_uint = 0;
        let dir = LLVMGetDebugLocDirectory(value, &mut dir_len);
        let file = lossy(file, len as usize);
        let dir = lossy(dir, dir_len as usize);
        let file = if dir.is_empty() || file.starts_with('/') { file } else { format!("{dir}/{file}") };
        let line = LLVMGetDebugLocLine(value);
        let column = if is_instruction { LLVMGetDebugLocColumn(value) } else { 0 };
        Some(SourceLocation { file, line, column })
    }
}

/// A module the plugin edits in place.
#[derive(Clone, Copy)]
pub struct Module<'m> {
    raw: LLVMModuleRef,
    _module: PhantomData<&'m mut ()>,
}

impl<'m> Module<'m> {
    pub fn target_triple(&self) -> String {
        // SAFETY: live module; LLVM returns a NUL-terminated string it owns.
        unsafe { CStr::from_ptr(LLVMGetTarget(self.raw)).to_string_lossy().into_owned() }
    }

    pub fn functions(&self) -> Vec<Function<'m>> {
        let mut out = Vec::new();
        // SAFETY: iterating the function list of a live module.
        unsafe {
            let mut f = LLVMGetFirstFunction(self.raw);
            while !f.is_null() {
                out.push(Function::wrap(f));
                f = LLVMGetNextFunction(f);
            }
        }
        out
    }

    pub fn globals(&self) -> Vec<Global<'m>> {
        let mut out = Vec::new();
        // SAFETY: iterating the global list of a live module.
        unsafe {
            let mut g = LLVMGetFirstGlobal(self.raw);
            while !g.is_null() {
                out.push(Global::wrap(g));
                g = LLVMGetNextGlobal(g);
            }
        }
        out
    }

    pub fn global(&self, name: &str) -> Option<Global<'m>> {
        let name = c_string(name);
        // SAFETY: live module, NUL-terminated name.
        let g = unsafe { LLVMGetNamedGlobal(self.raw, name.as_ptr()) };
        (!g.is_null()).then(|| Global::wrap(g))
    }

    pub fn function(&self, name: &str) -> Option<Function<'m>> {
        let name = c_string(name);
        // SAFETY: live module, NUL-terminated name.
        let f = unsafe { LLVMGetNamedFunction(self.raw, name.as_ptr()) };
        (!f.is_null()).then(|| Function::wrap(f))
    }

    /// Declares a function (no body) with the given type, or returns the
    /// existing function of that name.
    pub fn declare_function(&self, name: &str, ty: FunctionType<'m>) -> Function<'m> {
        if let Some(f) = self.function(name) {
            return f;
        }
        let c_name = c_string(name);
        // SAFETY: live module; `ty.raw` is a function type of its context.
        let f = unsafe { LLVMAddFunction(self.raw, c_name.as_ptr(), ty.raw) };
        Function::wrap(f)
    }

    /// Reports an error as a diagnostic (clang prints it and fails).
    pub fn report_error(&self, function: Option<Function<'m>>, call: Option<Call<'m>>, message: &str) {
        let message = c_string(message);
        // SAFETY: live module; the handles are null or live values of it.
        unsafe {
            shim::gpuinstr_report_error(
                self.raw,
                function.map_or(std::ptr::null_mut(), |f| f.raw),
                call.map_or(std::ptr::null_mut(), |c| c.raw),
                message.as_ptr(),
            )
        }
    }

    pub fn clone_module(&self) -> OwnedModule {
        // SAFETY: live module; the clone is owned by the returned value.
        OwnedModule { raw: unsafe { LLVMCloneModule(self.raw) } }
    }

    pub fn write_bitcode(&self) -> Vec<u8> {
        // SAFETY: live module; the buffer is copied and freed here.
        unsafe {
            let buffer = LLVMWriteBitcodeToMemoryBuffer(self.raw);
            let start = LLVMGetBufferStart(buffer);
            let size = LLVMGetBufferSize(buffer);
            let bytes = std::slice::from_raw_parts(start.cast::<u8>(), size).to_vec();
            LLVMDisposeMemoryBuffer(buffer);
            bytes
        }
    }

    /// Runs the IR verifier; the error text on failure.
    pub fn verify(&self) -> Result<(), String> {
        let mut message = std::ptr::null_mut();
        // SAFETY: live module; the message is freed by take_message.
        let failed =
            unsafe { LLVMVerifyModule(self.raw, LLVMVerifierFailureAction::LLVMReturnStatusAction, &mut message) };
        let text = take_message(message);
        if failed != 0 {
            Err(text)
        } else {
            Ok(())
        }
    }

    /// Removes globals (and their llvm.used entries) whose names start with
    /// `prefix`; returns how many.
    pub fn remove_globals_with_prefix(&self, prefix: &str) -> u32 {
        let prefix = c_string(prefix);
        // SAFETY: live module, NUL-terminated prefix.
        unsafe { shim::gpuinstr_remove_globals_with_prefix(self.raw, prefix.as_ptr()) }
    }

    /// Adds `data` as a private constant global in `section`.
    pub fn embed_buffer(&self, name: &str, data: &[u8], section: &str) {
        let name = c_string(name);
        let section = c_string(section);
        // SAFETY: live module; the shim copies `data`.
        unsafe {
            shim::gpuinstr_embed_buffer(self.raw, name.as_ptr(), data.as_ptr().cast(), data.len(), section.as_ptr())
        }
    }

    /// The entries of `llvm.global.annotations`.
    pub fn global_annotations(&self) -> Vec<Annotation<'m>> {
        let Some(list) = self.global("llvm.global.annotations") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // SAFETY: reading operands of constants of a live module; every
        // operand index is below LLVMGetNumOperands.
        unsafe {
            let array = LLVMGetInitializer(list.raw);
            if array.is_null() {
                return out;
            }
            for i in 0..LLVMGetNumOperands(array) {
                let entry = LLVMGetOperand(array, i as c_uint);
                if LLVMGetNumOperands(entry) < 2 {
                    continue;
                }
                let target = strip_pointer_casts(LLVMGetOperand(entry, 0));
                let text_global = strip_pointer_casts(LLVMGetOperand(entry, 1));
                let text = constant_string(text_global).unwrap_or_default();
                let function = if LLVMIsAFunction(target).is_null() { None } else { Some(Function::wrap(target)) };
                // Fields 2 and 3: the source file (a string global) and line.
                let mut location = None;
                if LLVMGetNumOperands(entry) >= 4 {
                    let file = constant_string(strip_pointer_casts(LLVMGetOperand(entry, 2)));
                    let line = LLVMGetOperand(entry, 3);
                    if let (Some(file), false) = (file, LLVMIsAConstantInt(line).is_null()) {
                        location =
                            Some(SourceLocation { file, line: LLVMConstIntGetZExtValue(line) as u32, column: 0 });
                    }
                }
                out.push(Annotation { function, text, location });
            }
        }
        out
    }

    /// The demangled, namespace-qualified base name of an Itanium-mangled
    /// function name, if it is one.
    pub fn demangle_qualified_name(mangled: &str) -> Option<String> {
        let c_mangled = c_string(mangled);
        let mut buffer = vec![0u8; 256];
        loop {
            // SAFETY: `buffer` has `buffer.len()` writable bytes.
            let len = unsafe {
                shim::gpuinstr_demangle_qualified_name(c_mangled.as_ptr(), buffer.as_mut_ptr().cast(), buffer.len())
            };
            if len == 0 {
                return None;
            }
            if len < buffer.len() {
                return Some(String::from_utf8_lossy(&buffer[..len]).into_owned());
            }
            buffer.resize(len + 1, 0);
        }
    }
}

/// The contents of a global holding a C string constant.
unsafe fn constant_string(global: LLVMValueRef) -> Option<String> {
    if LLVMIsAGlobalVariable(global).is_null() {
        return None;
    }
    let init = LLVMGetInitializer(global);
    if init.is_null() || LLVMIsConstantString(init) == 0 {
        return None;
    }
    let mut len = 0usize;
    let ptr = LLVMGetAsString(init, &mut len);
    Some(lossy(ptr, len).trim_end_matches('\0').to_string())
}

/// Whether a live value is a call, invoke or callbr instruction.
unsafe fn is_call(value: LLVMValueRef) -> bool {
    !LLVMIsACallInst(value).is_null() || !LLVMIsAInvokeInst(value).is_null() || !LLVMIsACallBrInst(value).is_null()
}

/// Looks through constant bitcasts and address-space casts.
unsafe fn strip_pointer_casts(mut value: LLVMValueRef) -> LLVMValueRef {
    while !LLVMIsAConstantExpr(value).is_null() {
        match LLVMGetConstOpcode(value) {
            LLVMOpcode::LLVMBitCast | LLVMOpcode::LLVMAddrSpaceCast => {
                value = LLVMGetOperand(value, 0);
            }
            _ => break,
        }
    }
    value
}

/// One `llvm.global.annotations` entry.
pub struct Annotation<'m> {
    /// The annotated function, if the annotated value is one.
    pub function: Option<Function<'m>>,
    pub text: String,
    /// Where the annotated declaration is, as clang recorded it.
    pub location: Option<SourceLocation>,
}

/// A module the plugin created (a clone); disposed on drop.
pub struct OwnedModule {
    raw: LLVMModuleRef,
}

impl OwnedModule {
    pub fn module(&mut self) -> Module<'_> {
        Module { raw: self.raw, _module: PhantomData }
    }
}

impl Drop for OwnedModule {
    fn drop(&mut self) {
        // SAFETY: we own the module and nothing refers to it any more.
        unsafe { LLVMDisposeModule(self.raw) }
    }
}

/// A function of a module.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Function<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

fn attribute_kind(name: &str) -> c_uint {
    // SAFETY: plain lookup in LLVM's attribute table.
    unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) }
}

impl<'m> Function<'m> {
    fn wrap(raw: LLVMValueRef) -> Self {
        Function { raw, _module: PhantomData }
    }

    pub fn name(&self) -> String {
        value_name(self.raw)
    }

    pub fn set_name(&self, name: &str) {
        // SAFETY: live function; LLVM copies the name.
        unsafe { LLVMSetValueName2(self.raw, name.as_ptr().cast(), name.len()) }
    }

    pub fn is_kernel(&self) -> bool {
        // SAFETY: live function.
        unsafe { LLVMGetFunctionCallConv(self.raw) == AMDGPU_KERNEL_CALLING_CONV }
    }

    pub fn is_declaration(&self) -> bool {
        // SAFETY: live function.
        unsafe { LLVMIsDeclaration(self.raw) != 0 }
    }

    pub fn function_type(&self) -> FunctionType<'m> {
        // SAFETY: the value type of a function is its function type.
        FunctionType { raw: unsafe { LLVMGlobalGetValueType(self.raw) }, _module: PhantomData }
    }

    pub fn has_attribute(&self, name: &str) -> bool {
        // SAFETY: live function; function attribute index.
        unsafe { !LLVMGetEnumAttributeAtIndex(self.raw, LLVMAttributeFunctionIndex, attribute_kind(name)).is_null() }
    }

    pub fn add_attribute(&self, name: &str) {
        // SAFETY: live function; the attribute belongs to its context.
        unsafe {
            let context = LLVMGetTypeContext(LLVMTypeOf(self.raw));
            let attribute = LLVMCreateEnumAttribute(context, attribute_kind(name), 0);
            LLVMAddAttributeAtIndex(self.raw, LLVMAttributeFunctionIndex, attribute);
        }
    }

    pub fn remove_attribute(&self, name: &str) {
        // SAFETY: live function.
        unsafe { LLVMRemoveEnumAttributeAtIndex(self.raw, LLVMAttributeFunctionIndex, attribute_kind(name)) }
    }

    /// Whether parameter `index` (0-based) carries the enum attribute `name`.
    pub fn param_has_attribute(&self, index: u32, name: &str) -> bool {
        // SAFETY: live function; parameter attribute indices are 1-based.
        unsafe { !LLVMGetEnumAttributeAtIndex(self.raw, index + 1, attribute_kind(name)).is_null() }
    }

    pub fn string_attribute(&self, key: &str) -> Option<String> {
        // SAFETY: live function; the value is copied out.
        unsafe {
            let attribute = LLVMGetStringAttributeAtIndex(
                self.raw,
                LLVMAttributeFunctionIndex,
                key.as_ptr().cast(),
                key.len() as c_uint,
            );
            if attribute.is_null() {
                return None;
            }
            let mut len: c_uint = 0;
            let value = LLVMGetStringAttributeValue(attribute, &mut len);
            Some(lossy(value, len as usize))
        }
    }

    pub fn set_string_attribute(&self, key: &str, value: &str) {
        // SAFETY: live function; the attribute belongs to its context.
        unsafe {
            let context = LLVMGetTypeContext(LLVMTypeOf(self.raw));
            let attribute = LLVMCreateStringAttribute(
                context,
                key.as_ptr().cast(),
                key.len() as c_uint,
                value.as_ptr().cast(),
                value.len() as c_uint,
            );
            LLVMAddAttributeAtIndex(self.raw, LLVMAttributeFunctionIndex, attribute);
        }
    }

    /// Adds every function attribute of `other` to this function.
    pub fn copy_function_attributes_from(&self, other: Function<'m>) {
        // SAFETY: both are live functions; the vector has room for every
        // attribute LLVM reports.
        unsafe {
            let count = LLVMGetAttributeCountAtIndex(other.raw, LLVMAttributeFunctionIndex) as usize;
            let mut attributes = vec![std::ptr::null_mut(); count];
            LLVMGetAttributesAtIndex(other.raw, LLVMAttributeFunctionIndex, attributes.as_mut_ptr());
            for attribute in attributes {
                LLVMAddAttributeAtIndex(self.raw, LLVMAttributeFunctionIndex, attribute);
            }
        }
    }

    /// External linkage, default visibility: an entry point of the module.
    pub fn make_external(&self) {
        // SAFETY: live function.
        unsafe {
            LLVMSetLinkage(self.raw, LLVMLinkage::LLVMExternalLinkage);
            LLVMSetVisibility(self.raw, LLVMVisibility::LLVMDefaultVisibility);
            shim::gpuinstr_set_dso_local(self.raw, 0);
        }
    }

    /// Where the function is defined, from its debug information.
    pub fn location(&self) -> Option<SourceLocation> {
        debug_location(self.raw, false)
    }

    /// Every call instruction in the body.
    pub fn calls(&self) -> Vec<Call<'m>> {
        let mut out = Vec::new();
        // SAFETY: iterating the blocks and instructions of a live function.
        unsafe {
            let mut block = LLVMGetFirstBasicBlock(self.raw);
            while !block.is_null() {
                let mut inst = LLVMGetFirstInstruction(block);
                while !inst.is_null() {
                    if is_call(inst) {
                        out.push(Call { raw: inst, _module: PhantomData });
                    }
                    inst = LLVMGetNextInstruction(inst);
                }
                block = LLVMGetNextBasicBlock(block);
            }
        }
        out
    }

    /// Calls that have this function as their callee.
    pub fn call_sites(&self) -> Vec<Call<'m>> {
        let mut out = Vec::new();
        // SAFETY: walking the use list of a live function.
        unsafe {
            let mut usage = LLVMGetFirstUse(self.raw);
            while !usage.is_null() {
                let user = LLVMGetUser(usage);
                if is_call(user) && LLVMGetCalledValue(user) == self.raw {
                    out.push(Call { raw: user, _module: PhantomData });
                }
                usage = LLVMGetNextUse(usage);
            }
        }
        out
    }

    /// Whether anything live uses the function.
    pub fn has_uses(&self) -> bool {
        // SAFETY: live function.
        unsafe { shim::gpuinstr_has_live_uses(self.raw) != 0 }
    }

    pub fn replace_all_uses_with(&self, other: Function<'m>) {
        // SAFETY: both are live functions of the same module and type.
        unsafe { LLVMReplaceAllUsesWith(self.raw, other.raw) }
    }

    /// Erases the function; it leaves the llvm.used lists, other uses
    /// become poison.
    pub fn erase(self) {
        // SAFETY: live function, not used after this call.
        unsafe { shim::gpuinstr_erase_global_value(self.raw) }
    }

    /// Turns a definition into an external declaration.
    pub fn delete_body(&self) {
        // SAFETY: live function.
        unsafe { shim::gpuinstr_delete_function_body(self.raw) }
    }
}

impl fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.name())
    }
}

/// What a call instruction calls.
pub enum Callee<'m> {
    Function(Function<'m>),
    InlineAsm,
    Indirect,
}

/// A call (or invoke/callbr) instruction.
#[derive(Clone, Copy)]
pub struct Call<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Call<'m> {
    pub fn callee(&self) -> Callee<'m> {
        // SAFETY: live call instruction.
        unsafe {
            let called = LLVMGetCalledValue(self.raw);
            if !LLVMIsAInlineAsm(called).is_null() {
                Callee::InlineAsm
            } else {
                let stripped = strip_pointer_casts(called);
                if LLVMIsAFunction(stripped).is_null() {
                    Callee::Indirect
                } else {
                    Callee::Function(Function::wrap(stripped))
                }
            }
        }
    }

    pub fn location(&self) -> Option<SourceLocation> {
        debug_location(self.raw, true)
    }

    /// Makes this call call `target`, a function of the same type: the
    /// arguments, attributes, tail marker and metadata stay as they are.
    pub fn redirect_to(self, target: Function<'m>) {
        // SAFETY: live call instruction of the same module as `target`; the
        // called operand is a call's last operand, and the types match.
        unsafe {
            let last = LLVMGetNumOperands(self.raw) - 1;
            LLVMSetOperand(self.raw, last as c_uint, target.raw);
        }
    }

    /// Replaces this call by a call to `target` with the same arguments
    /// (types must match) and debug location.
    pub fn replace_with_call_to(self, target: Function<'m>) {
        // SAFETY: live call of the same module as `target`; argument
        // operands come first in a call's operand list.
        unsafe {
            let arg_count = LLVMGetNumArgOperands(self.raw);
            let mut args: Vec<LLVMValueRef> = (0..arg_count).map(|i| LLVMGetOperand(self.raw, i)).collect();
            let context = LLVMGetTypeContext(LLVMTypeOf(self.raw));
            let builder = LLVMCreateBuilderInContext(context);
            LLVMPositionBuilderBefore(builder, self.raw);
            let new_call = LLVMBuildCall2(
                builder,
                LLVMGlobalGetValueType(target.raw),
                target.raw,
                args.as_mut_ptr(),
                arg_count,
                c"".as_ptr(),
            );
            LLVMDisposeBuilder(builder);
            LLVMInstructionSetDebugLoc(new_call, LLVMInstructionGetDebugLoc(self.raw));
            let name = value_name(self.raw);
            LLVMReplaceAllUsesWith(self.raw, new_call);
            LLVMInstructionEraseFromParent(self.raw);
            LLVMSetValueName2(new_call, name.as_ptr().cast(), name.len());
        }
    }
}

/// A global variable of a module.
#[derive(Clone, Copy)]
pub struct Global<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Global<'m> {
    fn wrap(raw: LLVMValueRef) -> Self {
        Global { raw, _module: PhantomData }
    }

    pub fn name(&self) -> String {
        value_name(self.raw)
    }

    pub fn section(&self) -> Option<String> {
        // SAFETY: live global; LLVM returns a NUL-terminated string or null.
        unsafe {
            let section = LLVMGetSection(self.raw);
            (!section.is_null()).then(|| CStr::from_ptr(section).to_string_lossy().into_owned())
        }
    }

    /// A `constant` global with an initializer the program cannot change.
    pub fn is_constant_data(&self) -> bool {
        // SAFETY: live global.
        unsafe {
            LLVMIsGlobalConstant(self.raw) != 0
                && !LLVMGetInitializer(self.raw).is_null()
                && LLVMIsExternallyInitialized(self.raw) == 0
        }
    }

    /// Whether anything live uses the global.
    pub fn has_uses(&self) -> bool {
        // SAFETY: live global.
        unsafe { shim::gpuinstr_has_live_uses(self.raw) != 0 }
    }

    /// Erases the global; it leaves the llvm.used lists, other uses become
    /// poison.
    pub fn erase(self) {
        // SAFETY: live global, not used after this call.
        unsafe { shim::gpuinstr_erase_global_value(self.raw) }
    }

    pub fn make_external_declaration(&self) {
        // SAFETY: live global variable.
        unsafe { shim::gpuinstr_make_external_declaration(self.raw) }
    }
}

/// A function type.
#[derive(Clone, Copy)]
pub struct FunctionType<'m> {
    raw: LLVMTypeRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> FunctionType<'m> {
    pub fn return_type(&self) -> Type<'m> {
        // SAFETY: live function type.
        Type { raw: unsafe { LLVMGetReturnType(self.raw) }, _module: PhantomData }
    }

    pub fn param_types(&self) -> Vec<Type<'m>> {
        // SAFETY: the vector has room for every parameter type.
        unsafe {
            let count = LLVMCountParamTypes(self.raw) as usize;
            let mut raw = vec![std::ptr::null_mut(); count];
            LLVMGetParamTypes(self.raw, raw.as_mut_ptr());
            raw.into_iter().map(|raw| Type { raw, _module: PhantomData }).collect()
        }
    }

    pub fn is_var_arg(&self) -> bool {
        // SAFETY: live function type.
        unsafe { LLVMIsFunctionVarArg(self.raw) != 0 }
    }
}

/// The shape of an IR type, as far as intrinsic names care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeShape {
    Void,
    Integer(u32),
    Half,
    BFloat,
    Float,
    Double,
    Pointer {
        address_space: u32,
    },
    Vector {
        length: u32,
        element: Box<TypeShape>,
    },
    /// Anything else (structs, arrays, ...): printed LLVM type.
    Other(String),
}

/// An IR type.
#[derive(Clone, Copy)]
pub struct Type<'m> {
    raw: LLVMTypeRef,
    _module: PhantomData<&'m ()>,
}

impl Type<'_> {
    pub fn shape(&self) -> TypeShape {
        Self::shape_of(self.raw)
    }

    fn shape_of(raw: LLVMTypeRef) -> TypeShape {
        // SAFETY: live type; each getter matches the kind checked first.
        unsafe {
            match LLVMGetTypeKind(raw) {
                LLVMTypeKind::LLVMVoidTypeKind => TypeShape::Void,
                LLVMTypeKind::LLVMIntegerTypeKind => TypeShape::Integer(LLVMGetIntTypeWidth(raw)),
                LLVMTypeKind::LLVMHalfTypeKind => TypeShape::Half,
                LLVMTypeKind::LLVMBFloatTypeKind => TypeShape::BFloat,
                LLVMTypeKind::LLVMFloatTypeKind => TypeShape::Float,
                LLVMTypeKind::LLVMDoubleTypeKind => TypeShape::Double,
                LLVMTypeKind::LLVMPointerTypeKind => {
                    TypeShape::Pointer { address_space: LLVMGetPointerAddressSpace(raw) }
                }
                LLVMTypeKind::LLVMVectorTypeKind => TypeShape::Vector {
                    length: LLVMGetVectorSize(raw),
                    element: Box::new(Self::shape_of(LLVMGetElementType(raw))),
                },
                LLVMTypeKind::LLVMStructTypeKind if LLVMIsLiteralStruct(raw) == 0 => {
                    let name = LLVMGetStructName(raw);
                    TypeShape::Other(format!("%{}", CStr::from_ptr(name).to_string_lossy()))
                }
                _ => TypeShape::Other(take_message(LLVMPrintTypeToString(raw))),
            }
        }
    }
}
