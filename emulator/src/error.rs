//! What stops a run. Every stop names the instruction and its address: an
//! emulator that guessed would be no oracle.

use thiserror::Error;

/// A problem an instruction's semantics found; the run loop adds where.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Fault {
    #[error("not implemented by the emulator")]
    Unimplemented,
    #[error("not implemented by the emulator: {0}")]
    UnimplementedCase(String),
    #[error("memory access of {size} bytes at {address:#x} is outside every allocation")]
    Memory { address: u64, size: u64 },
    #[error("LDS access of {size} bytes at {offset:#x} is outside the workgroup's {limit} bytes")]
    Lds { offset: u64, size: u64, limit: u64 },
    #[error("jump to {0:#x}, which is not in the code object's code")]
    BadJump(u64),
    #[error("s_trap {0}")]
    Trap(u32),
    #[error("lane {lane}: {fault}")]
    InLane { lane: usize, fault: Box<Fault> },
}

impl Fault {
    /// The fault, naming the lane whose access it was.
    pub fn in_lane(self, lane: usize) -> Fault {
        Fault::InLane { lane, fault: Box::new(self) }
    }
}

#[derive(Debug, Error)]
pub enum EmulatorError {
    #[error(transparent)]
    Load(#[from] gpuinstr::Error),
    #[error("{0}")]
    Isa(String),
    #[error("{file}: no kernel named {kernel} (kernels: {available})")]
    NoKernel { file: String, kernel: String, available: String },
    #[error("kernel {kernel}: {message}")]
    Dispatch { kernel: String, message: String },
    #[error("{site}: {fault}")]
    Stopped { site: Box<StopSite>, fault: Fault },
    #[error("kernel {kernel}, {wave}: cannot decode the instruction at {address:#x}")]
    Undecodable { kernel: String, wave: String, address: u64 },
    #[error("kernel {kernel}: stopped after {limit} instructions in {wave} (an endless loop? {how_to_raise})")]
    InstructionLimit { kernel: String, wave: String, limit: u64, how_to_raise: String },
    #[error("kernel {kernel}: every live wave of workgroup {workgroup:?} waits, but not all at a barrier")]
    Deadlock { kernel: String, workgroup: [u32; 3] },
}

/// Where a run stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopSite {
    pub kernel: String,
    pub wave: String,
    pub address: u64,
    pub opcode: String,
    pub text: String,
}

impl std::fmt::Display for StopSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kernel {}, {}, at {:#x} `{}` ({})", self.kernel, self.wave, self.address, self.text, self.opcode)
    }
}
