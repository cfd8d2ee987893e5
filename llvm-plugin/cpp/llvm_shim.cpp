#include "llvm_shim.h"

#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Instruction.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace llvm;

void gpuinstr_report_error(LLVMModuleRef ModuleRef, LLVMValueRef FunctionRef,
                           LLVMValueRef InstructionRef, const char *Message) {
  Module &M = *unwrap(ModuleRef);
  if (!FunctionRef) {
    M.getContext().emitError(Message);
    return;
  }
  auto &F = *cast<Function>(unwrap(FunctionRef));
  DiagnosticLocation Loc;
  if (InstructionRef) {
    if (const DebugLoc &DL = cast<Instruction>(unwrap(InstructionRef))->getDebugLoc())
      Loc = DiagnosticLocation(DL);
  }
  if (!Loc.isValid())
    if (const DISubprogram *SP = F.getSubprogram())
      Loc = DiagnosticLocation(SP);
  M.getContext().diagnose(DiagnosticInfoUnsupported(F, Message, Loc));
}

size_t gpuinstr_demangle_qualified_name(const char *Mangled, char *Out,
                                        size_t Capacity) {
  ItaniumPartialDemangler Demangler;
  if (Demangler.partialDemangle(Mangled) || !Demangler.isFunction())
    return 0;
  std::string Result;
  size_t Size = 0;
  // Both calls return malloc'ed buffers we own.
  if (char *Context = Demangler.getFunctionDeclContextName(nullptr, &Size)) {
    if (Context[0] != '\0') {
      Result += Context;
      Result += "::";
    }
    std::free(Context);
  }
  char *Base = Demangler.getFunctionBaseName(nullptr, &Size);
  if (!Base)
    return 0;
  Result += Base;
  std::free(Base);
  if (Capacity > 0) {
    size_t N = Result.size() < Capacity - 1 ? Result.size() : Capacity - 1;
    std::memcpy(Out, Result.data(), N);
    Out[N] = '\0';
  }
  return Result.size();
}

void gpuinstr_make_external_declaration(LLVMValueRef GlobalRef) {
  auto &GV = *cast<GlobalVariable>(unwrap(GlobalRef));
  GV.setInitializer(nullptr);
  GV.setComdat(nullptr);
  GV.setLinkage(GlobalValue::ExternalLinkage);
  GV.setVisibility(GlobalValue::DefaultVisibility);
  GV.setDSOLocal(false);
}

void gpuinstr_delete_function_body(LLVMValueRef FunctionRef) {
  auto &F = *cast<Function>(unwrap(FunctionRef));
  F.deleteBody();
  F.setComdat(nullptr);
  F.setVisibility(GlobalValue::DefaultVisibility);
  F.setDSOLocal(false);
  F.removeFnAttr(Attribute::OptimizeNone);
  F.removeFnAttr(Attribute::NoInline);
}

int gpuinstr_has_live_uses(LLVMValueRef GlobalRef) {
  auto *GV = cast<GlobalValue>(unwrap(GlobalRef));
  GV->removeDeadConstantUsers();
  return !GV->use_empty();
}

void gpuinstr_set_dso_local(LLVMValueRef GlobalRef, int DsoLocal) {
  cast<GlobalValue>(unwrap(GlobalRef))->setDSOLocal(DsoLocal != 0);
}

// Rebuilds one of the llvm.used lists without the given globals.
static void removeFromUsedList(Module &M, const char *ListName,
                               const SmallPtrSetImpl<GlobalValue *> &Remove) {
  GlobalVariable *List = M.getGlobalVariable(ListName);
  if (!List || !List->hasInitializer())
    return;
  auto *Init = cast<ConstantArray>(List->getInitializer());
  std::vector<Constant *> Kept;
  for (Use &Op : Init->operands()) {
    auto *C = cast<Constant>(Op.get());
    if (!Remove.count(dyn_cast<GlobalValue>(C->stripPointerCasts())))
      Kept.push_back(C);
  }
  if (Kept.size() == Init->getNumOperands())
    return;
  std::string Name = List->getName().str();
  std::string Section = List->getSection().str();
  List->eraseFromParent();
  if (Kept.empty())
    return;
  auto *Type = ArrayType::get(Kept.front()->getType(), Kept.size());
  auto *NewList = new GlobalVariable(M, Type, false, GlobalValue::AppendingLinkage,
                                     ConstantArray::get(Type, Kept), Name);
  NewList->setSection(Section);
}

static void eraseGlobalValues(Module &M, const SmallPtrSetImpl<GlobalValue *> &Erase) {
  removeFromUsedList(M, "llvm.used", Erase);
  removeFromUsedList(M, "llvm.compiler.used", Erase);
  for (GlobalValue *GV : Erase) {
    GV->removeDeadConstantUsers();
    if (!GV->use_empty())
      GV->replaceAllUsesWith(PoisonValue::get(GV->getType()));
    GV->eraseFromParent();
  }
}

void gpuinstr_erase_global_value(LLVMValueRef GlobalRef) {
  auto *GV = cast<GlobalValue>(unwrap(GlobalRef));
  SmallPtrSet<GlobalValue *, 1> Erase;
  Erase.insert(GV);
  eraseGlobalValues(*GV->getParent(), Erase);
}

unsigned gpuinstr_remove_globals_with_prefix(LLVMModuleRef ModuleRef,
                                             const char *Prefix) {
  Module &M = *unwrap(ModuleRef);
  SmallPtrSet<GlobalValue *, 4> Remove;
  for (GlobalVariable &GV : M.globals())
    // StringRef::startswith is gone in LLVM 21 and starts_with new in 17.
    if (GV.getName().substr(0, std::strlen(Prefix)) == Prefix)
      Remove.insert(&GV);
  unsigned Count = Remove.size();
  if (Count)
    eraseGlobalValues(M, Remove);
  return Count;
}

void gpuinstr_embed_buffer(LLVMModuleRef ModuleRef, const char *Name,
                           const char *Data, size_t Size, const char *Section) {
  Module &M = *unwrap(ModuleRef);
  Constant *Contents =
      ConstantDataArray::get(M.getContext(), ArrayRef<char>(Data, Size));
  auto *GV = new GlobalVariable(M, Contents->getType(), /*isConstant=*/true,
                                GlobalValue::PrivateLinkage, Contents, Name);
  GV->setSection(Section);
  GV->setAlignment(Align(1));
  appendToCompilerUsed(M, {GV});
}
