//! One wavefront's architectural state and operand access.

use crate::memory::{APERTURE_SIZE, PRIVATE_APERTURE, SHARED_APERTURE};
use crate::operands::{Operand, Special, EXEC, SCALAR_SLOTS, VCC};

pub const LANES: usize = 64;
pub type Lanes = [u32; LANES];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveState {
    Running,
    AtBarrier,
    Ended,
}

/// Where a wave is in the dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WaveId {
    pub workgroup: [u32; 3],
    /// Index of the wave in its workgroup.
    pub wave: u32,
    /// Index of the wave in the dispatch.
    pub global: u32,
}

impl std::fmt::Display for WaveId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [x, y, z] = self.workgroup;
        write!(f, "workgroup ({x}, {y}, {z}) wave {}", self.wave)
    }
}

#[derive(Clone)]
pub struct Wave {
    pub id: WaveId,
    pub sgpr: [u32; SCALAR_SLOTS],
    pub vgpr: Vec<Lanes>,
    pub agpr: Vec<Lanes>,
    /// What `Operand::Staged(k)` reads: a DPP or SDWA instruction's
    /// sources after permutation or selection.
    pub staged: [Lanes; 2],
    pub scc: bool,
    /// Device address of the next instruction.
    pub pc: u64,
    pub state: WaveState,
    /// The MODE hardware register (rounding, denormals, IEEE, DX10 clamp).
    pub mode: u32,
    /// Device address of this wave's scratch (what the private segment
    /// wave offset points at).
    pub scratch_base: u64,
    pub instructions: u64,
    /// LDS accesses (per lane and dword) past the workgroup's allocation
    /// that were dropped or read as 0 (`LdsOutOfRange::LikeHardware`), and
    /// how many of them were writes (or atomics).
    pub lds_out_of_range: u64,
    pub lds_writes_out_of_range: u64,
}

impl Wave {
    pub fn new(id: WaveId) -> Self {
        Wave {
            id,
            sgpr: [0; SCALAR_SLOTS],
            vgpr: vec![[0; LANES]; 256],
            agpr: vec![[0; LANES]; 256],
            staged: [[0; LANES]; 2],
            scc: false,
            pc: 0,
            state: WaveState::Running,
            mode: 0,
            scratch_base: 0,
            instructions: 0,
            lds_out_of_range: 0,
            lds_writes_out_of_range: 0,
        }
    }

    pub fn exec(&self) -> u64 {
        u64::from(self.sgpr[EXEC as usize]) | (u64::from(self.sgpr[EXEC as usize + 1]) << 32)
    }

    pub fn set_exec(&mut self, value: u64) {
        self.sgpr[EXEC as usize] = value as u32;
        self.sgpr[EXEC as usize + 1] = (value >> 32) as u32;
    }

    pub fn vcc(&self) -> u64 {
        u64::from(self.sgpr[VCC as usize]) | (u64::from(self.sgpr[VCC as usize + 1]) << 32)
    }

    pub fn set_vcc(&mut self, value: u64) {
        self.sgpr[VCC as usize] = value as u32;
        self.sgpr[VCC as usize + 1] = (value >> 32) as u32;
    }

    fn special(&self, special: Special) -> u64 {
        match special {
            Special::SharedBase => SHARED_APERTURE,
            Special::SharedLimit => SHARED_APERTURE + APERTURE_SIZE - 1,
            Special::PrivateBase => PRIVATE_APERTURE,
            Special::PrivateLimit => PRIVATE_APERTURE + APERTURE_SIZE - 1,
            Special::Vccz => u64::from(self.vcc() == 0),
            Special::Execz => u64::from(self.exec() == 0),
            Special::Scc => u64::from(self.scc),
            Special::PopsExitingWaveId => 0,
        }
    }

    /// A 32-bit scalar or constant source (a vector operand reads lane 0;
    /// callers only pass scalar ones).
    pub fn scalar32(&self, operand: &Operand) -> u32 {
        match *operand {
            Operand::Scalar { index, .. } => self.sgpr[index as usize],
            Operand::Constant(value) => value as u32,
            Operand::Scc => u32::from(self.scc),
            Operand::Special(s) => self.special(s) as u32,
            Operand::Vector { index, .. } => self.vgpr[index as usize][0],
            Operand::Accum { index, .. } => self.agpr[index as usize][0],
            Operand::Staged(k) => self.staged[k as usize][0],
        }
    }

    pub fn scalar64(&self, operand: &Operand) -> u64 {
        match *operand {
            Operand::Scalar { index, .. } => {
                let i = index as usize;
                u64::from(self.sgpr[i]) | (u64::from(self.sgpr[(i + 1) % SCALAR_SLOTS]) << 32)
            }
            Operand::Constant(value) => value as u64,
            Operand::Scc => u64::from(self.scc),
            Operand::Special(s) => self.special(s),
            Operand::Vector { .. } | Operand::Accum { .. } | Operand::Staged(_) => {
                u64::from(self.lane32(operand, 0)) | (u64::from(self.lane32_at(operand, 0, 1)) << 32)
            }
        }
    }

    /// Dword `part` of a scalar register tuple.
    pub fn scalar_dword(&self, operand: &Operand, part: usize) -> u32 {
        match *operand {
            Operand::Scalar { index, .. } => self.sgpr[(index as usize + part) % SCALAR_SLOTS],
            Operand::Constant(value) if part == 0 => value as u32,
            Operand::Constant(value) if part == 1 => (value >> 32) as u32,
            _ if part == 0 => self.scalar32(operand),
            _ => 0,
        }
    }

    pub fn write_scalar32(&mut self, operand: &Operand, value: u32) {
        match *operand {
            Operand::Scalar { index, .. } if index != crate::operands::NULL => self.sgpr[index as usize] = value,
            Operand::Scc => self.scc = value != 0,
            _ => {}
        }
    }

    pub fn write_scalar64(&mut self, operand: &Operand, value: u64) {
        if let Operand::Scalar { index, .. } = *operand {
            let i = index as usize;
            if i == crate::operands::NULL as usize {
                return;
            }
            self.sgpr[i] = value as u32;
            self.sgpr[(i + 1) % SCALAR_SLOTS] = (value >> 32) as u32;
        }
    }

    pub fn write_scalar_dword(&mut self, operand: &Operand, part: usize, value: u32) {
        if let Operand::Scalar { index, .. } = *operand {
            let i = index as usize + part;
            if i < SCALAR_SLOTS && i != crate::operands::NULL as usize {
                self.sgpr[i] = value;
            }
        }
    }

    /// Dword `part` of an operand in one lane.
    pub fn lane32_at(&self, operand: &Operand, lane: usize, part: usize) -> u32 {
        match *operand {
            Operand::Vector { index, .. } => self.vgpr[(index as usize + part) % 256][lane],
            Operand::Accum { index, .. } => self.agpr[(index as usize + part) % 256][lane],
            Operand::Staged(k) if part == 0 => self.staged[k as usize][lane],
            _ => self.scalar_dword(operand, part),
        }
    }

    pub fn lane32(&self, operand: &Operand, lane: usize) -> u32 {
        match *operand {
            Operand::Vector { index, .. } => self.vgpr[index as usize][lane],
            Operand::Accum { index, .. } => self.agpr[index as usize][lane],
            Operand::Staged(k) => self.staged[k as usize][lane],
            _ => self.scalar32(operand),
        }
    }

    pub fn lane64(&self, operand: &Operand, lane: usize) -> u64 {
        match *operand {
            Operand::Vector { .. } | Operand::Accum { .. } | Operand::Staged(_) => {
                u64::from(self.lane32_at(operand, lane, 0)) | (u64::from(self.lane32_at(operand, lane, 1)) << 32)
            }
            _ => self.scalar64(operand),
        }
    }

    pub fn write_lane32_at(&mut self, operand: &Operand, lane: usize, part: usize, value: u32) {
        match *operand {
            Operand::Vector { index, .. } => self.vgpr[(index as usize + part) % 256][lane] = value,
            Operand::Accum { index, .. } => self.agpr[(index as usize + part) % 256][lane] = value,
            _ => {}
        }
    }

    pub fn write_lane32(&mut self, operand: &Operand, lane: usize, value: u32) {
        self.write_lane32_at(operand, lane, 0, value);
    }

    pub fn write_lane64(&mut self, operand: &Operand, lane: usize, value: u64) {
        self.write_lane32_at(operand, lane, 0, value as u32);
        self.write_lane32_at(operand, lane, 1, (value >> 32) as u32);
    }
}

/// The lanes set in a mask, in order.
pub fn active_lanes(mask: u64) -> impl Iterator<Item = usize> {
    (0..LANES).filter(move |lane| mask & (1u64 << lane) != 0)
}
