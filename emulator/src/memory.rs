//! Device memory: a flat 64-bit address space of allocations the caller
//! makes (buffers, the kernel argument segment, the dispatch packet, the
//! code object's loaded sections, scratch). An access that leaves every
//! allocation stops the run; guard gaps between allocations make an
//! off-by-one access fault instead of silently landing in a neighbour.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::Fault;

/// Where allocations start; below the LDS and scratch apertures.
const FIRST_ADDRESS: u64 = 0x1_0000_0000;
/// Unmapped bytes between allocations.
const GUARD: u64 = 0x1000;

/// Flat addresses of the LDS (shared) and scratch (private) apertures, as
/// ROCm sets them on GFX9.
pub const SHARED_APERTURE: u64 = 0x1_0000_0000_0000;
pub const PRIVATE_APERTURE: u64 = 0x2_0000_0000_0000;
pub const APERTURE_SIZE: u64 = 1 << 32;

#[derive(Clone, Debug)]
pub struct Allocation {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Memory the emulator does not own: a running program's address space,
/// where the emulated GPU's memory is the process's own (`gpuinstr-device`).
/// It decides which accesses are valid.
pub trait AddressSpace: Send + Sync {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), Fault>;
    fn write(&self, address: u64, data: &[u8]) -> Result<(), Fault>;
}

#[derive(Clone)]
pub struct Memory {
    allocations: BTreeMap<u64, Allocation>,
    next: u64,
    /// When set, every access goes there and there are no allocations.
    external: Option<Arc<dyn AddressSpace>>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("allocations", &self.allocations.len())
            .field("external", &self.external.is_some())
            .finish()
    }
}

impl Default for Memory {
    fn default() -> Self {
        Memory { allocations: BTreeMap::new(), next: FIRST_ADDRESS, external: None }
    }
}

impl Memory {
    /// Memory that is `space` (a process's), not allocations of ours.
    pub fn external(space: Arc<dyn AddressSpace>) -> Self {
        Memory { external: Some(space), ..Memory::default() }
    }

    /// A new zeroed allocation; returns its address (4 KiB aligned).
    pub fn allocate(&mut self, name: &str, size: u64) -> u64 {
        let address = self.next;
        self.allocations.insert(address, Allocation { name: name.to_string(), bytes: vec![0; size as usize] });
        self.next = (address + size.max(1) + GUARD).next_multiple_of(GUARD);
        address
    }

    /// A new allocation holding `bytes`.
    pub fn allocate_bytes(&mut self, name: &str, bytes: &[u8]) -> u64 {
        let address = self.allocate(name, bytes.len() as u64);
        self.write(address, bytes).expect("fresh allocation");
        address
    }

    pub fn allocation(&self, address: u64) -> Option<(u64, &Allocation)> {
        let (base, allocation) = self.allocations.range(..=address).next_back()?;
        (address < base + allocation.bytes.len() as u64).then_some((*base, allocation))
    }

    /// Every allocation with its address.
    pub fn allocations(&self) -> impl Iterator<Item = (u64, &Allocation)> {
        self.allocations.iter().map(|(a, b)| (*a, b))
    }

    fn span(&self, address: u64, size: u64) -> Result<(u64, usize), Fault> {
        let fault = Fault::Memory { address, size };
        let (base, allocation) = self.allocations.range(..=address).next_back().ok_or(fault.clone())?;
        let start = address - base;
        if start + size > allocation.bytes.len() as u64 {
            return Err(fault);
        }
        Ok((*base, start as usize))
    }

    pub fn read(&self, address: u64, out: &mut [u8]) -> Result<(), Fault> {
        if let Some(space) = &self.external {
            return space.read(address, out);
        }
        let (base, start) = self.span(address, out.len() as u64)?;
        out.copy_from_slice(&self.allocations[&base].bytes[start..start + out.len()]);
        Ok(())
    }

    pub fn write(&mut self, address: u64, data: &[u8]) -> Result<(), Fault> {
        if let Some(space) = &self.external {
            return space.write(address, data);
        }
        let (base, start) = self.span(address, data.len() as u64)?;
        let allocation = self.allocations.get_mut(&base).expect("span found it");
        allocation.bytes[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    pub fn read_u32(&self, address: u64) -> Result<u32, Fault> {
        let mut bytes = [0; 4];
        self.read(address, &mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    pub fn read_u64(&self, address: u64) -> Result<u64, Fault> {
        let mut bytes = [0; 8];
        self.read(address, &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    pub fn write_u32(&mut self, address: u64, value: u32) -> Result<(), Fault> {
        self.write(address, &value.to_le_bytes())
    }

    pub fn write_u64(&mut self, address: u64, value: u64) -> Result<(), Fault> {
        self.write(address, &value.to_le_bytes())
    }

    /// The bytes of an allocation from `address` on (`length` of them).
    pub fn bytes(&self, address: u64, length: usize) -> Result<Vec<u8>, Fault> {
        let mut out = vec![0; length];
        self.read(address, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_outside_allocations_fault() {
        let mut memory = Memory::default();
        let a = memory.allocate("a", 8);
        let b = memory.allocate("b", 4);
        assert!(b >= a + 8 + GUARD);
        memory.write_u32(a + 4, 7).unwrap();
        assert_eq!(memory.read_u32(a + 4).unwrap(), 7);
        assert_eq!(memory.read_u32(a + 6), Err(Fault::Memory { address: a + 6, size: 4 }));
        assert!(memory.read_u32(a - 4).is_err());
        assert!(memory.write_u64(b, 0).is_err());
    }
}
