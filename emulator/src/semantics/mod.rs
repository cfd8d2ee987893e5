//! What each instruction does, one file per instruction family. A decoded
//! instruction is bound to its handler once (by pseudo opcode name); an
//! opcode no family knows gets `unimplemented`, which stops the run naming
//! it, so a missing semantic can never produce a silent wrong result.

mod compare;
mod control;
mod convert;
mod dot;
pub mod dpp;
mod float;
mod fp8;
mod lds;
mod matrix;
mod scalar;
mod scalar_memory;
mod scaled;
pub mod sdwa;
mod vector;
mod vector_memory;

use crate::access::Space;
use crate::error::Fault;
use crate::memory::Memory;
use crate::processor::Processor;
use crate::program::Inst;
use crate::wave::Wave;

/// What the dispatch tells a wave about where it runs.
#[derive(Clone, Copy, Debug)]
pub struct Machine {
    /// Device address of code object address 0.
    pub load_base: u64,
    /// Bytes of LDS the workgroup has.
    pub lds_size: u64,
    /// VGPRs and SGPRs the kernel allocates (HW_REG_GPR_ALLOC).
    pub vgprs: u32,
    pub sgprs: u32,
    pub processor: &'static Processor,
    /// Where `s_sendmsg sendmsg(MSG_INTERRUPT)` goes (the interrupt's
    /// context id, M0's low 24 bits); without it the message stops the run.
    pub interrupts: Option<Interrupts>,
    /// What an LDS access past the workgroup's allocation does.
    pub lds_out_of_range: LdsOutOfRange,
    /// D16 loads zero the half of their register they do not load (SRAM
    /// ECC on), rather than keep it.
    pub d16_zeroes_other_half: bool,
}

/// An LDS access past the workgroup's allocation: the hardware drops the
/// write and reads 0 (rocPRIM's radix sort relies on it), but in code we
/// wrote or instrumented it is a bug to stop at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LdsOutOfRange {
    #[default]
    Stop,
    /// As the hardware does, counted per wave (`Wave::lds_out_of_range`).
    LikeHardware,
}

/// The device's interrupt handler, for the whole process.
#[derive(Clone, Copy)]
pub struct Interrupts(pub &'static (dyn Fn(u32) + Sync));

impl std::fmt::Debug for Interrupts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupts")
    }
}

/// Everything an instruction may touch.
pub struct Context<'a> {
    pub wave: &'a mut Wave,
    pub memory: &'a mut Memory,
    pub lds: &'a mut [u8],
    pub machine: &'a Machine,
    /// Device address of the next instruction; branches change it.
    pub next_pc: u64,
    /// When recording accesses: (lane, address, space, bytes) of each
    /// lane's FLAT, GLOBAL, buffer or LDS access by this instruction.
    pub accessed: Option<&'a mut Vec<(u8, u64, Space, u8)>>,
}

impl Context<'_> {
    /// Logs one lane's access of `bytes` when accesses are recorded.
    pub fn log_access(&mut self, lane: usize, address: u64, space: Space, bytes: u64) {
        if let Some(log) = self.accessed.as_mut() {
            log.push((lane as u8, address, space, bytes as u8));
        }
    }

    /// Makes a code object address the next instruction.
    pub fn jump(&mut self, address: u64) {
        self.next_pc = self.machine.load_base + address;
    }
}

pub type Handler = fn(&mut Context<'_>, &Inst) -> Result<(), Fault>;

/// The semantics of a pseudo opcode, if a family has them.
pub fn lookup(name: &str) -> Option<Handler> {
    let families: [fn(&str) -> Option<Handler>; 13] = [
        control::handler,
        scalar::handler,
        scalar_memory::handler,
        vector::handler,
        float::handler,
        convert::handler,
        fp8::handler,
        scaled::handler,
        dot::handler,
        compare::handler,
        vector_memory::handler,
        lds::handler,
        matrix::handler,
    ];
    families.iter().find_map(|family| family(name))
}

pub fn unimplemented(_: &mut Context<'_>, _: &Inst) -> Result<(), Fault> {
    Err(Fault::Unimplemented)
}

/// An operand the emulator does not model (LDS_DIRECT, an MC expression).
pub fn unmodelled_operand(_: &mut Context<'_>, _: &Inst) -> Result<(), Fault> {
    Err(Fault::UnimplementedCase("an operand the emulator does not model".into()))
}

/// The encoding-neutral part of a pseudo name: `V_ADD_U32_e64` -> `V_ADD_U32`,
/// `V_FMA_F16_gfx9_e64` -> `V_FMA_F16`.
pub fn base_name(name: &str) -> &str {
    let mut base = name;
    while let Some(stripped) = ["_e32", "_e64", "_gfx9", "_vi"].iter().find_map(|s| base.strip_suffix(s)) {
        base = stripped;
    }
    base
}

/// A modifier the emulator does not model (integer clamp, omod on a conversion...).
pub fn unsupported_modifier(what: &str) -> Fault {
    Fault::UnimplementedCase(format!("the {what} modifier"))
}
