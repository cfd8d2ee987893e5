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

/// `write_atomically_like` for contents written piece by piece by `write`
/// (through a buffer), never held whole.
pub fn write_atomically_with(
    path: &Path,
    like: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file = tempfile::NamedTempFile::new_in(directory)?;
    let mut buffered = std::io::BufWriter::with_capacity(1 << 20, file);
    write(&mut buffered)?;
    let file = buffered.into_inner().map_err(|e| e.into_error())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    if let Ok(metadata) = std::fs::metadata(like) {
        std::fs::set_permissions(path, metadata.permissions())?;
    }
    Ok(())
}
