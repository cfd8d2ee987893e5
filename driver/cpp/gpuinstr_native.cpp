#include "gpuinstr_native.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/Config/llvm-config.h>
#if LLVM_VERSION_MAJOR >= 17
#include <llvm/TargetParser/Triple.h>
#else
#include <llvm/ADT/Triple.h>
#endif
#include <llvm/MC/MCAsmInfo.h>
#include <llvm/MC/MCCodeEmitter.h>
#include <llvm/MC/MCContext.h>
#include <llvm/MC/MCDisassembler/MCDisassembler.h>
#include <llvm/MC/MCFixup.h>
#include <llvm/MC/MCInst.h>
#include <llvm/MC/MCExpr.h>
#include <llvm/MC/MCInstPrinter.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/MCObjectFileInfo.h>
#include <llvm/MC/MCParser/MCAsmParser.h>
#include <llvm/MC/MCParser/MCTargetAsmParser.h>
#include <llvm/MC/MCStreamer.h>
#include <llvm/MC/MCRegisterInfo.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/MCTargetOptions.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/FormattedStream.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

extern "C" void LLVMInitializeAMDGPUTargetInfo();
extern "C" void LLVMInitializeAMDGPUTargetMC();
extern "C" void LLVMInitializeAMDGPUDisassembler();
extern "C" void LLVMInitializeAMDGPUAsmParser();

using namespace llvm;

struct gpuinstr_mc {
  Triple TheTriple{"amdgcn-amd-amdhsa"};
  const Target *TheTarget = nullptr;
  MCTargetOptions Options;
  std::unique_ptr<MCRegisterInfo> MRI;
  std::unique_ptr<MCAsmInfo> MAI;
  std::unique_ptr<MCSubtargetInfo> STI;
  std::unique_ptr<MCInstrInfo> MII;
  std::unique_ptr<MCContext> Context;
  std::unique_ptr<MCDisassembler> Disassembler;
  std::unique_ptr<MCInstPrinter> Printer;
  std::unique_ptr<MCCodeEmitter> Emitter;
};

static void copyError(const std::string &Message, char *Out, size_t Capacity) {
  if (!Out || Capacity == 0)
    return;
  size_t N = std::min(Message.size(), Capacity - 1);
  std::memcpy(Out, Message.data(), N);
  Out[N] = '\0';
}

gpuinstr_mc *gpuinstr_mc_create(const char *Cpu, const char *Features, char *Error, size_t ErrorCapacity) {
  static std::once_flag Initialized;
  std::call_once(Initialized, [] {
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUDisassembler();
    LLVMInitializeAMDGPUAsmParser();
  });
  auto MC = std::make_unique<gpuinstr_mc>();
  std::string Message;
  const Target *T = TargetRegistry::lookupTarget(MC->TheTriple.str(), Message);
  if (!T) {
    copyError(Message, Error, ErrorCapacity);
    return nullptr;
  }
  MC->TheTarget = T;
  MC->MRI.reset(T->createMCRegInfo(MC->TheTriple.str()));
  MC->MAI.reset(T->createMCAsmInfo(*MC->MRI, MC->TheTriple.str(), MC->Options));
  // Asked with no processor first: LLVM prints a warning for one it does not know.
  std::unique_ptr<MCSubtargetInfo> Generic(T->createMCSubtargetInfo(MC->TheTriple.str(), "", ""));
  if (!Generic || !Generic->isCPUStringValid(Cpu)) {
    copyError(std::string("LLVM " LLVM_VERSION_STRING " does not know the processor ") + Cpu, Error, ErrorCapacity);
    return nullptr;
  }
  MC->STI.reset(T->createMCSubtargetInfo(MC->TheTriple.str(), Cpu, Features));
  MC->MII.reset(T->createMCInstrInfo());
  if (!MC->MRI || !MC->MAI || !MC->STI || !MC->MII) {
    copyError("LLVM could not create the AMDGPU MC layer", Error, ErrorCapacity);
    return nullptr;
  }
  MC->Context = std::make_unique<MCContext>(MC->TheTriple, MC->MAI.get(), MC->MRI.get(), MC->STI.get());
  MC->Disassembler.reset(T->createMCDisassembler(*MC->STI, *MC->Context));
  MC->Printer.reset(T->createMCInstPrinter(MC->TheTriple, 0, *MC->MAI, *MC->MII, *MC->MRI));
  MC->Emitter.reset(T->createMCCodeEmitter(*MC->MII, *MC->Context));
  if (!MC->Disassembler || !MC->Printer || !MC->Emitter) {
    copyError("LLVM could not create the AMDGPU disassembler, printer or encoder", Error, ErrorCapacity);
    return nullptr;
  }
  return MC.release();
}

void gpuinstr_mc_destroy(gpuinstr_mc *MC) { delete MC; }

// What differs between the LLVM majors the driver builds against (15, 17, 21).
namespace compat {
// Encodes one instruction (17 and newer write into a byte vector).
static void encode(const MCCodeEmitter &Emitter, const MCInst &Inst, SmallVectorImpl<char> &Bytes,
                   SmallVectorImpl<MCFixup> &Fixups, const MCSubtargetInfo &STI) {
#if LLVM_VERSION_MAJOR >= 17
  Emitter.encodeInstruction(Inst, Bytes, Fixups, STI);
#else
  raw_svector_ostream OS(Bytes);
  Emitter.encodeInstruction(Inst, OS, Fixups, STI);
#endif
}

#if LLVM_VERSION_MAJOR >= 17
using Alignment = Align;
#else
using Alignment = unsigned;
#endif

static MCTargetStreamer *createAsmTargetStreamer(const Target &T, MCStreamer &Streamer, formatted_raw_ostream &OS,
                                                 MCInstPrinter *Printer) {
#if LLVM_VERSION_MAJOR >= 19
  return T.createAsmTargetStreamer(Streamer, OS, Printer);
#else
  return T.createAsmTargetStreamer(Streamer, OS, Printer, /*IsVerboseAsm=*/false);
#endif
}

static ArrayRef<MCPhysReg> implicitDefs(const MCInstrDesc &Desc) {
#if LLVM_VERSION_MAJOR >= 17
  return Desc.implicit_defs();
#else
  return ArrayRef<MCPhysReg>(Desc.getImplicitDefs(), Desc.getNumImplicitDefs());
#endif
}

static ArrayRef<MCPhysReg> implicitUses(const MCInstrDesc &Desc) {
#if LLVM_VERSION_MAJOR >= 17
  return Desc.implicit_uses();
#else
  return ArrayRef<MCPhysReg>(Desc.getImplicitUses(), Desc.getNumImplicitUses());
#endif
}

static const MCOperandInfo &operandInfo(const MCInstrDesc &Desc, unsigned I) {
#if LLVM_VERSION_MAJOR >= 17
  return Desc.operands()[I];
#else
  return Desc.OpInfo[I];
#endif
}
} // namespace compat

static void fromMCInst(const MCInst &Inst, uint32_t Size, gpuinstr_instruction *Out) {
  Out->opcode = Inst.getOpcode();
  Out->size = Size;
  Out->num_operands = 0;
  for (const MCOperand &Op : Inst) {
    if (Out->num_operands == GPUINSTR_MAX_OPERANDS)
      break;
    gpuinstr_operand &O = Out->operands[Out->num_operands++];
    O.reg = 0;
    O.immediate = 0;
    if (Op.isReg()) {
      O.kind = GPUINSTR_OPERAND_REGISTER;
      O.reg = Op.getReg();
    } else if (Op.isImm()) {
      O.kind = GPUINSTR_OPERAND_IMMEDIATE;
      O.immediate = Op.getImm();
    } else if (Op.isSFPImm()) {
      O.kind = GPUINSTR_OPERAND_FLOAT32;
      O.immediate = Op.getSFPImm();
    } else if (Op.isDFPImm()) {
      O.kind = GPUINSTR_OPERAND_FLOAT64;
      O.immediate = static_cast<int64_t>(Op.getDFPImm());
    } else if (Op.isExpr()) {
      // LLVM 22 keeps a literal an inline constant could hold as an
      // expression (`lit(0x0)`, the high half of a pc-relative address):
      // its value is what the instruction reads.
      int64_t Value = 0;
      if (Op.getExpr()->evaluateAsAbsolute(Value)) {
        O.kind = GPUINSTR_OPERAND_IMMEDIATE;
        O.immediate = Value;
      } else {
        O.kind = GPUINSTR_OPERAND_EXPRESSION;
      }
    } else {
      O.kind = GPUINSTR_OPERAND_INVALID;
    }
  }
}

static bool toMCInst(const gpuinstr_instruction *In, MCInst &Inst) {
  Inst.setOpcode(In->opcode);
  for (uint32_t I = 0; I < In->num_operands; ++I) {
    const gpuinstr_operand &O = In->operands[I];
    switch (O.kind) {
    case GPUINSTR_OPERAND_REGISTER:
      Inst.addOperand(MCOperand::createReg(O.reg));
      break;
    case GPUINSTR_OPERAND_IMMEDIATE:
      Inst.addOperand(MCOperand::createImm(O.immediate));
      break;
    case GPUINSTR_OPERAND_FLOAT32:
      Inst.addOperand(MCOperand::createSFPImm(static_cast<uint32_t>(O.immediate)));
      break;
    case GPUINSTR_OPERAND_FLOAT64:
      Inst.addOperand(MCOperand::createDFPImm(static_cast<uint64_t>(O.immediate)));
      break;
    default:
      return false;
    }
  }
  return true;
}

int gpuinstr_mc_decode(gpuinstr_mc *MC, const uint8_t *Bytes, size_t Length, uint64_t Address,
                       gpuinstr_instruction *Out) {
  MCInst Inst;
  uint64_t Size = 0;
  // Our own stream, never LLVM's shared nulls(): streams buffer and
  // re-buffer themselves, and threads decoding at once would share it.
  raw_null_ostream Comments;
  auto Status = MC->Disassembler->getInstruction(Inst, Size, ArrayRef<uint8_t>(Bytes, Length), Address, Comments);
  // SoftFail: decoded, but with bits LLVM calls potentially undefined
  // (LLVM 21 says so of GFX9's v_cmpx_*_e64 with an SGPR destination, which
  // LLVM 15 decodes cleanly and Tensile's kernels use). Taken only when
  // the instruction encodes back to exactly its bytes.
  if (Status == MCDisassembler::SoftFail) {
    SmallString<32> Encoded;
    SmallVector<MCFixup, 4> Fixups;
    compat::encode(*MC->Emitter, Inst, Encoded, Fixups, *MC->STI);
    bool Same = Fixups.empty() && Encoded.size() == Size && Size <= Length &&
                std::memcmp(Encoded.data(), Bytes, Size) == 0;
    if (Same)
      Status = MCDisassembler::Success;
  }
  if (Status != MCDisassembler::Success) {
    Out->opcode = 0;
    Out->size = static_cast<uint32_t>(Size);
    Out->num_operands = 0;
    return 0;
  }
  fromMCInst(Inst, static_cast<uint32_t>(Size), Out);
  return Inst.getNumOperands() <= GPUINSTR_MAX_OPERANDS ? 1 : 0;
}

size_t gpuinstr_mc_print(gpuinstr_mc *MC, const gpuinstr_instruction *Instruction, uint64_t Address, char *Out,
                         size_t Capacity) {
  MCInst Inst;
  if (!toMCInst(Instruction, Inst))
    return 0;
  std::string Text;
  raw_string_ostream OS(Text);
  MC->Printer->printInst(&Inst, Address, "", *MC->STI, OS);
  OS.flush();
  // The printer indents with a tab; callers want the bare instruction.
  size_t Start = Text.find_first_not_of(" \t");
  std::string Trimmed = Start == std::string::npos ? std::string() : Text.substr(Start);
  copyError(Trimmed, Out, Capacity);
  return Trimmed.size();
}

size_t gpuinstr_mc_encode(gpuinstr_mc *MC, const gpuinstr_instruction *Instruction, uint8_t *Out, size_t Capacity) {
  MCInst Inst;
  if (!toMCInst(Instruction, Inst))
    return 0;
  SmallString<32> Bytes;
  SmallVector<MCFixup, 4> Fixups;
  compat::encode(*MC->Emitter, Inst, Bytes, Fixups, *MC->STI);
  if (!Fixups.empty() || Bytes.size() > Capacity)
    return 0;
  std::memcpy(Out, Bytes.data(), Bytes.size());
  return Bytes.size();
}

namespace {
// Hands each instruction the parser emits to a callback; drops everything else.
class CapturingStreamer final : public MCStreamer {
public:
  explicit CapturingStreamer(MCContext &Context) : MCStreamer(Context) {}
  std::function<void(const MCInst &)> OnInstruction;
  bool emitSymbolAttribute(MCSymbol *, MCSymbolAttr) override { return true; }
  void emitCommonSymbol(MCSymbol *, uint64_t, compat::Alignment) override {}
  void emitZerofill(MCSection *, MCSymbol *, uint64_t, compat::Alignment, SMLoc) override {}
  void emitInstruction(const MCInst &Inst, const MCSubtargetInfo &) override { OnInstruction(Inst); }
};
} // namespace

int gpuinstr_mc_assemble(gpuinstr_mc *MC, const char *Text, size_t Length, size_t Lines, uint8_t *Out,
                         uint32_t *Lengths) {
  for (size_t I = 0; I < Lines; ++I)
    Lengths[I] = 0;
  const Target *T = MC->TheTarget;
  SourceMgr Sources;
  Sources.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(StringRef(Text, Length), "gpuinstr"), SMLoc());
  // Lines that do not assemble are reported through `Lengths`, not printed.
  Sources.setDiagHandler([](const SMDiagnostic &, void *) {}, nullptr);
  MCContext Context(MC->TheTriple, MC->MAI.get(), MC->MRI.get(), MC->STI.get(), &Sources);
  std::unique_ptr<MCObjectFileInfo> Files(T->createMCObjectFileInfo(Context, /*PIC=*/false));
  Context.setObjectFileInfo(Files.get());
  std::unique_ptr<MCCodeEmitter> Emitter(T->createMCCodeEmitter(*MC->MII, Context));
  // The AMDGPU parser reaches its target streamer for some operands
  // (xnack_mask_lo, ...): give it one that writes nowhere, to a stream of
  // this call's own. Wrapping LLVM's shared nulls() instead re-buffers that
  // one stream from every thread assembling at once: a whole-library
  // instrument aborted with "double free or corruption" in
  // raw_ostream::SetBufferAndMode. Declared before the streamer, which
  // owns the target streamer writing to them, so they outlive it.
  raw_null_ostream NullStream;
  formatted_raw_ostream Nowhere(NullStream);
  CapturingStreamer Streamer(Context);
  if (!T->createNullTargetStreamer(Streamer))
    compat::createAsmTargetStreamer(*T, Streamer, Nowhere, MC->Printer.get());
  if (!Streamer.getTargetStreamer())
    return 0;
  std::unique_ptr<MCAsmParser> Parser(createMCAsmParser(Sources, Context, Streamer, *MC->MAI));
  std::unique_ptr<MCTargetAsmParser> TargetParser(T->createMCAsmParser(*MC->STI, *Parser, *MC->MII, MC->Options));
  if (!Emitter || !Parser || !TargetParser)
    return 0;
  Parser->setTargetParser(*TargetParser);
  Streamer.OnInstruction = [&](const MCInst &Inst) {
    // The parser has read the instruction's line and stands at the start
    // of the next one (no line is empty).
    unsigned Next = Sources.FindLineNumber(Parser->getTok().getLoc());
    if (Next < 2 || Next - 1 > Lines)
      return;
    size_t Line = Next - 1;
    uint32_t &Size = Lengths[Line - 1];
    SmallString<32> Bytes;
    SmallVector<MCFixup, 4> Fixups;
    compat::encode(*Emitter, Inst, Bytes, Fixups, *MC->STI);
    // A second instruction on a line, fixups or an oversized encoding: not exact.
    if (Size != 0 || !Fixups.empty() || Bytes.size() > GPUINSTR_MAX_ENCODING) {
      Size = UINT32_MAX;
      return;
    }
    std::memcpy(Out + (Line - 1) * GPUINSTR_MAX_ENCODING, Bytes.data(), Bytes.size());
    Size = static_cast<uint32_t>(Bytes.size());
  };
  Parser->Run(/*NoInitialTextSection=*/false);
  for (size_t I = 0; I < Lines; ++I)
    if (Lengths[I] == UINT32_MAX)
      Lengths[I] = 0;
  return 1;
}

unsigned gpuinstr_mc_opcode_count(gpuinstr_mc *MC) { return MC->MII->getNumOpcodes(); }

const char *gpuinstr_mc_opcode_name(gpuinstr_mc *MC, unsigned Opcode, size_t *Length) {
  if (Opcode >= MC->MII->getNumOpcodes()) {
    *Length = 0;
    return "";
  }
  StringRef Name = MC->MII->getName(Opcode);
  *Length = Name.size();
  return Name.data();
}

int gpuinstr_mc_opcode_info(gpuinstr_mc *MC, unsigned Opcode, gpuinstr_opcode_info *Out) {
  if (Opcode >= MC->MII->getNumOpcodes())
    return 0;
  const MCInstrDesc &Desc = MC->MII->get(Opcode);
  Out->num_operands = Desc.getNumOperands();
  Out->num_defs = Desc.getNumDefs();
  Out->size = Desc.getSize();
  Out->target_flags = Desc.TSFlags;
  uint32_t Flags = 0;
  if (Desc.isBranch())
    Flags |= GPUINSTR_FLAG_BRANCH;
  if (Desc.isConditionalBranch())
    Flags |= GPUINSTR_FLAG_CONDITIONAL_BRANCH;
  if (Desc.isIndirectBranch())
    Flags |= GPUINSTR_FLAG_INDIRECT_BRANCH;
  if (Desc.isCall())
    Flags |= GPUINSTR_FLAG_CALL;
  if (Desc.isReturn())
    Flags |= GPUINSTR_FLAG_RETURN;
  if (Desc.isTerminator())
    Flags |= GPUINSTR_FLAG_TERMINATOR;
  if (Desc.isBarrier())
    Flags |= GPUINSTR_FLAG_BARRIER;
  if (Desc.mayLoad())
    Flags |= GPUINSTR_FLAG_MAY_LOAD;
  if (Desc.mayStore())
    Flags |= GPUINSTR_FLAG_MAY_STORE;
  if (Desc.isPseudo())
    Flags |= GPUINSTR_FLAG_PSEUDO;
  if (Desc.isVariadic())
    Flags |= GPUINSTR_FLAG_VARIADIC;
  if (Desc.hasUnmodeledSideEffects())
    Flags |= GPUINSTR_FLAG_HAS_SIDE_EFFECTS;
  Out->flags = Flags;
  // The arrays live in LLVM's static tables.
  ArrayRef<MCPhysReg> ImplicitDefs = compat::implicitDefs(Desc), ImplicitUses = compat::implicitUses(Desc);
  Out->num_implicit_defs = ImplicitDefs.size();
  Out->num_implicit_uses = ImplicitUses.size();
  Out->implicit_defs = ImplicitDefs.data();
  Out->implicit_uses = ImplicitUses.data();
  for (unsigned I = 0; I < GPUINSTR_MAX_OPERANDS; ++I) {
    if (I < Desc.getNumOperands()) {
      Out->operand_register_class[I] = compat::operandInfo(Desc, I).RegClass;
      Out->operand_type[I] = compat::operandInfo(Desc, I).OperandType;
    } else {
      Out->operand_register_class[I] = -1;
      Out->operand_type[I] = 0;
    }
  }
  return 1;
}

gpuinstr_generic_operand_types gpuinstr_mc_generic_operand_types(void) {
  return {MCOI::OPERAND_IMMEDIATE, MCOI::OPERAND_PCREL, MCOI::OPERAND_FIRST_TARGET};
}

unsigned gpuinstr_mc_register_count(gpuinstr_mc *MC) { return MC->MRI->getNumRegs(); }

const char *gpuinstr_mc_register_name(gpuinstr_mc *MC, unsigned Reg, size_t *Length) {
  if (Reg >= MC->MRI->getNumRegs()) {
    *Length = 0;
    return "";
  }
  const char *Name = MC->MRI->getName(Reg);
  *Length = std::strlen(Name);
  return Name;
}

size_t gpuinstr_mc_register_units(gpuinstr_mc *MC, unsigned Reg, uint16_t *Out, size_t Capacity) {
  size_t Count = 0;
#if LLVM_VERSION_MAJOR >= 17
  for (auto Unit : MC->MRI->regunits(Reg)) {
#else
  for (MCRegUnitIterator Units(Reg, MC->MRI.get()); Units.isValid(); ++Units) {
    unsigned Unit = *Units;
#endif
    if (Count < Capacity)
      Out[Count] = static_cast<uint16_t>(Unit);
    ++Count;
  }
  return Count;
}

unsigned gpuinstr_mc_register_bits(gpuinstr_mc *MC, unsigned Reg) {
  // The smallest register class containing the register gives its width.
  unsigned Best = 0;
  for (unsigned I = 0; I < MC->MRI->getNumRegClasses(); ++I) {
    const MCRegisterClass &Class = MC->MRI->getRegClass(I);
    if (Class.contains(Reg)) {
      unsigned Bits = Class.getSizeInBits();
      if (Bits && (Best == 0 || Bits < Best))
        Best = Bits;
    }
  }
  return Best;
}

unsigned gpuinstr_mc_class_count(gpuinstr_mc *MC) { return MC->MRI->getNumRegClasses(); }

const char *gpuinstr_mc_class_name(gpuinstr_mc *MC, unsigned Class, size_t *Length) {
  if (Class >= MC->MRI->getNumRegClasses()) {
    *Length = 0;
    return "";
  }
  const char *Name = MC->MRI->getRegClassName(&MC->MRI->getRegClass(Class));
  *Length = std::strlen(Name);
  return Name;
}

size_t gpuinstr_mc_class_registers(gpuinstr_mc *MC, unsigned Class, uint16_t *Out, size_t Capacity) {
  if (Class >= MC->MRI->getNumRegClasses())
    return 0;
  const MCRegisterClass &RC = MC->MRI->getRegClass(Class);
  size_t Count = 0;
  for (MCPhysReg Reg : RC) {
    if (Count < Capacity)
      Out[Count] = static_cast<uint16_t>(Reg);
    ++Count;
  }
  return Count;
}

unsigned gpuinstr_mc_class_bits(gpuinstr_mc *MC, unsigned Class) {
  if (Class >= MC->MRI->getNumRegClasses())
    return 0;
  return MC->MRI->getRegClass(Class).getSizeInBits();
}
