//! Compressed offload bundles (`CCOB`, hipcc's `--offload-compress`; ROCm
//! 6.2 and later ship hipBLASLt's Tensile code objects so), as their
//! producers write them: this toolchain's clang-offload-bundler (zstd, LLVM
//! 17 and later) and a zlib one written with Python's zlib and hashlib.
//! Each is read, round-trips, is instrumented and comes back compressed
//! the same way, and the bundler (or Python) reads what we wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuinstr::instrument::{instrument_file, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::load::{self, CodeObject};
use gpuinstr_intrinsics::Registry;
use gpuinstr_tests::*;

const TRIPLES: &str = "host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a";

/// Our control-flow kernels' gfx90a code object, in a file.
fn code_object_file(dir: &Path) -> PathBuf {
    let app = load::load_for_target(&test_kernels("control_flow"), Some("gfx90a")).unwrap().code_objects.remove(0);
    let path = dir.join("control_flow-gfx90a.hsaco");
    std::fs::write(&path, &app.bytes).unwrap();
    path
}

/// The bundler's bundle of a host entry and `code_object`, compressed when
/// `compression` is given (as `COMPRESSED_BUNDLE_FORMAT_VERSION` says when
/// it holds a version).
fn bundled(code_object: &Path, output: &Path, compression: Option<Option<u16>>) -> PathBuf {
    let mut command = gpuinstr::toolchain::llvm_tool("clang-offload-bundler");
    command
        .args(["--type=o", &format!("--targets={TRIPLES}"), "--input=/dev/null"])
        .arg(format!("--input={}", code_object.display()))
        .arg(format!("--output={}", output.display()));
    if let Some(version) = compression {
        command.arg("--compress");
        if let Some(version) = version {
            command.env("COMPRESSED_BUNDLE_FORMAT_VERSION", version.to_string());
        }
    }
    run_ok(&mut command);
    output.to_path_buf()
}

/// A zlib CCOB of `plain` (version 2), by Python: u16 version, u16 method
/// 0, u32 sizes, the first 8 bytes of the MD5, the zlib stream.
const PYTHON_CCOB: &str = r#"
import hashlib, struct, sys, zlib
plain = open(sys.argv[1], "rb").read()
data = zlib.compress(plain, 9)
hash_word = struct.unpack("<Q", hashlib.md5(plain).digest()[:8])[0]
header = b"CCOB" + struct.pack("<HHIIQ", 2, 0, 24 + len(data), len(plain), hash_word)
open(sys.argv[2], "wb").write(header + data)
"#;

/// A CCOB's bundle, by Python (zlib) or the bundler (zstd): the entries'
/// code objects, host entry left out.
const PYTHON_UNBUNDLE: &str = r#"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:4] == b"CCOB", data[:4]
version, method = struct.unpack("<HH", data[4:8])
assert (version, method) == (2, 0), (version, method)
total, size = struct.unpack("<II", data[8:16])
plain = zlib.decompress(data[24:total])
assert len(plain) == size
count = struct.unpack("<Q", plain[24:32])[0]
at = 32
for _ in range(count):
    offset, length, triple_length = struct.unpack("<QQQ", plain[at:at + 24])
    triple = plain[at + 24:at + 24 + triple_length].decode()
    at += 24 + triple_length
    if "amdgcn" in triple:
        open(sys.argv[2], "wb").write(plain[offset:offset + length])
"#;

fn python(script: &str, arguments: &[&Path]) {
    run_ok(Command::new("python3").arg("-c").arg(script).args(arguments));
}

/// The compressed bundles this environment can make: (name, file, how to
/// read an entry back with a tool that is not ours).
fn compressed_bundles(dir: &Path, code_object: &Path) -> Vec<(String, PathBuf, bool)> {
    let plain = bundled(code_object, &dir.join("plain.hipfb"), None);
    let zlib = dir.join("zlib-v2.hipfb");
    python(PYTHON_CCOB, &[&plain, &zlib]);
    let mut bundles = vec![("zlib v2 (Python)".to_string(), zlib, false)];
    // Newer bundlers compress (with zstd where LLVM was built with it);
    // LLVM 21's writes version 2 or 3 as the environment asks.
    let help = run_ok(gpuinstr::toolchain::llvm_tool("clang-offload-bundler").arg("--help"));
    if String::from_utf8_lossy(&help.stdout).contains("--compress ") {
        let versions: &[Option<u16>] =
            if gpuinstr::toolchain::LLVM_MAJOR >= 21 { &[Some(2), Some(3)] } else { &[None] };
        for version in versions {
            let label = version.map_or("default".to_string(), |v| v.to_string());
            let path = bundled(code_object, &dir.join(format!("bundler-{label}.hipfb")), Some(*version));
            bundles.push((format!("clang-offload-bundler, version {label}"), path, true));
        }
    } else {
        eprintln!("LLVM {}'s clang-offload-bundler does not compress", gpuinstr::toolchain::LLVM_MAJOR);
    }
    bundles
}

/// The gfx90a entry of a compressed bundle, read by a tool not ours.
fn entry_read_by_others(bundle: &Path, by_bundler: bool, dir: &Path) -> CodeObject {
    let entry = dir.join("entry.hsaco");
    let _ = std::fs::remove_file(&entry);
    if by_bundler {
        run_ok(
            gpuinstr::toolchain::llvm_tool("clang-offload-bundler")
                .args(["--type=o", &format!("--targets={TRIPLES}"), "--unbundle"])
                .arg(format!("--input={}", bundle.display()))
                .arg("--output=/dev/null")
                .arg(format!("--output={}", entry.display())),
        );
    } else {
        python(PYTHON_UNBUNDLE, &[bundle, &entry]);
    }
    CodeObject::parse(std::fs::read(&entry).unwrap(), Vec::new()).unwrap()
}

#[test]
fn compressed_bundles_are_read_instrumented_and_written_compressed() {
    let dir = scratch();
    let dir = dir.path();
    let code_object = code_object_file(dir);
    let original = CodeObject::parse(std::fs::read(&code_object).unwrap(), Vec::new()).unwrap();
    let tool_path = dir.join("counter.hsaco");
    run_ok(&mut tool_compile_command(Compiler::Clang, &example("instruction-counter"), "-O3", &tool_path));
    let tool = gpuinstr::tool::Tool::load(&tool_path).unwrap();
    let plan = Plan::load(&repo().join("hook-sdk/examples/instruction-counter/plan.toml")).unwrap();
    for (name, bundle, by_bundler) in compressed_bundles(dir, &code_object) {
        let bytes = std::fs::read(&bundle).unwrap();
        assert!(bytes.starts_with(b"CCOB"), "{name}: the producer compressed it");
        // Read: the same code object as the one bundled.
        let loaded = load::load(&bundle).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded.code_objects.len(), 1, "{name}");
        assert_eq!(loaded.code_objects[0].bytes, original.bytes, "{name}: the entry as it was bundled");
        let (_, report) = gpuinstr::roundtrip::roundtrip(&loaded.code_objects[0], Default::default()).unwrap();
        assert!(report.identical(), "{name}:\n{}", report.render_text());
        // Instrumented: a bundle compressed as the input was.
        let options = InstrumentOptions::default();
        let (out, _) = instrument_file(&tool, &bundle, &bytes, &plan, &Registry::with_builtins(), &options, None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out[..8], bytes[..8], "{name}: the magic, version and method kept");
        let instrumented = dir.join("instrumented.hipfb");
        std::fs::write(&instrumented, &out).unwrap();
        let entry = entry_read_by_others(&instrumented, by_bundler, dir);
        let verified = gpuinstr::verify::verify(&original, &entry).unwrap();
        assert!(verified.ok() && verified.regions > 0, "{name}:\n{}", verified.render_text());
        let ours = load::load(&instrumented).unwrap().code_objects.remove(0);
        assert_eq!(ours.bytes, entry.bytes, "{name}: we read back what the other reader reads");
    }
}

/// A damaged compressed bundle is refused with what is wrong, naming the
/// file: never a panic, never other bytes.
#[test]
fn damaged_compressed_bundles_are_refused_by_name() {
    let dir = scratch();
    let dir = dir.path();
    let code_object = code_object_file(dir);
    let plain = bundled(&code_object, &dir.join("plain.hipfb"), None);
    let zlib = dir.join("zlib.hipfb");
    python(PYTHON_CCOB, &[&plain, &zlib]);
    let bytes = std::fs::read(&zlib).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", bytes[..bytes.len() / 2].to_vec(), "bytes, but"),
        (
            "hash",
            {
                let mut b = bytes.clone();
                b[16] ^= 0xff;
                b
            },
            "MD5",
        ),
        (
            "version",
            {
                let mut b = bytes.clone();
                b[4] = 9;
                b
            },
            "version 9",
        ),
    ];
    for (name, data, says) in cases {
        let path = dir.join(format!("{name}.hipfb"));
        std::fs::write(&path, &data).unwrap();
        let error = load::load(&path).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()) && error.contains(says), "{name}: {error}");
    }
}
