//! Writing output files: to a temporary file next to the destination,
//! renamed into place only once it is complete, so a failure never leaves a
//! partial file behind.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Location};

pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let io = |source| Error::Io { location: Location::file(path), source };
    let mut file = tempfile::NamedTempFile::new_in(directory).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.as_file().sync_all().map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// `write_atomically`, with the permissions of `like` (an instrumented
/// library stays executable).
pub fn write_atomically_like(path: &Path, bytes: &[u8], like: &Path) -> Result<(), Error> {
    write_atomically(path, bytes)?;
    if let Ok(metadata) = std::fs::metadata(like) {
        std::fs::set_permissions(path, metadata.permissions())
            .map_err(|source| Error::Io { location: Location::file(path), source })?;
    }
    Ok(())
}
