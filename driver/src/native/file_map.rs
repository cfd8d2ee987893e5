//! Read-only memory maps of input files: a 1.3 GB fat binary is read
//! page by page, and only the code objects of the selected target are
//! copied out.

use std::fs::File;
use std::path::Path;

pub struct MappedFile {
    map: memmap2::Mmap,
}

impl MappedFile {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = File::open(path)?;
        // SAFETY: the map is read-only and private to this process; inputs
        // are not expected to change while gpuinstr-link reads them (if one
        // is truncated meanwhile, reading faults, as with any mmap reader).
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(MappedFile { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Lets the system drop the pages read so far (they are read from the
    /// file again if touched): what was copied out of a 1.3 GB library
    /// stops counting against the process.
    pub fn release_pages(&self) {
        // SAFETY: the map is private and read-only; after MADV_DONTNEED its
        // pages read back from the file, so the bytes seen stay the same.
        let _ = unsafe { self.map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }
}
