// The driver's only C++: LLVM 15's MC layer for AMDGPU (decode, print,
// encode, assemble, describe opcodes and registers). Called from driver/src/native/
// only. Everything here is plain C types so Rust can call it directly.
#ifndef GPUINSTR_NATIVE_H
#define GPUINSTR_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUINSTR_MAX_OPERANDS 32

typedef struct gpuinstr_mc gpuinstr_mc;

/// An MC for one target: triple "amdgcn-amd-amdhsa", cpu "gfx90a",
/// features "+xnack,-sramecc" (may be empty). Null on failure, with the
/// reason in error.
gpuinstr_mc *gpuinstr_mc_create(const char *cpu, const char *features, char *error, size_t error_capacity);
void gpuinstr_mc_destroy(gpuinstr_mc *mc);

enum gpuinstr_operand_kind {
  GPUINSTR_OPERAND_INVALID = 0,
  GPUINSTR_OPERAND_REGISTER = 1,
  GPUINSTR_OPERAND_IMMEDIATE = 2,
  GPUINSTR_OPERAND_FLOAT32 = 3, // bit pattern in `immediate`
  GPUINSTR_OPERAND_FLOAT64 = 4, // bit pattern in `immediate`
  GPUINSTR_OPERAND_EXPRESSION = 5,
};

typedef struct {
  uint32_t kind;
  uint32_t reg;
  int64_t immediate;
} gpuinstr_operand;

typedef struct {
  uint32_t opcode;
  uint32_t size;
  uint32_t num_operands;
  gpuinstr_operand operands[GPUINSTR_MAX_OPERANDS];
} gpuinstr_instruction;

/// Decodes one instruction at `address`. Returns 1 on success; 0 when the
/// bytes do not decode (then `size` is how many bytes LLVM would skip).
int gpuinstr_mc_decode(gpuinstr_mc *mc, const uint8_t *bytes, size_t length, uint64_t address,
                       gpuinstr_instruction *out);

/// Prints an instruction as llvm-mc reads it. Returns the text length (which
/// may exceed capacity; the text is cut but NUL-terminated).
size_t gpuinstr_mc_print(gpuinstr_mc *mc, const gpuinstr_instruction *instruction, uint64_t address, char *out,
                         size_t capacity);

/// Encodes an instruction. Returns the size, or 0 when it has fixups (its
/// bytes depend on a symbol) or cannot be encoded.
size_t gpuinstr_mc_encode(gpuinstr_mc *mc, const gpuinstr_instruction *instruction, uint8_t *out, size_t capacity);

/// Assembles `text`, one instruction per line (`lines` lines, no directives),
/// as llvm-mc would. Line i's encoding goes to out[i * GPUINSTR_MAX_ENCODING
/// ...] and its length to lengths[i]: 0 when the line does not assemble to
/// exactly one instruction without fixups. Returns 0 when the assembler
/// cannot be set up.
#define GPUINSTR_MAX_ENCODING 16
int gpuinstr_mc_assemble(gpuinstr_mc *mc, const char *text, size_t length, size_t lines, uint8_t *out,
                         uint32_t *lengths);

unsigned gpuinstr_mc_opcode_count(gpuinstr_mc *mc);
/// The TableGen name of an opcode (static storage).
const char *gpuinstr_mc_opcode_name(gpuinstr_mc *mc, unsigned opcode, size_t *length);

enum gpuinstr_opcode_flag {
  GPUINSTR_FLAG_BRANCH = 1 << 0,
  GPUINSTR_FLAG_CONDITIONAL_BRANCH = 1 << 1,
  GPUINSTR_FLAG_INDIRECT_BRANCH = 1 << 2,
  GPUINSTR_FLAG_CALL = 1 << 3,
  GPUINSTR_FLAG_RETURN = 1 << 4,
  GPUINSTR_FLAG_TERMINATOR = 1 << 5,
  GPUINSTR_FLAG_BARRIER = 1 << 6,
  GPUINSTR_FLAG_MAY_LOAD = 1 << 7,
  GPUINSTR_FLAG_MAY_STORE = 1 << 8,
  GPUINSTR_FLAG_PSEUDO = 1 << 9,
  GPUINSTR_FLAG_VARIADIC = 1 << 10,
  GPUINSTR_FLAG_HAS_SIDE_EFFECTS = 1 << 11,
};

typedef struct {
  uint32_t num_operands;
  uint32_t num_defs;
  uint32_t flags;
  uint32_t size;
  uint64_t target_flags; // TSFlags (SIInstrFlags)
  uint32_t num_implicit_defs;
  uint32_t num_implicit_uses;
  const uint16_t *implicit_defs;
  const uint16_t *implicit_uses;
  /// Per operand: register class id (-1 for none) and operand type.
  int16_t operand_register_class[GPUINSTR_MAX_OPERANDS];
  uint8_t operand_type[GPUINSTR_MAX_OPERANDS];
} gpuinstr_opcode_info;

/// Describes an opcode. Returns 0 if it does not exist.
int gpuinstr_mc_opcode_info(gpuinstr_mc *mc, unsigned opcode, gpuinstr_opcode_info *out);

/// LLVM's generic operand types (llvm::MCOI::OperandType): immediate,
/// pc-relative, and the first target-specific type.
typedef struct {
  uint8_t immediate;
  uint8_t pc_relative;
  uint8_t first_target;
} gpuinstr_generic_operand_types;
gpuinstr_generic_operand_types gpuinstr_mc_generic_operand_types(void);

unsigned gpuinstr_mc_register_count(gpuinstr_mc *mc);
/// The TableGen name of a register ("SGPR0_SGPR1", "VCC", "EXEC_LO").
const char *gpuinstr_mc_register_name(gpuinstr_mc *mc, unsigned reg, size_t *length);
/// The register units (the smallest pieces, e.g. 32-bit halves, plus the
/// hi16/lo16 halves LLVM models) a register covers. Returns the count.
size_t gpuinstr_mc_register_units(gpuinstr_mc *mc, unsigned reg, uint16_t *out, size_t capacity);
/// Width of a register in bits (0 if unknown).
unsigned gpuinstr_mc_register_bits(gpuinstr_mc *mc, unsigned reg);

unsigned gpuinstr_mc_class_count(gpuinstr_mc *mc);
/// The TableGen name of a register class ("SReg_32_XM0_XEXEC"); MIR spells
/// it in lower case.
const char *gpuinstr_mc_class_name(gpuinstr_mc *mc, unsigned reg_class, size_t *length);
/// The registers of a class. Returns the count.
size_t gpuinstr_mc_class_registers(gpuinstr_mc *mc, unsigned reg_class, uint16_t *out, size_t capacity);
/// Register size of a class in bits.
unsigned gpuinstr_mc_class_bits(gpuinstr_mc *mc, unsigned reg_class);

#ifdef __cplusplus
}
#endif

#endif
