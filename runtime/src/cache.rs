//! Dynamic mode's cache on disk: what is read back from it runs on the
//! GPU, so it is private to the user and every entry carries a keyed
//! digest of its bytes. The directory is created 0700 and refused when it
//! is not the user's or others may write it; the key (32 random bytes,
//! the directory's `key` file, 0600) is made on first use; an entry whose
//! digest does not match (damaged, altered, or written with another key)
//! is reported and made again, never loaded.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What every entry starts with: its format, then the 32-byte digest.
const MAGIC: &[u8] = b"gpuinstr cache 1\n";
const DIGEST_BYTES: usize = 32;

pub struct Cache {
    directory: PathBuf,
    key: [u8; 32],
}

/// An entry that is there but cannot be trusted.
#[derive(Debug, PartialEq, Eq)]
pub struct Untrusted {
    pub path: PathBuf,
    pub why: &'static str,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the cache entry {} {}: not loaded, instrumented again", self.path.display(), self.why)
    }
}

/// Who may write a directory or file, from its metadata: it must be ours
/// and writable by no one else.
fn private(path: &Path, metadata: &fs::Metadata, what: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let user = unsafe { libc::geteuid() };
    if metadata.uid() != user {
        return Err(format!(
            "{what} {} belongs to user {}, not to this user ({user}): code read from it would run on the GPU; \
             use a cache of your own (GPUINSTR_CACHE=DIR, or GPUINSTR_CACHE=none for none)",
            path.display(),
            metadata.uid()
        ));
    }
    let mode = metadata.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "{what} {} can be written by others (mode {mode:o}): code read from it would run on the GPU; \
             make it private (chmod go-w {}) or use another (GPUINSTR_CACHE=DIR, or none)",
            path.display(),
            path.display()
        ));
    }
    Ok(())
}

impl Cache {
    /// The cache in `directory`, created private if it is not there.
    pub fn open(directory: PathBuf) -> Result<Cache, String> {
        if !directory.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&directory)
                .map_err(|e| format!("cannot create the cache {}: {e}", directory.display()))?;
        }
        let metadata =
            fs::metadata(&directory).map_err(|e| format!("cannot read the cache {}: {e}", directory.display()))?;
        if !metadata.is_dir() {
            return Err(format!("the cache {} is not a directory", directory.display()));
        }
        private(&directory, &metadata, "the cache directory")?;
        let key = Self::key(&directory.join("key"))?;
        Ok(Cache { directory, key })
    }

    /// The cache's key, made on first use.
    fn key(path: &Path) -> Result<[u8; 32], String> {
        let mut key = [0u8; 32];
        let created = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path);
        match created {
            Ok(mut file) => {
                fs::File::open("/dev/urandom")
                    .and_then(|mut random| random.read_exact(&mut key))
                    .and_then(|()| file.write_all(&key))
                    .map_err(|e| format!("cannot make the cache's key {}: {e}", path.display()))?;
                Ok(key)
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                let mut file =
                    fs::File::open(path).map_err(|e| format!("cannot read the cache's key {}: {e}", path.display()))?;
                let metadata = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?;
                private(path, &metadata, "the cache's key")?;
                if metadata.mode() & 0o044 != 0 {
                    return Err(format!(
                        "the cache's key {} can be read by others (mode {:o}): remove it (a new one is made, \
                         and the entries made with it are made again)",
                        path.display(),
                        metadata.mode() & 0o777
                    ));
                }
                file.read_exact(&mut key).map_err(|e| {
                    format!("the cache's key {} is damaged ({e}): remove it (a new one is made)", path.display())
                })?;
                Ok(key)
            }
            Err(error) => Err(format!("cannot make the cache's key {}: {error}", path.display())),
        }
    }

    fn digest(&self, bytes: &[u8]) -> [u8; DIGEST_BYTES] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(bytes);
        mac.finalize().into_bytes().into()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.directory.join(name)
    }

    /// The entry `name`: none when it is not there (or cannot be read),
    /// an error when it is there but its digest does not match.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>, Untrusted> {
        let path = self.path(name);
        let Ok(mut stored) = fs::read(&path) else { return Ok(None) };
        let untrusted = |why| Untrusted { path: path.clone(), why };
        let Some(rest) = stored.strip_prefix(MAGIC) else { return Err(untrusted("is not one this gpuinstr wrote")) };
        if rest.len() < DIGEST_BYTES {
            return Err(untrusted("is cut short"));
        }
        let (digest, bytes) = rest.split_at(DIGEST_BYTES);
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(bytes);
        // Compared in constant time (verify_slice), as a digest should be.
        if mac.verify_slice(digest).is_err() {
            return Err(untrusted("does not match the digest written with it (damaged, altered or foreign)"));
        }
        let start = MAGIC.len() + DIGEST_BYTES;
        Ok(Some(stored.split_off(start)))
    }

    /// Writes the entry `name` whole or not at all (a temporary file
    /// renamed into place).
    pub fn write(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.path(name);
        let temporary = self.directory.join(format!(".{name}.{}.tmp", std::process::id()));
        let result = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(MAGIC)?;
                file.write_all(&self.digest(bytes))?;
                file.write_all(bytes)
            })
            .and_then(|()| fs::rename(&temporary, &path));
        if result.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn entries_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("new/cache")).unwrap();
        assert_eq!(fs::metadata(dir.path().join("new/cache")).unwrap().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(dir.path().join("new/cache/key")).unwrap().mode() & 0o777, 0o600);
        assert_eq!(cache.read("a.hsaco"), Ok(None));
        cache.write("a.hsaco", b"code object").unwrap();
        assert_eq!(cache.read("a.hsaco"), Ok(Some(b"code object".to_vec())));
        // Opened again, the same key.
        let again = Cache::open(dir.path().join("new/cache")).unwrap();
        assert_eq!(again.read("a.hsaco"), Ok(Some(b"code object".to_vec())));
    }

    #[test]
    fn altered_cut_or_foreign_entries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("cache")).unwrap();
        cache.write("a.hsaco", b"code object").unwrap();
        let path = cache.path("a.hsaco");
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(&path, &bytes).unwrap();
        let refused = cache.read("a.hsaco").unwrap_err();
        assert!(refused.to_string().contains("does not match the digest"), "{refused}");
        fs::write(&path, &bytes[..MAGIC.len() + 5]).unwrap();
        assert_eq!(cache.read("a.hsaco").unwrap_err().why, "is cut short");
        fs::write(&path, b"\x7fELF an old entry, bare").unwrap();
        assert_eq!(cache.read("a.hsaco").unwrap_err().why, "is not one this gpuinstr wrote");
        // Written with another cache's key.
        let other = Cache::open(dir.path().join("other")).unwrap();
        other.write("a.hsaco", b"code object").unwrap();
        fs::copy(other.path("a.hsaco"), &path).unwrap();
        assert!(cache.read("a.hsaco").is_err());
        // Made again, it reads.
        cache.write("a.hsaco", b"code object").unwrap();
        assert_eq!(cache.read("a.hsaco"), Ok(Some(b"code object".to_vec())));
    }

    #[test]
    fn a_cache_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache");
        Cache::open(path.clone()).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o777)).unwrap();
        let refused = Cache::open(path.clone()).err().unwrap();
        assert!(refused.contains("can be written by others (mode 777)"), "{refused}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(path.join("key"), fs::Permissions::from_mode(0o644)).unwrap();
        let refused = Cache::open(path.clone()).err().unwrap();
        assert!(refused.contains("can be read by others"), "{refused}");
        fs::set_permissions(path.join("key"), fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Cache::open(path).is_ok());
    }
}
