//! Compressed offload bundles (`CCOB`): what `clang-offload-bundler
//! --compress` and hipcc's `--offload-compress` write, and how ROCm 6.2 and
//! later ship their libraries (hipBLASLt's Tensile code objects, rocBLAS's
//! fat binaries). A compressed bundle holds one ordinary bundle.
//!
//! Layout, little-endian: `CCOB`, u16 version, u16 method (0 zlib, 1
//! zstd), then by version
//! - 1: u32 size of the bundle, u64 hash (the compressed data runs to the
//!   end, or to the next bundle in a `.hip_fatbin`);
//! - 2: u32 size of the whole compressed bundle, u32 size of the bundle,
//!   u64 hash;
//! - 3: the same two sizes as u64, u64 hash;
//!
//! then the compressed bundle. The hash is the first eight bytes of the
//! bundle's MD5, read as a little-endian u64 (LLVM compares it only when
//! asked to be verbose; a mismatch here is an error: the data is damaged).

use std::io::Read;

use md5::Digest;

use crate::error::LoadProblem;

pub const MAGIC: &[u8] = b"CCOB";

/// How a bundle was compressed (and is compressed again when written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compression {
    pub version: u16,
    pub method: Method,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Zlib,
    Zstd,
}

/// A compressed bundle's contents, how they were compressed, and how many
/// bytes of the input the compressed bundle took.
#[derive(Debug)]
pub struct Decompressed {
    pub bundle: Vec<u8>,
    pub compression: Compression,
    pub size: usize,
}

/// The largest bundle a header may declare (a decompression bomb's header
/// claims more than the machine has).
const LARGEST_BUNDLE: u64 = 16 << 30;

fn problem(message: impl Into<String>) -> LoadProblem {
    LoadProblem::CompressedBundle(message.into())
}

fn field(data: &[u8], at: usize, width: usize) -> Result<u64, LoadProblem> {
    let bytes = data.get(at..at + width).ok_or_else(|| problem(format!("its header ends at byte {}", data.len())))?;
    let mut value = [0u8; 8];
    value[..width].copy_from_slice(bytes);
    Ok(u64::from_le_bytes(value))
}

/// The bundle compressed at the start of `data` (which may run on past it,
/// as a `.hip_fatbin` section does).
pub fn decompress(data: &[u8]) -> Result<Decompressed, LoadProblem> {
    if !data.starts_with(MAGIC) {
        return Err(problem("the CCOB magic is missing"));
    }
    let version = field(data, 4, 2)? as u16;
    let method = match field(data, 6, 2)? {
        0 => Method::Zlib,
        1 => Method::Zstd,
        other => return Err(problem(format!("compression method {other} is not known"))),
    };
    let (header, total, declared, hash) = match version {
        1 => (20, None, field(data, 8, 4)?, field(data, 12, 8)?),
        2 => (24, Some(field(data, 8, 4)?), field(data, 12, 4)?, field(data, 16, 8)?),
        3 => (32, Some(field(data, 8, 8)?), field(data, 16, 8)?, field(data, 24, 8)?),
        other => return Err(problem(format!("version {other} is not known"))),
    };
    let end = match total {
        Some(total) => usize::try_from(total)
            .ok()
            .filter(|end| (header..=data.len()).contains(end))
            .ok_or_else(|| problem(format!("it says it takes {total} bytes, but {} are there", data.len())))?,
        // Version 1 runs to the next bundle, if another follows.
        None => next_bundle(data, header).unwrap_or(data.len()),
    };
    if declared > LARGEST_BUNDLE {
        return Err(problem(format!("it says its contents take {declared} bytes")));
    }
    let compressed = &data[header..end];
    let mut bundle = Vec::with_capacity(declared.min(1 << 30) as usize);
    let read = match method {
        Method::Zlib => flate2::read::ZlibDecoder::new(compressed).take(declared + 1).read_to_end(&mut bundle),
        Method::Zstd => zstd::stream::read::Decoder::with_buffer(compressed)
            .and_then(|decoder| decoder.take(declared + 1).read_to_end(&mut bundle)),
    };
    read.map_err(|e| problem(format!("its {method:?} data is damaged: {e}")))?;
    if bundle.len() as u64 != declared {
        return Err(problem(format!("it holds {} bytes where its header says {declared}", bundle.len())));
    }
    if digest_word(&bundle) != hash {
        return Err(problem(format!("the MD5 of its contents is not the {hash:#018x} its header holds (damaged)")));
    }
    Ok(Decompressed { bundle, compression: Compression { version, method }, size: end })
}

/// `bundle` compressed as `compression` says (version 2 becomes 3 where
/// the sizes pass 32 bits, as clang-offload-bundler refuses to write them).
pub fn compress(bundle: &[u8], compression: Compression) -> Vec<u8> {
    let data = match compression.method {
        Method::Zlib => {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut encoder, bundle).expect("writing to memory");
            encoder.finish().expect("writing to memory")
        }
        Method::Zstd => zstd::bulk::compress(bundle, zstd::DEFAULT_COMPRESSION_LEVEL).expect("compressing in memory"),
    };
    let mut version = compression.version;
    if version == 2 && (bundle.len() as u64 > u64::from(u32::MAX) || data.len() as u64 + 24 > u64::from(u32::MAX)) {
        version = 3;
    }
    let method: u16 = match compression.method {
        Method::Zlib => 0,
        Method::Zstd => 1,
    };
    let mut out = MAGIC.to_vec();
    out.extend(version.to_le_bytes());
    out.extend(method.to_le_bytes());
    match version {
        1 => out.extend((bundle.len() as u32).to_le_bytes()),
        2 => {
            out.extend(((data.len() + 24) as u32).to_le_bytes());
            out.extend((bundle.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend(((data.len() + 32) as u64).to_le_bytes());
            out.extend((bundle.len() as u64).to_le_bytes());
        }
    }
    out.extend(digest_word(bundle).to_le_bytes());
    out.extend(data);
    out
}

/// The first eight bytes of the MD5 of `bytes`, little-endian.
fn digest_word(bytes: &[u8]) -> u64 {
    let digest = md5::Md5::digest(bytes);
    u64::from_le_bytes(digest[..8].try_into().expect("an MD5 has 16 bytes"))
}

/// Where the next bundle (compressed or not) starts in `data` after `from`.
fn next_bundle(data: &[u8], from: usize) -> Option<usize> {
    let find = |needle: &[u8]| data[from..].windows(needle.len()).position(|w| w == needle).map(|at| from + at);
    [find(MAGIC), find(super::bundle::BUNDLE_MAGIC)].into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_and_method_comes_back() {
        let bundle: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for version in [1, 2, 3] {
            for method in [Method::Zlib, Method::Zstd] {
                let compression = Compression { version, method };
                let mut data = compress(&bundle, compression);
                let size = data.len();
                data.extend(b"__CLANG_OFFLOAD_BUNDLE__ and more");
                let back = decompress(&data).unwrap();
                assert_eq!((back.bundle, back.compression, back.size), (bundle.clone(), compression, size));
            }
        }
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let data = compress(b"contents of a bundle", Compression { version: 2, method: Method::Zstd });
        for cut in 0..data.len() {
            assert!(decompress(&data[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = data.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(decompress(&flipped).is_err());
        let mut hash = data.clone();
        hash[16] ^= 1;
        assert!(decompress(&hash).unwrap_err().to_string().contains("MD5"));
        let mut method = data;
        method[6] = 7;
        assert!(decompress(&method).unwrap_err().to_string().contains("method 7"));
    }
}
