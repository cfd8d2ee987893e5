//! One lane's memory access as the access log records it (for checking
//! address traces): which instruction, wave and lane, the address, and the
//! space the address is in.

/// The space an access's address is in, as the instruction names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// A FLAT instruction's flat address (global memory, or LDS or scratch
    /// through their apertures).
    Flat,
    /// A GLOBAL instruction's address.
    Global,
    /// A buffer instruction's address: the resource's base plus the SGPR
    /// offset plus the lane's offset in the buffer (lanes out of the
    /// buffer's range access nothing and are not logged, nor are scratch
    /// accesses through the private segment buffer, an `add_tid` resource).
    Buffer,
    /// A `ds_*` instruction's LDS address (32 bits, from the workgroup's
    /// allocation); of a two-address form, the first.
    Lds,
}

impl Space {
    /// The number the dispatch log writes: 0 flat, 1 global, 2 buffer, 3 LDS.
    pub fn code(self) -> u8 {
        match self {
            Space::Flat => 0,
            Space::Global => 1,
            Space::Buffer => 2,
            Space::Lds => 3,
        }
    }
}

/// One lane's access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub wave: u32,
    /// Code object address of the instruction.
    pub address: u64,
    pub lane: u8,
    /// The address the lane accessed.
    pub memory: u64,
    pub space: Space,
    /// How many instructions the wave had run before this one: tells one
    /// execution of an instruction from the next (a loop's).
    pub step: u64,
    /// The bytes the lane's access covers from `memory` (of a two-address
    /// LDS form, one element).
    pub bytes: u8,
}
