//! Test support: paths of the repository, the plugin and the toolchain, and
//! helpers that drive the real tools (hipcc, and the clang, opt, ld.lld and
//! llvm-dis of the LLVM this build is for).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod memory_efficiency;

/// A snapshot of text that comes from the compiler: our sources compiled
/// by the environment's clang, payloads by its llc, IR and diagnostics as
/// that LLVM prints them. The snapshots are Debian 12's (LLVM 15), whose
/// toolchain is frozen; under another toolchain (trixie's LLVM 17, sid's
/// moving LLVM 21) the text is still computed, so every error still fails
/// the test, but it is not compared: those builds are held to behaviour
/// (counts against the emulator, exact round trips), not to another
/// compiler's text.
#[macro_export]
macro_rules! compiler_snapshot {
    ($name:expr, $value:expr $(,)?) => {{
        if gpuinstr::toolchain::LLVM_MAJOR == 15 {
            insta::assert_snapshot!($name, $value);
        } else {
            let _ = $value;
        }
    }};
    ($value:expr $(,)?) => {{
        if gpuinstr::toolchain::LLVM_MAJOR == 15 {
            insta::assert_snapshot!($value);
        } else {
            let _ = $value;
        }
    }};
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the repository").to_path_buf()
}

pub fn sdk_include() -> PathBuf {
    repo().join("hook-sdk/include")
}

/// The example tools of hook-sdk/examples that instrument applications.
pub const EXAMPLE_TOOLS: [&str; 7] = [
    "instruction-counter",
    "block-counter",
    "kernel-arguments",
    "opcode-histogram",
    "branch-divergence",
    "memory-tracer",
    "memory-efficiency",
];

pub fn example(name: &str) -> PathBuf {
    repo().join("hook-sdk/examples").join(name).join("tool.hip")
}

pub fn input(relative: &str) -> PathBuf {
    repo().join("tests/inputs").join(relative)
}

/// libembed.so as Cargo built it for this test run (the plugin crate is a
/// dev-dependency, so it is built with the tests, next to the test binary).
pub fn plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    for candidate in [deps.join("libembed.so"), deps.parent().expect("profile directory").join("libembed.so")] {
        if candidate.exists() {
            return candidate;
        }
    }
    panic!("libembed.so was not built next to {}; run `cargo build -p gpuinstr-llvm-plugin`", deps.display());
}

/// Replaces machine-specific paths so text can be snapshot-tested anywhere.
pub fn normalize(text: &str, scratch: &Path) -> String {
    text.replace(&scratch.display().to_string(), "<tmp>").replace(&repo().display().to_string(), "<repo>")
}

/// The compiler a tool is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiler {
    /// `hipcc`: host object with the device code object in `.hip_fatbin`.
    Hipcc,
    /// `clang++ -x hip --cuda-device-only`: the device code object itself.
    Clang,
}

/// The ROCm device libraries for this build's clang.
pub fn rocm_device_libs() -> PathBuf {
    gpuinstr::toolchain::rocm_device_library_dir()
}

/// The command that compiles `source` with the plugin loaded.
pub fn tool_compile_command(compiler: Compiler, source: &Path, opt: &str, output: &Path) -> Command {
    let plugin = format!("-fpass-plugin={}", plugin().display());
    let mut command = match compiler {
        Compiler::Hipcc => {
            let mut c = hipcc();
            c.args(["--offload-arch=gfx90a", "-c"]);
            c
        }
        Compiler::Clang => {
            let mut c = clang();
            c.args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr"])
                .arg(format!("--rocm-device-lib-path={}", rocm_device_libs().display()))
                .args(["--cuda-device-only", "--no-gpu-bundle-output", "-c"]);
            c
        }
    };
    command.arg(plugin).arg("-I").arg(sdk_include()).arg(opt).arg(source).arg("-o").arg(output);
    command
}

/// `hipcc` with its temporary files in the run's directory: clang's HIP
/// driver leaves an empty directory in TMPDIR for each compilation.
pub fn hipcc() -> Command {
    let mut command = Command::new("hipcc");
    command.env("TMPDIR", run_directory());
    command
}

/// `clang++` of this build's LLVM, likewise (HIP compilations leave directories in TMPDIR).
pub fn clang() -> Command {
    let mut command = gpuinstr::toolchain::llvm_tool("clang++");
    command.env("TMPDIR", run_directory());
    command
}

/// Runs a command; the output whatever the exit status.
pub fn run(command: &mut Command) -> Output {
    command.output().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
}

/// Runs a command that must succeed.
pub fn run_ok(command: &mut Command) -> Output {
    let output = run(command);
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Builds a tool; the path of the output.
pub fn build_tool(compiler: Compiler, source: &Path, opt: &str, dir: &Path) -> PathBuf {
    let stem = source.parent().and_then(|p| p.file_name()).expect("example directory").to_string_lossy();
    let output = dir.join(format!("{stem}-{compiler:?}{opt}.o"));
    run_ok(&mut tool_compile_command(compiler, source, opt, &output));
    output
}

/// Disassembles bitcode with llvm-dis.
pub fn llvm_dis(bitcode: &[u8], dir: &Path) -> String {
    let path = dir.join("module.bc");
    std::fs::write(&path, bitcode).expect("write bitcode");
    let output = run_ok(gpuinstr::toolchain::llvm_tool("llvm-dis").arg(&path).arg("-o").arg("-"));
    String::from_utf8(output.stdout).expect("llvm-dis prints UTF-8")
}

/// Runs opt with the plugin loaded and the given pass pipeline on a file,
/// printing IR.
pub fn opt_command(passes: &str, input: &Path) -> Command {
    let mut command = gpuinstr::toolchain::llvm_tool("opt");
    command
        .arg(format!("-load-pass-plugin={}", plugin().display()))
        .arg(format!("-passes={passes}"))
        .arg("-S")
        .arg(input)
        .arg("-o")
        .arg("-");
    command
}

/// The gpuinstr-link binary of this build.
pub fn gpuinstr_link() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| built_binary("gpuinstr-driver", "gpuinstr-link")).clone()
}

/// Dynamic mode's worker (`gpuinstr-dynamic-worker`, a binary of the
/// runtime's) of this build.
pub fn dynamic_worker() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| built_binary("gpuinstr-runtime", "gpuinstr-dynamic-worker")).clone()
}

/// A binary of `package` in this test run's profile, built first (`cargo
/// test -p gpuinstr-tests` alone does not build its dependencies'
/// binaries). Built every run, not only when missing: one left from an
/// older build would run older code (cargo does nothing when it is up to
/// date).
fn built_binary(package: &str, binary: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let profile = exe.parent().and_then(Path::parent).expect("target/<profile>/deps");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let release = profile.file_name().is_some_and(|name| name == "release");
    run_ok(
        Command::new(cargo)
            .args(["build", "-p", package, "--bin", binary])
            .args(release.then_some("--release"))
            .args(gpuinstr::toolchain::cargo_feature_arguments())
            .current_dir(repo()),
    );
    profile.join(binary)
}

/// A scratch directory removed at the end of the test.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("gpuinstr-test-").tempdir().expect("temporary directory")
}

/// A directory for what a test binary builds once per run and shares
/// between its tests: `target/test-run/<test binary>`, emptied when the run
/// first asks for it. (A temporary directory held by a static is never
/// dropped, and every run left one in /tmp.)
pub fn run_directory() -> &'static Path {
    static DIRECTORY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIRECTORY.get_or_init(|| {
        // target/<profile>/deps/<test binary>
        let exe = std::env::current_exe().expect("test executable path");
        let target = exe.ancestors().nth(3).expect("the test binary is under target/<profile>/deps");
        let stem = exe.file_stem().expect("a file name").to_string_lossy().to_string();
        let directory = target.join("test-run").join(stem);
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).expect("the test run's directory");
        directory
    })
}

/// Decodes the bytes of an LLVM IR string constant (`c"BC\C0\DE..."`):
/// printable characters as themselves, `\\` for a backslash, `\XX` for
/// anything else.
pub fn decode_ir_string(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if bytes[i] == b'\\' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("escape is ASCII");
            out.push(u8::from_str_radix(hex, 16).expect("IR string escapes are two hex digits"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The bitcode of the `@gpuinstr.embedded.tool` global in printed IR.
pub fn embedded_bitcode_in_ir(ir: &str) -> Vec<u8> {
    let line = ir
        .lines()
        .find(|l| l.starts_with("@gpuinstr.embedded.tool"))
        .expect("the IR has an @gpuinstr.embedded.tool global");
    let start = line.find("c\"").expect("the global holds a string") + 2;
    let end = line.rfind("\", section").expect("the global has a section");
    decode_ir_string(&line[start..end])
}

/// IR text without the lines that name the file it came from.
pub fn without_module_identity(ir: &str) -> String {
    ir.lines()
        .filter(|l| !l.starts_with("; ModuleID") && !l.starts_with("source_filename"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sets `st_value` of every symbol named `name` (in .symtab and .dynsym) of
/// an ELF64 little-endian file: a way to make malformed code objects.
pub fn patch_symbol_value(elf: &mut [u8], name: &str, value: u64) -> usize {
    use object::elf::{FileHeader64, SHT_DYNSYM, SHT_SYMTAB};
    use object::read::elf::{FileHeader, SectionHeader};
    use object::LittleEndian;

    let mut offsets = Vec::new();
    {
        let data: &[u8] = elf;
        let header = FileHeader64::<LittleEndian>::parse(data).expect("ELF64 little-endian");
        let sections = header.sections(LittleEndian, data).expect("section table");
        for kind in [SHT_SYMTAB, SHT_DYNSYM] {
            let symbols = sections.symbols(LittleEndian, data, kind).expect("symbol table");
            let Some(table_offset) =
                sections.iter().find(|s| s.sh_type(LittleEndian) == kind).map(|s| s.sh_offset(LittleEndian))
            else {
                continue;
            };
            for (index, symbol) in symbols.iter().enumerate() {
                if symbols.symbol_name(LittleEndian, symbol).ok() == Some(name.as_bytes()) {
                    // Elf64_Sym: st_name u32, st_info u8, st_other u8, st_shndx u16, st_value u64.
                    offsets.push(table_offset as usize + index * 24 + 8);
                }
            }
        }
    }
    for offset in &offsets {
        elf[*offset..*offset + 8].copy_from_slice(&value.to_le_bytes());
    }
    offsets.len()
}

/// A kernel source under tests/inputs/kernels compiled by hipcc for gfx908
/// and gfx90a, once per test run (the host object with both code objects).
pub fn test_kernels(name: &str) -> PathBuf {
    hip_object(&format!("kernels/{name}.hip"))
}

/// A HIP source under tests/inputs compiled by hipcc for gfx908 and gfx90a,
/// once per test run (the host object with both code objects).
pub fn hip_object(relative: &str) -> PathBuf {
    hip_object_with(relative, &[])
}

/// The same with more hipcc options (`-mcode-object-version=5`), built once
/// per run for each set of options.
pub fn hip_object_with(relative: &str, options: &[&str]) -> PathBuf {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let key = std::iter::once(relative).chain(options.iter().copied()).collect::<Vec<_>>().join(" ");
    let mut built = BUILT.get_or_init(Default::default).lock().expect("kernel cache");
    if let Some(path) = built.get(&key) {
        return path.clone();
    }
    let stem: String = key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect();
    let output = run_directory().join(format!("{stem}.o"));
    run_ok(
        hipcc()
            .args(["--offload-arch=gfx908", "--offload-arch=gfx90a", "-O3", "-c"])
            .args(options)
            .arg(input(relative))
            .arg("-o")
            .arg(&output),
    );
    built.insert(key, output.clone());
    output
}

/// The MI300 processor this toolchain builds for: gfx940 with LLVM 15,
/// which has no gfx942; gfx942 from LLVM 17 (LLVM 20 drops gfx940).
pub fn mi300() -> &'static str {
    if gpuinstr::toolchain::LLVM_MAJOR >= 17 {
        "gfx942"
    } else {
        "gfx940"
    }
}

/// Every processor the tests instrument and emulate: gfx906 (MI50: no
/// AGPRs, one VGPR per work-item id), gfx908 (MI100: an AGPR file of its
/// own), gfx90a (MI210: unified file, packed ids), MI300 (architected flat
/// scratch) and, with LLVM 21 (the first we build that knows it), gfx950.
pub fn every_target() -> Vec<&'static str> {
    let mut targets = vec!["gfx906", "gfx908", "gfx90a", mi300()];
    if gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        targets.push("gfx950");
    }
    targets
}

/// A source under tests/inputs built for [`every_target`], once per run.
pub fn object_for_every_target(relative: &str) -> PathBuf {
    let architectures: Vec<String> = every_target()
        .iter()
        .filter(|t| !["gfx908", "gfx90a"].contains(t))
        .map(|t| format!("--offload-arch={t}"))
        .collect();
    hip_object_with(relative, &architectures.iter().map(String::as_str).collect::<Vec<_>>())
}

/// CoMGR's link where it knows the processor (what the runtime uses), else
/// ld.lld (Debian 12's CoMGR 5.2 predates gfx940).
pub fn linker_for(app: &gpuinstr::stages::load::CodeObject) -> gpuinstr::stages::emit::link::Linker {
    use gpuinstr::stages::emit::link::Linker;
    if gpuinstr::native::comgr::knows_processor(&app.target.processor) {
        Linker::Comgr
    } else {
        Linker::Lld
    }
}

/// The test kernel sources (file stems).
pub const TEST_KERNELS: [&str; 4] = ["control_flow", "memory", "calls_and_scratch", "matrix_cores"];

/// `package` (a name, or `name/suite`) downloaded with apt-get download
/// into `directory`: the `.deb`'s path.
fn apt_download(package: &str, directory: &Path) -> PathBuf {
    let download = || Command::new("apt-get").arg("download").arg(package).current_dir(directory).output();
    let mut output = download().expect("apt-get runs");
    if !output.status.success() {
        // Fresh machines may have no package lists yet.
        let _ = Command::new("apt-get").arg("update").output();
        output = download().expect("apt-get runs");
    }
    assert!(
        output.status.success(),
        "cannot download {package} with apt-get download: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let name = package.split('/').next().unwrap_or_default();
    std::fs::read_dir(directory)
        .expect("package cache")
        .map(|e| e.expect("entry").path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{name}_"))))
        .expect("the downloaded .deb")
}

/// A file from Debian 12's build of a package (downloaded with apt-get
/// download and extracted once, cached in target/corpus/bookworm).
pub fn debian_package_file(package: &str, path_in_package: &str) -> PathBuf {
    use std::sync::Mutex;
    static FETCH: Mutex<()> = Mutex::new(());
    let _guard = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    // Debian 12's package whatever the environment (scripts/env.sh gives
    // the chroots Debian 12's package lists): the same code objects under
    // every toolchain, so that every build is held to the same results.
    let package = &format!("{package}/bookworm");
    let cache = repo().join("target/corpus/bookworm");
    let extracted = cache.join(path_in_package.trim_start_matches('/'));
    if extracted.exists() {
        return extracted;
    }
    std::fs::create_dir_all(&cache).expect("corpus cache directory");
    let deb = apt_download(package, &cache);
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "dpkg-deb --fsys-tarfile '{}' | tar -x -C '{}' '.{}'",
            deb.display(),
            cache.display(),
            path_in_package
        ))
        .status()
        .expect("dpkg-deb and tar run");
    assert!(status.success() && extracted.exists(), "cannot extract {path_in_package} from {}", deb.display());
    let _ = std::fs::remove_file(&deb);
    extracted
}

/// Whole packages of the environment's own Debian suite (`GPUINSTR_ENV`,
/// bookworm outside scripts/env.sh), downloaded with apt-get download and
/// extracted once into target/corpus/ENV/root, which is returned: libraries
/// an environment does not install (sid's rocSOLVER and rocBLAS unpack to
/// 6 GB), for the long tests that call them.
pub fn environment_packages(packages: &[&str]) -> PathBuf {
    let environment = std::env::var("GPUINSTR_ENV").unwrap_or_else(|_| "bookworm".into());
    let cache = repo().join("target/corpus").join(environment);
    let root = cache.join("root");
    std::fs::create_dir_all(&root).expect("package cache directory");
    for package in packages {
        let marker = cache.join(format!("{package}.extracted"));
        if marker.exists() {
            continue;
        }
        let deb = apt_download(package, &cache);
        run_ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
        std::fs::remove_file(&deb).expect("remove the .deb");
        std::fs::write(&marker, "").expect("marker");
    }
    root
}

/// One kernel of [`kernels_from_assembly`]: its name, its code, its
/// explicit arguments (name and size in bytes, each a global pointer when
/// 8 bytes, else a value, laid out one after another at 8-byte alignment)
/// and its LDS.
#[derive(Clone)]
pub struct AssemblyKernel {
    pub name: String,
    pub body: String,
    pub arguments: Vec<(&'static str, u64)>,
    pub group_segment: u32,
    /// Bytes of scratch per work-item (the emulator starts FLAT_SCRATCH at
    /// the wave's part of it, with or without architected flat scratch).
    pub private_segment: u32,
}

/// A code object of several hand-written kernels, each taking its
/// arguments through the kernarg segment pointer in `s[0:1]` and the
/// work-item X id in `v0`. Assembled by llvm-mc and linked by ld.lld, so
/// the emulator runs a real linked code object.
pub fn kernels_from_assembly(processor: &str, kernels: &[AssemblyKernel]) -> gpuinstr::stages::load::CodeObject {
    link_assemblies(processor, &[kernel_assembly(processor, kernels, false).concat()], &[])
}

/// The same kernels assembled each in a file of its own and linked
/// together with a GNU build id, as Tensile builds its code objects
/// (Debian's clang asks for the id): local labels of one kernel's file
/// (`label_AlphaNonZero`) may be defined in the others too, and kernel
/// symbols have no size (the linker's padding follows each kernel).
pub fn kernels_from_separate_assembly(
    processor: &str,
    kernels: &[AssemblyKernel],
) -> gpuinstr::stages::load::CodeObject {
    link_assemblies(processor, &kernel_assembly(processor, kernels, true), &["--build-id=sha1"])
}

/// The assembly of `kernels`: one text, or (`separate`) one per kernel,
/// each with its own descriptor and metadata note, as Tensile's are.
fn kernel_assembly(processor: &str, kernels: &[AssemblyKernel], separate: bool) -> Vec<String> {
    use std::fmt::Write as _;
    let accum = if processor == "gfx90a" || processor.starts_with("gfx94") || processor == "gfx950" {
        "\t.amdhsa_accum_offset 64\n"
    } else {
        ""
    };
    // Per kernel: its code, its descriptor and its metadata entry.
    let parts: Vec<(String, String, String)> = kernels
        .iter()
        .map(|kernel| {
            let name = &kernel.name;
            let mut offset = 0u64;
            let mut arguments = String::new();
            for (argument, size) in &kernel.arguments {
                offset = offset.next_multiple_of(8.min(*size));
                let kind = if *size == 8 { "global_buffer\n        .address_space: global" } else { "by_value" };
                write!(
                    arguments,
                    "      - .name: {argument}\n        .offset: {offset}\n        .size: {size}\n        .value_kind: {kind}\n"
                )
                .unwrap();
                offset += size;
            }
            let kernarg_size = offset.next_multiple_of(8);
            // Tensile's kernel symbols have no size.
            let size = if separate { String::new() } else { format!("\t.size {name}, .-{name}\n") };
            let code = format!(
                "\t.globl {name}\n\t.p2align 8\n\t.type {name},@function\n{name}:\n{}\n\ts_endpgm\n{size}",
                kernel.body
            );
            let descriptor = format!(
                "\t.p2align 6\n\t.amdhsa_kernel {name}\n\t.amdhsa_user_sgpr_kernarg_segment_ptr 1\n\
                 \t.amdhsa_next_free_vgpr 64\n\t.amdhsa_next_free_sgpr 48\n\t.amdhsa_kernarg_size {kernarg_size}\n\
                 \t.amdhsa_group_segment_fixed_size {}\n\t.amdhsa_private_segment_fixed_size {}\n{accum}\t.end_amdhsa_kernel\n",
                kernel.group_segment, kernel.private_segment
            );
            let metadata = format!(
                "  - .name: {name}\n    .symbol: {name}.kd\n    .kernarg_segment_size: {kernarg_size}\n\
                 \x20   .kernarg_segment_align: 8\n    .group_segment_fixed_size: {}\n\
                 \x20   .private_segment_fixed_size: {}\n    .wavefront_size: 64\n    .sgpr_count: 48\n    .vgpr_count: 64\n\
                 \x20   .max_flat_workgroup_size: 256\n    .args:\n{arguments}",
                kernel.group_segment, kernel.private_segment
            );
            (code, descriptor, metadata)
        })
        .collect();
    let file = |parts: &[(String, String, String)]| -> String {
        let code: String = parts.iter().map(|p| p.0.as_str()).collect();
        let descriptors: String = parts.iter().map(|p| p.1.as_str()).collect();
        let metadata: String = parts.iter().map(|p| p.2.as_str()).collect();
        format!(
            "\t.amdgcn_target \"amdgcn-amd-amdhsa--{processor}\"\n\t.text\n{code}\
             \t.section .rodata,\"a\",@progbits\n{descriptors}\t.amdgpu_metadata\n---\namdhsa.kernels:\n{metadata}\
             amdhsa.target: amdgcn-amd-amdhsa--{processor}\namdhsa.version:\n  - 1\n  - 1\n...\n\t.end_amdgpu_metadata\n"
        )
    };
    if separate {
        parts.chunks(1).map(file).collect()
    } else {
        vec![file(&parts)]
    }
}

/// `code_object` with each kernel asking for its first `dwords` argument
/// dwords preloaded into SGPRs (descriptor bytes 58-59,
/// KERNARG_PRELOAD_SPEC, and USER_SGPR_COUNT counting them), as LLVM 18
/// and later write it: llvm-mc 15 has no directive for it. The kernels'
/// code must be written for it (entered 256 bytes in where firmware
/// preloads).
pub fn with_preloaded_arguments(
    code_object: &gpuinstr::stages::load::CodeObject,
    dwords: u8,
) -> gpuinstr::stages::load::CodeObject {
    let mut bytes = code_object.bytes.clone();
    for kernel in &code_object.kernels {
        let section = code_object.section_containing(kernel.descriptor_address).expect("descriptor in a section");
        let at = (section.offset + kernel.descriptor_address - section.address) as usize;
        bytes[at + 58] = dwords;
        bytes[at + 59] = 0;
        let rsrc2 = u32::from_le_bytes(bytes[at + 52..at + 56].try_into().unwrap());
        let user_sgprs = ((rsrc2 >> 1) & 0x1f) + u32::from(dwords);
        let rsrc2 = (rsrc2 & !(0x1f << 1)) | (user_sgprs << 1);
        bytes[at + 52..at + 56].copy_from_slice(&rsrc2.to_le_bytes());
    }
    gpuinstr::stages::load::CodeObject::parse(bytes, code_object.origin.clone()).unwrap()
}

/// `text` assembled for `processor` by llvm-mc and linked by ld.lld.
fn link_assembly(processor: &str, text: &str) -> gpuinstr::stages::load::CodeObject {
    link_assemblies(processor, &[text.to_string()], &[])
}

/// Each text assembled for `processor` by llvm-mc into an object of its
/// own, and the objects linked by ld.lld.
fn link_assemblies(processor: &str, texts: &[String], linker_options: &[&str]) -> gpuinstr::stages::load::CodeObject {
    let dir = scratch();
    let linked = dir.path().join("test.hsaco");
    let mut objects = Vec::new();
    for (k, text) in texts.iter().enumerate() {
        let source = dir.path().join(format!("test{k}.s"));
        std::fs::write(&source, text).unwrap();
        let object = dir.path().join(format!("test{k}.o"));
        run_ok(
            gpuinstr::toolchain::llvm_tool("llvm-mc")
                .args(["-triple=amdgcn-amd-amdhsa", &format!("-mcpu={processor}"), "-filetype=obj"])
                .arg(&source)
                .arg("-o")
                .arg(&object),
        );
        objects.push(object);
    }
    run_ok(
        gpuinstr::toolchain::llvm_tool("ld.lld")
            .args(["-shared", "--no-undefined"])
            .args(linker_options)
            .args(&objects)
            .arg("-o")
            .arg(&linked),
    );
    let bytes = std::fs::read(&linked).unwrap();
    gpuinstr::stages::load::CodeObject::parse(bytes, Vec::new()).unwrap()
}

/// Assembly of a loop that issues the next iteration's load before testing
/// whether to leave (as Tensile's GEMM loops prefetch): at `.Lexit`, whose
/// first instruction writes v0, the load's v[4:5] are dead to liveness but
/// may still be landing. v[2:3] hold the address; s4 counts.
pub const PREFETCH_LEFT_IN_FLIGHT: &str = "\ts_mov_b32 s4, 10
.Lloop:
\tglobal_load_dwordx2 v[4:5], v[2:3], off
\ts_sub_u32 s4, s4, 1
\ts_cmp_eq_u32 s4, 0
\ts_cbranch_scc1 .Lexit
\ts_waitcnt vmcnt(0)
\tglobal_store_dwordx2 v[2:3], v[4:5], off
\ts_branch .Lloop
.Lexit:
\tv_mov_b32_e32 v0, 3
";

/// A code object built from hand-written assembly: one kernel `test_kernel`
/// with `body` as its code, then `functions` (device functions, with their
/// own labels, `.type` and `.size`). Assembled by llvm-mc and linked by
/// ld.lld, so the lifter sees a real linked code object.
pub fn kernel_from_assembly(processor: &str, body: &str, functions: &str) -> gpuinstr::stages::load::CodeObject {
    kernel_with_registers(processor, body, functions, 64, 32)
}

/// [`kernel_from_assembly`] with a vector allocation of `vgprs` (on a
/// unified file, VGPRs and AGPRs, the AGPRs from `accum_offset`).
pub fn kernel_with_registers(
    processor: &str,
    body: &str,
    functions: &str,
    vgprs: u32,
    accum_offset: u32,
) -> gpuinstr::stages::load::CodeObject {
    let accum = if processor == "gfx90a" || processor.starts_with("gfx94") {
        format!("\t.amdhsa_accum_offset {accum_offset}\n")
    } else {
        String::new()
    };
    let text = format!(
        "\t.amdgcn_target \"amdgcn-amd-amdhsa--{processor}\"\n\
         \t.text\n\t.globl test_kernel\n\t.p2align 8\n\t.type test_kernel,@function\ntest_kernel:\n{body}\n\
         \t.size test_kernel, .-test_kernel\n{functions}\n\
         \t.section .rodata,\"a\",@progbits\n\t.p2align 6\n\t.amdhsa_kernel test_kernel\n\
         \t.amdhsa_user_sgpr_kernarg_segment_ptr 1\n\t.amdhsa_next_free_vgpr {vgprs}\n\t.amdhsa_next_free_sgpr 48\n{accum}\
         \t.end_amdhsa_kernel\n\
         \t.amdgpu_metadata\n---\namdhsa.kernels:\n  - .name: test_kernel\n    .symbol: test_kernel.kd\n\
         \x20   .kernarg_segment_size: 0\n    .kernarg_segment_align: 8\n    .group_segment_fixed_size: 0\n\
         \x20   .private_segment_fixed_size: 0\n    .wavefront_size: 64\n    .sgpr_count: 48\n    .vgpr_count: {vgprs}\n\
         \x20   .max_flat_workgroup_size: 256\namdhsa.target: amdgcn-amd-amdhsa--{processor}\namdhsa.version:\n  - 1\n  - 1\n...\n\
         \t.end_amdgpu_metadata\n"
    );
    link_assembly(processor, &text)
}
