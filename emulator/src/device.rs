//! The emulated device: one code object loaded into device memory (its
//! sections at a load base, dynamic relocations applied), buffers the
//! caller allocates, and kernel launches.

use std::path::Path;

use gpuinstr::stages::load::{self, CodeObject, Kernel};

use crate::dispatch::{self, DispatchMemory, Launch, Options, RunReport, TraceEntry};
use crate::error::EmulatorError;
use crate::memory::Memory;
use crate::program::Program;
use crate::semantics::Machine;
use crate::wave::LANES;

/// R_AMDGPU_* relocation types the loader applies.
const R_AMDGPU_ABS32_LO: u32 = 4;
const R_AMDGPU_ABS32_HI: u32 = 5;
const R_AMDGPU_ABS64: u32 = 3;
const R_AMDGPU_ABS32: u32 = 6;
const R_AMDGPU_RELATIVE64: u32 = 13;

/// Which of a file's code objects to load: those for `target` (all when
/// None), then the `index`-th of them (in the file's order) or else the one
/// defining `kernel`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Selection<'a> {
    pub target: Option<&'a str>,
    pub kernel: Option<&'a str>,
    pub index: Option<usize>,
}

/// The code objects of `path` for `target` (all when None), in the file's
/// order, or only the `index`-th of them; an error when there are none or
/// no such one.
pub fn code_objects(path: &Path, target: Option<&str>, index: Option<usize>) -> Result<Vec<CodeObject>, EmulatorError> {
    let mut objects = load::load_for_target(path, target)?.code_objects;
    let file = path.display();
    if objects.is_empty() {
        return Err(EmulatorError::Isa(format!("{file}: no code object for {}", target.unwrap_or("any target"))));
    }
    let Some(index) = index else { return Ok(objects) };
    let count = objects.len();
    if index >= count {
        let for_target = target.map(|t| format!(" for {t}")).unwrap_or_default();
        return Err(EmulatorError::Isa(format!(
            "{file} holds {count} code objects{for_target}; there is no code object {index} (0 to {})",
            count - 1
        )));
    }
    Ok(vec![objects.swap_remove(index)])
}

fn defines(code_object: &CodeObject, kernel: &str) -> bool {
    code_object.kernels.iter().any(|k| k.name() == kernel || k.metadata.symbol == kernel)
}

pub struct Device {
    pub memory: Memory,
    pub code_object: CodeObject,
    pub program: Program,
    /// Device address of code object address 0.
    pub load_base: u64,
    pub options: Options,
    /// The trace of the last launch that stopped, up to its stop (when
    /// `options.trace` is set): what led there.
    pub trace_before_stop: Vec<TraceEntry>,
    file: String,
}

impl Device {
    /// Loads the code object of `path` (a code object, a bundle or a host
    /// file with `.hip_fatbin`) for `target` (e.g. `gfx90a`; needed when the
    /// file holds several).
    pub fn open(path: &Path, target: Option<&str>) -> Result<Self, EmulatorError> {
        Self::open_selected(path, &Selection { target, ..Selection::default() })
    }

    /// Loads the code object of `path` that `selection` picks: a library's
    /// fat binary holds many code objects of one target (rocBLAS's 66 for
    /// gfx90a), told apart by the kernel they define or their number.
    pub fn open_selected(path: &Path, selection: &Selection<'_>) -> Result<Self, EmulatorError> {
        let file = path.display().to_string();
        let mut candidates = code_objects(path, selection.target, selection.index)?;
        let count = candidates.len();
        let for_target = selection.target.map(|t| format!(" for {t}")).unwrap_or_default();
        if count == 1 {
            return Self::new(candidates.swap_remove(0), file);
        }
        let Some(kernel) = selection.kernel else {
            return Err(EmulatorError::Isa(format!(
                "{file} holds {count} code objects{for_target}; pick one with a target (e.g. --target gfx90a:xnack-), \
                 a kernel, or its number (--code-object 0 to {})",
                count - 1
            )));
        };
        let defining: Vec<usize> = (0..count).filter(|&k| defines(&candidates[k], kernel)).collect();
        match defining[..] {
            [] => Err(EmulatorError::Isa(format!(
                "{file}: none of its {count} code objects{for_target} defines a kernel named {kernel}"
            ))),
            [one] => Self::new(candidates.swap_remove(one), file),
            ref several => Err(EmulatorError::Isa(format!(
                "{file}: {} of its code objects{for_target} define {kernel}; pick one with --code-object (one of {})",
                several.len(),
                several.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    pub fn new(code_object: CodeObject, file: String) -> Result<Self, EmulatorError> {
        let mut memory = Memory::default();
        let load_base = load_code_object(&mut memory, &code_object)?;
        let program = Program::new(code_object.clone())?;
        Ok(Device {
            memory,
            code_object,
            program,
            load_base,
            options: Options::default(),
            trace_before_stop: Vec::new(),
            file,
        })
    }

    pub fn code_object(&self) -> &CodeObject {
        &self.code_object
    }

    pub fn kernel(&self, name: &str) -> Result<&Kernel, EmulatorError> {
        let kernels = &self.code_object.kernels;
        kernels.iter().find(|k| k.name() == name || k.metadata.symbol == name).ok_or_else(|| EmulatorError::NoKernel {
            file: self.file.clone(),
            kernel: name.to_string(),
            available: kernels.iter().map(|k| k.name().to_string()).collect::<Vec<_>>().join(", "),
        })
    }

    /// The device address of a symbol of the code object (a global).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        let symbol = self.code_object.symbols.iter().find(|s| s.name == name && s.section.is_some())?;
        Some(self.load_base + symbol.value)
    }

    /// Does what the HIP runtime does for a `__managed__` variable: the
    /// device global holds a pointer to memory the host shares; this
    /// allocates `size` zeroed bytes, stores their address in the global and
    /// returns it (None when the code object has no such global).
    pub fn bind_managed(&mut self, name: &str, size: u64) -> Option<u64> {
        let global = self.symbol_address(name)?;
        let cell = self.memory.allocate(&format!("managed {name}"), size);
        self.memory.write_u64(global, cell).ok()?;
        Some(cell)
    }

    pub fn allocate(&mut self, name: &str, bytes: &[u8]) -> u64 {
        self.memory.allocate_bytes(name, bytes)
    }

    /// Runs a kernel to completion. `arguments` are the explicit kernel
    /// arguments' bytes, in order.
    pub fn launch(&mut self, kernel: &str, launch: Launch, arguments: &[Vec<u8>]) -> Result<RunReport, EmulatorError> {
        let kernel = self.kernel(kernel)?.clone();
        let processor = self.program.processor;
        let name = kernel.name().to_string();
        if launch.workgroup_size.iter().product::<u32>() == 0 || launch.workgroups.iter().product::<u32>() == 0 {
            return Err(EmulatorError::Dispatch { kernel: name, message: "an empty grid or workgroup".into() });
        }
        if Launch::of_grid(launch.grid_size, launch.workgroup_size).workgroups != launch.workgroups {
            return Err(EmulatorError::Dispatch {
                kernel: name,
                message: format!(
                    "{:?} workgroups of {:?} do not make a grid of {:?} work-items (at most 2^32 - 1 per dimension)",
                    launch.workgroups, launch.workgroup_size, launch.grid_size
                ),
            });
        }
        let threads = launch.workgroup_size.iter().product::<u32>();
        if u64::from(threads) > kernel.metadata.max_flat_workgroup_size.max(1) {
            return Err(EmulatorError::Dispatch {
                kernel: name,
                message: format!(
                    "workgroups of {threads} work-items exceed the kernel's .max_flat_workgroup_size {}",
                    kernel.metadata.max_flat_workgroup_size
                ),
            });
        }
        let queue = self.memory.allocate(&format!("{name} queue"), 256);
        let kernarg_bytes = dispatch::kernarg_segment(&kernel, &launch, arguments, queue)?;
        let kernarg = self.memory.allocate_bytes(&format!("{name} kernel arguments"), &kernarg_bytes);
        let kernel_object = self.load_base + kernel.descriptor_address;
        let packet_bytes = dispatch::dispatch_packet_for(&launch, &kernel, kernarg, kernel_object);
        let packet = self.memory.allocate_bytes(&format!("{name} dispatch packet"), &packet_bytes);
        let waves = u64::from(threads.div_ceil(LANES as u32))
            * launch.workgroups.iter().map(|&g| u64::from(g)).product::<u64>();
        let per_lane = dispatch::private_bytes_per_lane_of(&kernel);
        let scratch_per_wave = per_lane * LANES as u64;
        let scratch = self.memory.allocate(&format!("{name} scratch"), (scratch_per_wave * waves).max(4));
        let memory = DispatchMemory { packet, queue, kernarg, scratch, scratch_per_wave };
        let (vgprs, sgprs) = dispatch::allocated_registers(&kernel.descriptor, processor);
        let machine = Machine {
            load_base: self.load_base,
            lds_size: u64::from(kernel.descriptor.group_segment_fixed_size + launch.dynamic_lds),
            vgprs,
            sgprs,
            processor,
            interrupts: None,
            lds_out_of_range: self.options.lds_out_of_range,
            // Code built for a board with ECC off (`sramecc-`) runs as there.
            d16_zeroes_other_half: processor.sram_ecc
                && self.options.sram_ecc_on
                && self.code_object.target.sramecc != load::target::FeatureSetting::Off,
        };
        let trace = &mut self.trace_before_stop;
        trace.clear();
        dispatch::run(&mut self.program, &mut self.memory, &kernel, &launch, &memory, &machine, &self.options, trace)
    }
}

/// Copies the code object's loadable sections into a fresh allocation and
/// applies its dynamic relocations; returns the load base.
fn load_code_object(memory: &mut Memory, code_object: &CodeObject) -> Result<u64, EmulatorError> {
    let end = code_object.sections.iter().filter(|s| s.loadable).map(|s| s.address + s.size).max().unwrap_or(0);
    let base = memory.allocate("code object", end.max(4));
    for section in code_object.sections.iter().filter(|s| s.loadable && !s.no_bits()) {
        if let Some(bytes) = code_object.section_bytes(section) {
            memory.write(base + section.address, bytes).map_err(|f| EmulatorError::Isa(f.to_string()))?;
        }
    }
    let symbol_value = |name: &Option<String>| -> u64 {
        name.as_ref()
            .and_then(|n| code_object.symbols.iter().find(|s| &s.name == n && s.section.is_some()))
            .map_or(0, |s| base + s.value)
    };
    for relocation in &code_object.relocations {
        let at = base + relocation.offset;
        let value = symbol_value(&relocation.symbol).wrapping_add(relocation.addend as u64);
        let result = match relocation.kind {
            R_AMDGPU_ABS64 => memory.write_u64(at, value),
            R_AMDGPU_RELATIVE64 => memory.write_u64(at, base.wrapping_add(relocation.addend as u64)),
            R_AMDGPU_ABS32_LO | R_AMDGPU_ABS32 => memory.write_u32(at, value as u32),
            R_AMDGPU_ABS32_HI => memory.write_u32(at, (value >> 32) as u32),
            other => {
                return Err(EmulatorError::Isa(format!(
                    "relocation type {other} at {:#x} is not supported by the emulator's loader",
                    relocation.offset
                )))
            }
        };
        result.map_err(|f| EmulatorError::Isa(format!("relocation at {:#x}: {f}", relocation.offset)))?;
    }
    Ok(base)
}
