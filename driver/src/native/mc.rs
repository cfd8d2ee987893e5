//! LLVM 15's AMDGPU MC layer: decode, print and encode instructions,
//! describe opcodes and registers.

use std::ffi::{c_char, c_uint, CStr, CString};

use thiserror::Error;

mod ffi {
    use std::ffi::{c_char, c_int, c_uint};

    pub const MAX_OPERANDS: usize = 32;
    pub const MAX_ENCODING: usize = 16;

    #[repr(C)]
    pub struct Mc {
        _private: [u8; 0],
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Operand {
        pub kind: u32,
        pub reg: u32,
        pub immediate: i64,
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Instruction {
        pub opcode: u32,
        pub size: u32,
        pub num_operands: u32,
        pub operands: [Operand; MAX_OPERANDS],
    }

    #[repr(C)]
    pub struct OpcodeInfo {
        pub num_operands: u32,
        pub num_defs: u32,
        pub flags: u32,
        pub size: u32,
        pub target_flags: u64,
        pub num_implicit_defs: u32,
        pub num_implicit_uses: u32,
        pub implicit_defs: *const u16,
        pub implicit_uses: *const u16,
        pub operand_register_class: [i16; MAX_OPERANDS],
        pub operand_type: [u8; MAX_OPERANDS],
    }

    extern "C" {
        pub fn gpuinstr_mc_create(
            cpu: *const c_char,
            features: *const c_char,
            error: *mut c_char,
            capacity: usize,
        ) -> *mut Mc;
        pub fn gpuinstr_mc_destroy(mc: *mut Mc);
        pub fn gpuinstr_mc_assemble(
            mc: *mut Mc,
            text: *const c_char,
            length: usize,
            lines: usize,
            out: *mut u8,
            lengths: *mut u32,
        ) -> c_int;
        pub fn gpuinstr_mc_decode(
            mc: *mut Mc,
            bytes: *const u8,
            length: usize,
            address: u64,
            out: *mut Instruction,
        ) -> c_int;
        pub fn gpuinstr_mc_print(
            mc: *mut Mc,
            instruction: *const Instruction,
            address: u64,
            out: *mut c_char,
            capacity: usize,
        ) -> usize;
        pub fn gpuinstr_mc_encode(mc: *mut Mc, instruction: *const Instruction, out: *mut u8, capacity: usize)
            -> usize;
        pub fn gpuinstr_mc_opcode_count(mc: *mut Mc) -> c_uint;
        pub fn gpuinstr_mc_opcode_name(mc: *mut Mc, opcode: c_uint, length: *mut usize) -> *const c_char;
        pub fn gpuinstr_mc_opcode_info(mc: *mut Mc, opcode: c_uint, out: *mut OpcodeInfo) -> c_int;
        pub fn gpuinstr_mc_generic_operand_types() -> super::GenericOperandTypes;
        pub fn gpuinstr_mc_register_count(mc: *mut Mc) -> c_uint;
        pub fn gpuinstr_mc_register_name(mc: *mut Mc, reg: c_uint, length: *mut usize) -> *const c_char;
        pub fn gpuinstr_mc_register_units(mc: *mut Mc, reg: c_uint, out: *mut u16, capacity: usize) -> usize;
        pub fn gpuinstr_mc_register_bits(mc: *mut Mc, reg: c_uint) -> c_uint;
        pub fn gpuinstr_mc_class_count(mc: *mut Mc) -> c_uint;
        pub fn gpuinstr_mc_class_name(mc: *mut Mc, class: c_uint, length: *mut usize) -> *const c_char;
        pub fn gpuinstr_mc_class_registers(mc: *mut Mc, class: c_uint, out: *mut u16, capacity: usize) -> usize;
        pub fn gpuinstr_mc_class_bits(mc: *mut Mc, class: c_uint) -> c_uint;
    }
}

#[derive(Debug, Error)]
#[error("LLVM's AMDGPU MC layer for {cpu}{features}: {message}")]
pub struct McError {
    pub cpu: String,
    pub features: String,
    pub message: String,
}

/// An operand of a decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// An LLVM MC register number (only meaningful with the same Mc).
    Register(u32),
    Immediate(i64),
    /// Bit pattern of a 32-bit float immediate.
    Float32(u32),
    /// Bit pattern of a 64-bit float immediate.
    Float64(u64),
    /// An MC expression (the disassembler makes none without a symbolizer).
    Expression,
}

/// A decoded instruction, as LLVM's MCInst holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RawInstruction {
    pub opcode: u32,
    pub size: u32,
    pub operands: Vec<Operand>,
}

/// Opcode properties from LLVM's MCInstrDesc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpcodeFlags(pub u32);

impl OpcodeFlags {
    pub const BRANCH: u32 = 1 << 0;
    pub const CONDITIONAL_BRANCH: u32 = 1 << 1;
    pub const INDIRECT_BRANCH: u32 = 1 << 2;
    pub const CALL: u32 = 1 << 3;
    pub const RETURN: u32 = 1 << 4;
    pub const TERMINATOR: u32 = 1 << 5;
    pub const BARRIER: u32 = 1 << 6;
    pub const MAY_LOAD: u32 = 1 << 7;
    pub const MAY_STORE: u32 = 1 << 8;
    pub const PSEUDO: u32 = 1 << 9;
    pub const VARIADIC: u32 = 1 << 10;
    pub const HAS_SIDE_EFFECTS: u32 = 1 << 11;

    pub fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

/// LLVM's generic operand types (`llvm::MCOI::OperandType`) in the LLVM
/// this build uses; the AMDGPU ones start at `first_target`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenericOperandTypes {
    pub immediate: u8,
    pub pc_relative: u8,
    pub first_target: u8,
}

impl GenericOperandTypes {
    pub fn of_this_llvm() -> GenericOperandTypes {
        // SAFETY: returns constants of LLVM's headers.
        unsafe { ffi::gpuinstr_mc_generic_operand_types() }
    }
}

/// What LLVM knows about an opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    pub num_operands: u32,
    pub num_defs: u32,
    pub flags: OpcodeFlags,
    pub size: u32,
    pub target_flags: u64,
    pub implicit_defs: Vec<u16>,
    pub implicit_uses: Vec<u16>,
    pub operand_register_classes: Vec<i16>,
    pub operand_types: Vec<u8>,
}

/// LLVM's MC layer for one AMDGPU target.
pub struct Mc {
    raw: *mut ffi::Mc,
}

// SAFETY: the MC objects behind the handle have no thread affinity; the
// handle is used by one thread at a time (Mc is not Sync).
unsafe impl Send for Mc {}

fn copy_str(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: LLVM returned `len` bytes of static storage.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// The instruction for LLVM, None when it is not one the disassembler made:
/// opcode 0 (what an undecodable instruction carries) is TargetOpcode::PHI,
/// which LLVM's printer and encoder abort on.
fn to_ffi(instruction: &RawInstruction) -> Option<ffi::Instruction> {
    if instruction.opcode == 0 || instruction.operands.len() > ffi::MAX_OPERANDS {
        return None;
    }
    let mut raw = ffi::Instruction {
        opcode: instruction.opcode,
        size: instruction.size,
        num_operands: instruction.operands.len() as u32,
        operands: [ffi::Operand { kind: 0, reg: 0, immediate: 0 }; ffi::MAX_OPERANDS],
    };
    for (slot, operand) in raw.operands.iter_mut().zip(&instruction.operands) {
        *slot = match *operand {
            Operand::Register(reg) => ffi::Operand { kind: 1, reg, immediate: 0 },
            Operand::Immediate(value) => ffi::Operand { kind: 2, reg: 0, immediate: value },
            Operand::Float32(bits) => ffi::Operand { kind: 3, reg: 0, immediate: i64::from(bits) },
            Operand::Float64(bits) => ffi::Operand { kind: 4, reg: 0, immediate: bits as i64 },
            Operand::Expression => return None,
        };
    }
    Some(raw)
}

impl Mc {
    /// The MC layer for `cpu` (`gfx90a`) with target features (`+xnack`).
    /// Whether this LLVM knows a processor (`gfx942`) at all.
    pub fn knows_processor(cpu: &str) -> bool {
        Mc::new(cpu, "").is_ok()
    }

    pub fn new(cpu: &str, features: &str) -> Result<Self, McError> {
        let error = |message: String| McError {
            cpu: cpu.to_string(),
            features: if features.is_empty() { String::new() } else { format!(" ({features})") },
            message,
        };
        let c_cpu = CString::new(cpu).map_err(|_| error("the processor name contains NUL".into()))?;
        let c_features = CString::new(features).map_err(|_| error("the features contain NUL".into()))?;
        let mut message = vec![0u8; 512];
        // SAFETY: NUL-terminated inputs; `message` has the stated capacity.
        let raw = unsafe {
            ffi::gpuinstr_mc_create(c_cpu.as_ptr(), c_features.as_ptr(), message.as_mut_ptr().cast(), message.len())
        };
        if raw.is_null() {
            let text = CStr::from_bytes_until_nul(&message).map(|c| c.to_string_lossy().into_owned());
            return Err(error(text.unwrap_or_default()));
        }
        Ok(Mc { raw })
    }

    /// Decodes the instruction at the start of `bytes`; on failure, the
    /// number of bytes LLVM would skip.
    pub fn decode(&self, bytes: &[u8], address: u64) -> Result<RawInstruction, u32> {
        let mut out = std::mem::MaybeUninit::<ffi::Instruction>::uninit();
        // SAFETY: `out` is written by the callee before it returns.
        let (ok, out) = unsafe {
            let ok = ffi::gpuinstr_mc_decode(self.raw, bytes.as_ptr(), bytes.len(), address, out.as_mut_ptr());
            (ok, out.assume_init())
        };
        if ok == 0 {
            return Err(out.size);
        }
        let operands = out.operands[..out.num_operands as usize]
            .iter()
            .map(|o| match o.kind {
                1 => Operand::Register(o.reg),
                2 => Operand::Immediate(o.immediate),
                3 => Operand::Float32(o.immediate as u32),
                4 => Operand::Float64(o.immediate as u64),
                _ => Operand::Expression,
            })
            .collect();
        Ok(RawInstruction { opcode: out.opcode, size: out.size, operands })
    }

    /// The instruction as llvm-mc reads it (None if it has an expression).
    pub fn print(&self, instruction: &RawInstruction, address: u64) -> Option<String> {
        let raw = to_ffi(instruction)?;
        let mut buffer = vec![0u8; 256];
        loop {
            // SAFETY: `buffer` has the stated capacity.
            let length =
                unsafe { ffi::gpuinstr_mc_print(self.raw, &raw, address, buffer.as_mut_ptr().cast(), buffer.len()) };
            if length < buffer.len() {
                return Some(String::from_utf8_lossy(&buffer[..length]).into_owned());
            }
            buffer.resize(length + 1, 0);
        }
    }

    /// The instruction's encoding (None if it needs a fixup).
    pub fn encode(&self, instruction: &RawInstruction) -> Option<Vec<u8>> {
        let raw = to_ffi(instruction)?;
        let mut buffer = [0u8; 32];
        // SAFETY: `buffer` has the stated capacity.
        let size = unsafe { ffi::gpuinstr_mc_encode(self.raw, &raw, buffer.as_mut_ptr(), buffer.len()) };
        (size > 0).then(|| buffer[..size].to_vec())
    }

    /// What llvm-mc makes of each line (one instruction each, no newlines
    /// inside): its encoding, or None when it does not assemble to exactly
    /// one instruction without fixups. The lines are assembled in one batch.
    pub fn assemble(&self, lines: &[&str]) -> Vec<Option<Vec<u8>>> {
        if lines.is_empty() {
            return Vec::new();
        }
        let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            // One line each, none empty (lines are found by position).
            if line.trim().is_empty() || line.contains('\n') {
                text.push_str(".invalid_line");
            } else {
                text.push_str(line);
            }
            text.push('\n');
        }
        let mut out = vec![0u8; lines.len() * ffi::MAX_ENCODING];
        let mut lengths = vec![0u32; lines.len()];
        // SAFETY: `out` and `lengths` have room for `lines.len()` entries.
        let ok = unsafe {
            ffi::gpuinstr_mc_assemble(
                self.raw,
                text.as_ptr().cast(),
                text.len(),
                lines.len(),
                out.as_mut_ptr(),
                lengths.as_mut_ptr(),
            )
        };
        (0..lines.len())
            .map(|i| {
                let length = lengths[i] as usize;
                (ok != 0 && length > 0 && length <= ffi::MAX_ENCODING)
                    .then(|| out[i * ffi::MAX_ENCODING..i * ffi::MAX_ENCODING + length].to_vec())
            })
            .collect()
    }

    pub fn opcode_count(&self) -> u32 {
        // SAFETY: live handle.
        unsafe { ffi::gpuinstr_mc_opcode_count(self.raw) }
    }

    pub fn opcode_name(&self, opcode: u32) -> String {
        let mut length = 0usize;
        // SAFETY: live handle; the name has static storage.
        let ptr = unsafe { ffi::gpuinstr_mc_opcode_name(self.raw, opcode as c_uint, &mut length) };
        copy_str(ptr, length)
    }

    pub fn opcode_info(&self, opcode: u32) -> Option<OpcodeInfo> {
        let mut out = std::mem::MaybeUninit::<ffi::OpcodeInfo>::uninit();
        // SAFETY: `out` is written when the call returns 1; the implicit
        // operand lists are static tables of the stated lengths.
        unsafe {
            if ffi::gpuinstr_mc_opcode_info(self.raw, opcode as c_uint, out.as_mut_ptr()) == 0 {
                return None;
            }
            let out = out.assume_init();
            let list = |ptr: *const u16, len: u32| {
                if ptr.is_null() || len == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(ptr, len as usize).to_vec()
                }
            };
            let operands = (out.num_operands as usize).min(ffi::MAX_OPERANDS);
            Some(OpcodeInfo {
                num_operands: out.num_operands,
                num_defs: out.num_defs,
                flags: OpcodeFlags(out.flags),
                size: out.size,
                target_flags: out.target_flags,
                implicit_defs: list(out.implicit_defs, out.num_implicit_defs),
                implicit_uses: list(out.implicit_uses, out.num_implicit_uses),
                operand_register_classes: out.operand_register_class[..operands].to_vec(),
                operand_types: out.operand_type[..operands].to_vec(),
            })
        }
    }

    pub fn register_count(&self) -> u32 {
        // SAFETY: live handle.
        unsafe { ffi::gpuinstr_mc_register_count(self.raw) }
    }

    pub fn register_name(&self, reg: u32) -> String {
        let mut length = 0usize;
        // SAFETY: live handle; the name has static storage.
        let ptr = unsafe { ffi::gpuinstr_mc_register_name(self.raw, reg as c_uint, &mut length) };
        copy_str(ptr, length)
    }

    pub fn register_units(&self, reg: u32) -> Vec<u16> {
        let mut units = vec![0u16; 64];
        // SAFETY: `units` has the stated capacity.
        let count =
            unsafe { ffi::gpuinstr_mc_register_units(self.raw, reg as c_uint, units.as_mut_ptr(), units.len()) };
        if count > units.len() {
            units.resize(count, 0);
            // SAFETY: as above, with room for all of them now.
            unsafe { ffi::gpuinstr_mc_register_units(self.raw, reg as c_uint, units.as_mut_ptr(), units.len()) };
        }
        units.truncate(count);
        units
    }

    pub fn register_bits(&self, reg: u32) -> u32 {
        // SAFETY: live handle.
        unsafe { ffi::gpuinstr_mc_register_bits(self.raw, reg as c_uint) }
    }

    pub fn register_class_count(&self) -> u32 {
        // SAFETY: live handle.
        unsafe { ffi::gpuinstr_mc_class_count(self.raw) }
    }

    /// TableGen name of a register class (`SReg_32_XM0_XEXEC`).
    pub fn register_class_name(&self, class: u32) -> String {
        let mut length = 0usize;
        // SAFETY: live handle; the name has static storage.
        let ptr = unsafe { ffi::gpuinstr_mc_class_name(self.raw, class as c_uint, &mut length) };
        copy_str(ptr, length)
    }

    /// The physical registers of a class.
    pub fn register_class_registers(&self, class: u32) -> Vec<u16> {
        // SAFETY: a null buffer with capacity 0 only counts.
        let count = unsafe { ffi::gpuinstr_mc_class_registers(self.raw, class as c_uint, std::ptr::null_mut(), 0) };
        let mut registers = vec![0u16; count];
        // SAFETY: `registers` has room for `count`.
        unsafe { ffi::gpuinstr_mc_class_registers(self.raw, class as c_uint, registers.as_mut_ptr(), count) };
        registers
    }

    pub fn register_class_bits(&self, class: u32) -> u32 {
        // SAFETY: live handle.
        unsafe { ffi::gpuinstr_mc_class_bits(self.raw, class as c_uint) }
    }
}

impl Drop for Mc {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { ffi::gpuinstr_mc_destroy(self.raw) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembling_gives_each_line_its_encoding_or_none() {
        let mc = Mc::new("gfx90a", "").unwrap();
        let assembled = mc.assemble(&["s_add_u32 s0, s1, s2", "not_an_instruction v0", "s_endpgm", "v_mov_b32 v0, -1"]);
        assert_eq!(assembled[0].as_deref(), Some(&[0x01, 0x02, 0x00, 0x80][..]));
        assert_eq!(assembled[1], None);
        assert_eq!(assembled[2].as_deref(), Some(&[0x00, 0x00, 0x81, 0xbf][..]));
        // The inline constant, not a literal.
        assert_eq!(assembled[3].as_ref().map(Vec::len), Some(4));
    }

    /// Threads assembling and decoding at once, as a whole-library
    /// instrument's do: each gets what one thread alone gets (the shim
    /// once shared LLVM's nulls() stream between them, and a whole-library
    /// run aborted with "double free or corruption" about one time in three).
    #[test]
    fn threads_assemble_and_decode_at_once() {
        let lines = ["s_add_u32 s0, s1, s2", "s_xor_b32 s0, xnack_mask_lo, s2", "v_mov_b32 v0, -1", "s_endpgm"];
        let alone = Mc::new("gfx90a", "").unwrap().assemble(&lines);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let mc = Mc::new("gfx90a", "").unwrap();
                    for _ in 0..3000 {
                        assert_eq!(mc.assemble(&lines), alone);
                        // v[255:256] does not exist: the disassembler says
                        // so to the comment stream it is given.
                        let no_such_register = [0x00, 0x80, 0x54, 0xdc, 0x02, 0x00, 0x7f, 0xff];
                        assert!(mc.decode(&no_such_register, 0).is_err());
                    }
                });
            }
        });
    }

    #[test]
    fn operands_that_reach_the_target_streamer_assemble() {
        // The AMDGPU parser asks its target streamer about xnack_mask_lo
        // (a fuzzed code object had it): without one, LLVM crashed.
        let mc = Mc::new("gfx90a", "").unwrap();
        let assembled = mc.assemble(&["s_xor_b32 s0, xnack_mask_lo, s2", "s_endpgm"]);
        assert_eq!(assembled[1].as_deref(), Some(&[0x00, 0x00, 0x81, 0xbf][..]));
    }

    #[test]
    fn undecodable_instructions_are_neither_printed_nor_encoded() {
        // LLVM aborts the process ("Not supported instr: <MCInst 0>") on these.
        let mc = Mc::new("gfx90a", "").unwrap();
        let undecodable = RawInstruction { opcode: 0, size: 4, operands: Vec::new() };
        assert_eq!(mc.print(&undecodable, 0), None);
        assert_eq!(mc.encode(&undecodable), None);
    }

    #[test]
    fn a_printed_instruction_may_assemble_to_other_bytes() {
        // `buffer_wbl2` with cache-policy bits (as in ROCm's hostcall code):
        // LLVM 15 prints no policy, so the text assembles to other bytes.
        let mc = Mc::new("gfx90a", "").unwrap();
        let bytes = [0x00, 0xc0, 0xa0, 0xe0, 0x00, 0x00, 0x00, 0x00];
        let decoded = mc.decode(&bytes, 0).unwrap();
        assert_eq!(mc.encode(&decoded).as_deref(), Some(&bytes[..]));
        let text = mc.print(&decoded, 0).unwrap();
        let again = mc.assemble(&[&text]).remove(0).unwrap();
        assert_ne!(again, bytes, "`{text}` kept its bits; the emitter's check has nothing to catch");
    }
}
