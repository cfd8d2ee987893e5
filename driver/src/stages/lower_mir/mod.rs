//! Stage 8, lower-mir: the payload MIR after instruction selection becomes
//! MIR the rest of LLVM's pipeline can allocate registers for without
//! touching the application's state.
//!
//! - Registers live at the point enter each payload as live-ins. Scalar ones
//!   the payload may disturb (SGPRs; SCC, VCC, EXEC, M0 when the payload
//!   defines them) are copied into virtual registers at the entry and copied
//!   back before every return, so the allocator may use or spill them and
//!   never clobbers them silently (seed 004). Vector registers are *pinned*
//!   instead (live-in and an implicit use of every return, never copied): a
//!   VGPR copy only moves the active lanes, and a lane that is inactive here
//!   may still hold a live value. The SVA and work-item-id VGPRs are pinned.
//! - Each intrinsic placeholder is replaced by what its MIR callback builds
//!   through [`builder::PayloadBuilder`].
//! - Writes to copied registers are tracked in SSA form (phis where paths
//!   meet), and the value reaching each return is what is copied back.

pub mod builder;
pub mod classes;
pub mod final_code;
pub mod mir;
pub mod physical;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpuinstr_intrinsics::{IntrinsicError, KernelArgument, MirOperands, Registry, TargetInfo, VirtualRegister};
use thiserror::Error;

use crate::stages::lift::Isa;
use crate::stages::liveness::pending::Pending;
use crate::stages::liveness::{RegisterFile, Unit, UnitSet};
use crate::stages::lower_ir::Placeholder;
pub use classes::RegisterClasses;
pub use mir::{MirFunction, MirModule, MirParseError};
use physical::{copyable, mir_name, Frame};

/// What a payload's point offers it.
#[derive(Clone, Debug)]
pub struct PayloadSite {
    /// Units live before the instruction the payload goes in front of.
    pub live: UnitSet,
    /// The VGPR holding the State Value Array in this function, if any.
    pub sva: Option<u16>,
    /// The VGPR holding the packed work-item ids, if any.
    pub work_item_ids: Option<u16>,
    /// Offsets of hidden kernel arguments by `.value_kind` (kernels only).
    /// (Shared by a kernel's sites.)
    pub hidden_arguments: Option<std::sync::Arc<BTreeMap<String, u32>>>,
    /// The kernel's `.max_flat_workgroup_size` (1024 in device functions).
    pub max_flat_workgroup_size: u32,
    /// The payload's VGPRs stay below this (stage sva's cap: the
    /// allocation, what it may grow to, and what a wave may have).
    pub max_vgprs: u16,
    /// AGPRs the payload may use without pushing the kernel's allocation
    /// past what it may grow to (LLVM also allocates payload values in
    /// AGPRs on gfx90a); 256: no limit known.
    pub max_agprs: u16,
    /// Why stage sva found no register here, when it did not.
    pub unplaced: Option<String>,
    /// Whole-wave copies around the payload: the SVA and work-item ids
    /// loaded from AGPRs into `sva`/`work_item_ids`, live VGPRs parked.
    pub parking: Option<final_code::Parking>,
    /// What memory operations may still be writing before the instruction:
    /// the payload waits for the counters of those it touches.
    pub pending: Pending,
}

impl Default for PayloadSite {
    fn default() -> Self {
        PayloadSite {
            live: UnitSet::EMPTY,
            sva: None,
            work_item_ids: None,
            hidden_arguments: None,
            max_flat_workgroup_size: 1024,
            max_vgprs: 256,
            max_agprs: 256,
            unplaced: None,
            parking: None,
            pending: Pending::NONE,
        }
    }
}

/// What stage 8 learnt about one payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoweredPayload {
    pub kernel_arguments: BTreeSet<KernelArgument>,
    /// Units copied in and out.
    pub copied: UnitSet,
    /// Units kept live through the payload untouched.
    pub pinned: UnitSet,
    /// Units intrinsics write on purpose (`writeReg`): the application sees
    /// the new values.
    pub written: UnitSet,
    /// Frame registers (s0-s3, s32) intrinsics read directly (no SVA):
    /// right only if the payload gets no stack frame.
    pub frame_reads: UnitSet,
    /// Frame registers the payload's entry must save in the SVA's frame
    /// lanes: intrinsics read them from there.
    pub saves_frame: UnitSet,
}

#[derive(Debug, Error)]
pub enum LowerMirError {
    #[error(transparent)]
    Parse(#[from] MirParseError),
    #[error("{point}: {error}")]
    Intrinsic { point: String, error: IntrinsicError },
    #[error("{point}: placeholder `{text}` is not one of this payload's intrinsics")]
    UnknownPlaceholder { point: String, text: String },
}

/// The payload index of a MIR function name.
fn payload_index(name: &str) -> Option<usize> {
    name.strip_prefix("gpuinstr.payload.")?.parse().ok()
}

/// A read of a copied register waiting for SSA resolution.
struct PendingRead {
    block: usize,
    sequence: u32,
    unit: Unit,
    token: String,
}

/// A write to a copied register.
struct Write {
    block: usize,
    sequence: u32,
    unit: Unit,
    value: VirtualRegister,
}

/// Per-function lowering state shared by the builders of its placeholders.
pub struct FunctionState<'a> {
    pub isa: &'a Isa,
    pub classes: &'a RegisterClasses,
    pub target: &'a TargetInfo,
    pub site: &'a PayloadSite,
    /// The registers of the payload's stack frame on this processor.
    pub frame: Frame,
    pub registers: BTreeMap<u32, String>,
    pub next_register: u32,
    pub kernel_arguments: BTreeSet<KernelArgument>,
    /// Units intrinsics read or write; decided before lowering.
    pub intrinsic_units: UnitSet,
    /// Units defined directly by built instructions (`DefPhysical`).
    pub defined_directly: UnitSet,
    /// Pinned (vector) units intrinsics write in place.
    pub written_in_place: UnitSet,
    /// Frame registers (s0-s3, s32) intrinsics read from the SVA lanes the
    /// payload's entry saves them in.
    pub reads_saved_frame: UnitSet,
    reads: Vec<PendingRead>,
    writes: Vec<Write>,
    sequence: u32,
    block: usize,
}

impl<'a> FunctionState<'a> {
    fn new_register(&mut self, class: String) -> VirtualRegister {
        let register = VirtualRegister(self.next_register);
        self.next_register += 1;
        self.registers.insert(register.0, class);
        register
    }

    /// A token standing for a copied unit's value at this point; resolved
    /// once all writes are known.
    fn read_copied(&mut self, unit: Unit) -> String {
        self.sequence += 1;
        let token = format!("@@read{}@@", self.reads.len());
        self.reads.push(PendingRead { block: self.block, sequence: self.sequence, unit, token: token.clone() });
        token
    }

    fn write_copied(&mut self, unit: Unit, value: VirtualRegister) {
        self.sequence += 1;
        self.writes.push(Write { block: self.block, sequence: self.sequence, unit, value });
    }
}

/// Which registers a payload copies and which it pins.
struct RegisterPlan {
    /// Copied into virtual registers at the entry, back before returns.
    copied: UnitSet,
    /// Kept in place by per-block clobbers (vector registers).
    pinned_vector: UnitSet,
    /// SCC, live and never defined by the payload: a live-in of every block.
    pinned_scc: bool,
    /// Live SGPRs LLVM reserves (the EXEC-copy pair when every pair holds
    /// something live): never allocated, so live-ins of every block; a
    /// payload that writes them is rejected by the machine-code check.
    reserved_live: UnitSet,
}

/// The lowest SGPR LLVM may take for EXEC copies instead of the one it
/// chose: below are the calling convention's inputs and s30-s33 (return
/// address, stack and frame pointers).
const LOWEST_EXEC_COPY_SGPR: u16 = 34;

/// LLVM 20+ reserves the highest SGPR pair to save EXEC around whole-wave
/// spills (`sgprForEXECCopy`). A reserved register is not allocated around
/// the copies of a live one, so where the pair holds a live application
/// register it moves to the highest pair that holds nothing live; if every
/// pair does, it stays, and its live registers are kept in place
/// ([`RegisterPlan::reserved_live`]).
fn move_exec_copy_pair(function: &mut MirFunction, live: &UnitSet) -> UnitSet {
    let Some(low) = function.sgpr_for_exec_copy() else { return UnitSet::EMPTY };
    let holds_live = |low: u16| live.contains(Unit::sgpr(low)) || live.contains(Unit::sgpr(low + 1));
    if !holds_live(low) {
        return UnitSet::EMPTY;
    }
    let free = (LOWEST_EXEC_COPY_SGPR..low).step_by(2).rev().find(|candidate| !holds_live(*candidate));
    match free {
        Some(candidate) => {
            function.set_sgpr_for_exec_copy(candidate);
            UnitSet::EMPTY
        }
        None => [Unit::sgpr(low), Unit::sgpr(low + 1)].into_iter().filter(|u| live.contains(*u)).collect(),
    }
}

fn plan_registers(function: &mut MirFunction, state: &FunctionState<'_>) -> RegisterPlan {
    let mut defined = state.defined_directly;
    for block in &function.blocks {
        for line in &block.instructions {
            for name in physical::defined_registers(line) {
                for unit in physical::units_of_mir_name(&name) {
                    defined.insert(unit);
                }
            }
        }
    }
    let wanted = state.site.live.union(&state.intrinsic_units);
    let scc = Unit::special("SCC");
    let reserved_live = move_exec_copy_pair(function, &wanted);
    let mut plan =
        RegisterPlan { copied: UnitSet::EMPTY, pinned_vector: UnitSet::EMPTY, pinned_scc: false, reserved_live };
    for unit in wanted.iter() {
        let written = state.intrinsic_writes(unit);
        match unit.file() {
            _ if plan.reserved_live.contains(unit) => {}
            RegisterFile::Vgpr | RegisterFile::Agpr => plan.pinned_vector.insert(unit),
            _ if !copyable(unit, state.frame) => {}
            _ if unit == scc => {
                if defined.contains(unit) || written {
                    plan.copied.insert(unit)
                } else {
                    plan.pinned_scc = true
                }
            }
            // EXEC is reserved: untouched unless the payload defines it.
            _ if physical::pair_of(unit).is_some_and(|(pair, _, _)| pair == "exec") => {
                if defined.contains(unit) || written {
                    plan.copied.insert(unit)
                }
            }
            _ => plan.copied.insert(unit),
        }
    }
    for unit in [Unit::special("EXEC_LO"), Unit::special("EXEC_HI")] {
        if defined.contains(unit) {
            plan.copied.insert(unit);
        }
    }
    for vgpr in [state.site.sva, state.site.work_item_ids].into_iter().flatten() {
        plan.pinned_vector.insert(Unit::vgpr(vgpr));
    }
    plan
}

impl FunctionState<'_> {
    fn intrinsic_writes(&self, unit: Unit) -> bool {
        self.writes.iter().any(|w| w.unit == unit)
    }
}

/// A phi of a copied unit's values: `(block, result, incoming (predecessor, value))`.
struct Phi {
    block: usize,
    result: VirtualRegister,
    incoming: Vec<(usize, VirtualRegister)>,
}

/// SSA values of copied units: entry copies, writes, phis.
struct Ssa<'s> {
    entry: HashMap<Unit, VirtualRegister>,
    writes: &'s [Write],
    predecessors: Vec<Vec<usize>>,
    at_entry: HashMap<(usize, Unit), VirtualRegister>,
    phis: Vec<Phi>,
}

impl Ssa<'_> {
    fn at_end(
        &mut self,
        block: usize,
        unit: Unit,
        state: &mut FunctionState<'_>,
        classes: &HashMap<Unit, String>,
    ) -> VirtualRegister {
        match self.writes.iter().filter(|w| w.block == block && w.unit == unit).max_by_key(|w| w.sequence) {
            Some(write) => write.value,
            None => self.at_block_entry(block, unit, state, classes),
        }
    }

    fn before(
        &mut self,
        block: usize,
        sequence: u32,
        unit: Unit,
        state: &mut FunctionState<'_>,
        classes: &HashMap<Unit, String>,
    ) -> VirtualRegister {
        match self
            .writes
            .iter()
            .filter(|w| w.block == block && w.unit == unit && w.sequence < sequence)
            .max_by_key(|w| w.sequence)
        {
            Some(write) => write.value,
            None => self.at_block_entry(block, unit, state, classes),
        }
    }

    fn at_block_entry(
        &mut self,
        block: usize,
        unit: Unit,
        state: &mut FunctionState<'_>,
        classes: &HashMap<Unit, String>,
    ) -> VirtualRegister {
        if block == 0 || !self.writes.iter().any(|w| w.unit == unit) {
            return self.entry[&unit];
        }
        if let Some(value) = self.at_entry.get(&(block, unit)) {
            return *value;
        }
        let predecessors = self.predecessors[block].clone();
        let value = match predecessors.as_slice() {
            [] => self.entry[&unit],
            [only] => {
                let value = self.at_end(*only, unit, state, classes);
                self.at_entry.insert((block, unit), value);
                value
            }
            several => {
                let phi = state.new_register(classes[&unit].clone());
                // Memoised before the operands, so loops find the phi.
                self.at_entry.insert((block, unit), phi);
                let incoming = several.iter().map(|p| (*p, self.at_end(*p, unit, state, classes))).collect();
                self.phis.push(Phi { block, result: phi, incoming });
                phi
            }
        };
        self.at_entry.insert((block, unit), value);
        value
    }
}

/// What lowering needs of the target and the tool.
pub struct LoweringContext<'a> {
    pub isa: &'a Isa,
    pub classes: &'a RegisterClasses,
    pub target: &'a TargetInfo,
    pub registry: &'a Registry,
    /// Placeholders by asm text, and by payload.
    by_text: HashMap<String, &'a Placeholder>,
    by_payload: HashMap<usize, Vec<&'a Placeholder>>,
    /// Where pinned VGPRs' live ranges end in each block (see
    /// [`PinnedUntil`]).
    pub pinned_until: PinnedUntil,
}

/// Where the uses that keep pinned VGPRs occupied stand at a block's end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PinnedUntil {
    /// Empty inline assemblies right before the terminators, 8 registers to
    /// an instruction (cheap for LLVM's Live Variable Analysis). Between
    /// them and the terminators the pinned registers look free: code the
    /// allocator puts there (the condition SI_IF leaves before
    /// `S_MOV_B64_term exec`, a reload it finds dead) may take one, which
    /// the machine-code check refuses.
    #[default]
    Terminators,
    /// Also implicit operands of the block's last terminator (a fall-through
    /// gets an `S_BRANCH`) and of the return, so they stay occupied through
    /// the terminators. One instruction using every pinned register costs
    /// LLVM the square of their number, so only the payloads the check
    /// refused are compiled this way again.
    TheLastTerminator,
}

impl<'a> LoweringContext<'a> {
    pub fn new(
        isa: &'a Isa,
        classes: &'a RegisterClasses,
        target: &'a TargetInfo,
        registry: &'a Registry,
        placeholders: &'a [Placeholder],
    ) -> Self {
        let by_text = placeholders.iter().map(|p| (crate::stages::lower_ir::placeholder_text(p.id), p)).collect();
        let mut by_payload: HashMap<usize, Vec<&Placeholder>> = HashMap::new();
        for placeholder in placeholders {
            by_payload.entry(placeholder.payload).or_default().push(placeholder);
        }
        LoweringContext { isa, classes, target, registry, by_text, by_payload, pinned_until: PinnedUntil::default() }
    }
}

/// Lowers every payload function of the module in place; what was learnt
/// about each, by payload index. `sites[i]` and `labels[i]` belong to
/// payload `i`.
pub fn lower_module(
    module: &mut MirModule,
    context: &LoweringContext<'_>,
    sites: &[PayloadSite],
    labels: &[String],
) -> Result<Vec<(usize, LoweredOrRejected)>, LowerMirError> {
    let mut lowered = Vec::new();
    let mut rejected: BTreeMap<String, String> = BTreeMap::new();
    for function in &mut module.functions {
        let Some(index) = payload_index(&function.name) else { continue };
        let point = labels.get(index).cloned().unwrap_or_else(|| function.name.clone());
        let default_site = PayloadSite::default();
        let site = sites.get(index).unwrap_or(&default_site);
        let own = context.by_payload.get(&index).map_or(&[][..], Vec::as_slice);
        let original = function.clone();
        match lower_function(function, index, &point, context, &context.by_text, own, site) {
            Ok(payload) => lowered.push((index, LoweredOrRejected::Lowered(Box::new(payload)))),
            // What a MIR callback cannot do is about this point only (no SVA
            // register here, a hidden argument this kernel lacks): the point
            // is left alone and the others compile.
            Err(LowerMirError::Intrinsic { error, .. }) => {
                *function = original;
                rejected.insert(function.name.clone(), error.to_string());
                lowered.push((index, LoweredOrRejected::Rejected(error.to_string())));
            }
            Err(other) => return Err(other),
        }
    }
    if !rejected.is_empty() {
        *module = module.retain(|name| !rejected.contains_key(name));
    }
    Ok(lowered)
}

/// A payload lowered, or why it could not be.
#[derive(Clone, Debug)]
pub enum LoweredOrRejected {
    Lowered(Box<LoweredPayload>),
    Rejected(String),
}

fn lower_function(
    function: &mut MirFunction,
    index: usize,
    point: &str,
    context: &LoweringContext<'_>,
    placeholders: &HashMap<String, &Placeholder>,
    own_placeholders: &[&Placeholder],
    site: &PayloadSite,
) -> Result<LoweredPayload, LowerMirError> {
    let LoweringContext { isa, classes, target, registry, .. } = *context;
    let fail = |error: IntrinsicError| LowerMirError::Intrinsic { point: point.to_string(), error };
    let frame = Frame::new(isa.target.has_architected_flat_scratch());
    let mut intrinsic_units = UnitSet::EMPTY;
    let mut frame_reads = UnitSet::EMPTY;
    for placeholder in own_placeholders {
        for register in &placeholder.lowering.reads {
            let unit = physical::unit_of(*register).map_err(fail)?;
            // Without an SVA the builder reads the register itself: right
            // while the payload has no stack frame; payloads that get one
            // are refused after code generation.
            if frame.contains(unit) && site.sva.is_none() {
                frame_reads.insert(unit);
            }
            intrinsic_units.insert(unit);
        }
        for register in &placeholder.lowering.writes {
            let unit = physical::unit_of(*register).map_err(fail)?;
            if frame.contains(unit) {
                let frame = frame.describe();
                return Err(fail(IntrinsicError::Lowering {
                    intrinsic: placeholder.intrinsic.clone(),
                    why: format!(
                        "{register} holds the payload's stack frame ({frame}); the application's {frame} cannot be \
                         written"
                    ),
                }));
            }
            intrinsic_units.insert(unit);
        }
    }
    let mut state = FunctionState {
        isa,
        classes,
        target,
        site,
        frame,
        next_register: function.next_register(),
        registers: std::mem::take(&mut function.registers),
        kernel_arguments: BTreeSet::new(),
        intrinsic_units,
        defined_directly: UnitSet::EMPTY,
        written_in_place: UnitSet::EMPTY,
        reads_saved_frame: UnitSet::EMPTY,
        reads: Vec::new(),
        writes: Vec::new(),
        sequence: 0,
        block: 0,
    };

    // Replace the placeholders.
    for block_index in 0..function.blocks.len() {
        state.block = block_index;
        let lines = std::mem::take(&mut function.blocks[block_index].instructions);
        let mut out = Vec::with_capacity(lines.len());
        for line in lines {
            let Some(parsed) = mir::InlineAsm::parse(&line) else {
                out.push(line);
                continue;
            };
            let asm = parsed?;
            let placeholder = placeholders.get(&asm.text).filter(|p| p.payload == index).ok_or_else(|| {
                LowerMirError::UnknownPlaceholder { point: point.to_string(), text: asm.text.clone() }
            })?;
            let intrinsic = registry.get(&placeholder.intrinsic).ok_or_else(|| {
                fail(IntrinsicError::Lowering {
                    intrinsic: placeholder.intrinsic.clone(),
                    why: "not registered".into(),
                })
            })?;
            let mut operands = MirOperands::default();
            let mut uses = asm.operands.iter().filter_map(|o| match o {
                mir::AsmOperand::Use { register, .. } => Some(VirtualRegister(*register)),
                mir::AsmOperand::Def { .. } => None,
            });
            operands.result = asm.operands.iter().find_map(|o| match o {
                mir::AsmOperand::Def { register, .. } => Some(VirtualRegister(*register)),
                mir::AsmOperand::Use { .. } => None,
            });
            for how in &placeholder.lowering.arguments {
                operands.arguments.push(match how {
                    gpuinstr_intrinsics::ArgumentLowering::Register(_) => uses.next(),
                    gpuinstr_intrinsics::ArgumentLowering::Dropped => None,
                });
            }
            let mut builder = builder::PayloadBuilder::new(&mut state, &placeholder.lowering, &placeholder.intrinsic);
            intrinsic.lower_mir(&placeholder.lowering, &operands, &mut builder).map_err(fail)?;
            out.extend(builder.finish());
        }
        function.blocks[block_index].instructions = out;
    }

    let plan = plan_registers(function, &state);
    let copied = plan.copied;

    // Entry copies of copied units (64-bit pairs copied whole, then split).
    let mut unit_classes: HashMap<Unit, String> = HashMap::new();
    let mut entry_values: HashMap<Unit, VirtualRegister> = HashMap::new();
    let mut entry_lines = Vec::new();
    let mut done = UnitSet::EMPTY;
    for unit in copied.iter() {
        if done.contains(unit) {
            continue;
        }
        if let Some((pair, low, high)) =
            physical::pair_of(unit).filter(|(_, l, h)| copied.contains(*l) && copied.contains(*h))
        {
            let whole = state.new_register("sreg_64".into());
            entry_lines.push(format!("{whole} = COPY ${pair}"));
            for (piece, part) in [(low, 0), (high, 1)] {
                let value = state.new_register("sreg_32".into());
                entry_lines.push(format!("{value} = COPY {whole}.sub{part}"));
                entry_values.insert(piece, value);
                unit_classes.insert(piece, "sreg_32".into());
                done.insert(piece);
            }
            continue;
        }
        let value = state.new_register("sreg_32".into());
        entry_lines.push(format!("{value} = COPY {}", mir_name(unit)));
        entry_values.insert(unit, value);
        unit_classes.insert(unit, "sreg_32".into());
        done.insert(unit);
    }

    // Resolve reads and find what reaches each return.
    let writes = std::mem::take(&mut state.writes);
    let reads = std::mem::take(&mut state.reads);
    let mut ssa = Ssa {
        entry: entry_values,
        writes: &writes,
        predecessors: function.predecessors(),
        at_entry: HashMap::new(),
        phis: Vec::new(),
    };
    let mut replacements: HashMap<String, String> = HashMap::new();
    for read in &reads {
        let value = if copied.contains(read.unit) {
            ssa.before(read.block, read.sequence, read.unit, &mut state, &unit_classes).to_string()
        } else {
            mir_name(read.unit)
        };
        replacements.insert(read.token.clone(), value);
    }
    let mut exits: Vec<(usize, Vec<String>)> = Vec::new();
    for (block_index, block) in function.blocks.iter().enumerate() {
        if !block.instructions.iter().any(|l| l.starts_with("SI_RETURN")) {
            continue;
        }
        // Specials first (SCC, then the EXEC and VCC pairs, M0), SGPRs last:
        // each restored register is fixed until the return, so the pairs
        // need their aligned registers while the SGPRs are still free.
        // Plain moves after the compare that restores SCC leave it alone.
        let scc = Unit::special("SCC");
        let mut order: Vec<Unit> = copied.iter().filter(|u| u.file() != RegisterFile::Sgpr).collect();
        order.sort_by_key(|u| *u != scc);
        order.extend(copied.iter().filter(|u| u.file() == RegisterFile::Sgpr));
        let mut lines = Vec::new();
        let mut done = UnitSet::EMPTY;
        for unit in order {
            if done.contains(unit) {
                continue;
            }
            if let Some((pair, low, high)) =
                physical::pair_of(unit).filter(|(_, l, h)| copied.contains(*l) && copied.contains(*h))
            {
                let low_value = ssa.at_end(block_index, low, &mut state, &unit_classes);
                let high_value = ssa.at_end(block_index, high, &mut state, &unit_classes);
                let whole = state.new_register("sreg_64".into());
                lines.push(format!("{whole} = REG_SEQUENCE {low_value}, %subreg.sub0, {high_value}, %subreg.sub1"));
                lines.push(format!("${pair} = COPY {whole}"));
                done.insert(low);
                done.insert(high);
                continue;
            }
            let value = ssa.at_end(block_index, unit, &mut state, &unit_classes);
            lines.push(format!("{} = COPY {value}", mir_name(unit)));
            done.insert(unit);
        }
        exits.push((block_index, lines));
    }
    let phis = std::mem::take(&mut ssa.phis);

    // Put it all in place.
    for line in function.blocks.iter_mut().flat_map(|b| b.instructions.iter_mut()) {
        if line.contains("@@read") {
            for (token, value) in &replacements {
                if line.contains(token.as_str()) {
                    *line = line.replace(token.as_str(), value);
                }
            }
        }
    }
    let mut pinned = plan.pinned_vector;
    if plan.pinned_scc {
        pinned.insert(Unit::special("SCC"));
    }
    // Vector pins are used by the uses-instructions before the return
    // (see pin_vector_registers); the return keeps the scalar ones.
    let mut returned = copied;
    if plan.pinned_scc {
        returned.insert(Unit::special("SCC"));
    }
    let mut at_return: Vec<String> = returned.iter().map(|u| format!("implicit {}", mir_name(u))).collect();
    let through_terminators = context.pinned_until == PinnedUntil::TheLastTerminator;
    if through_terminators {
        at_return.extend(plan.pinned_vector.iter().map(|u| format!("implicit {}", mir_name(u))));
    }
    let vector_uses = vector_pin_uses(&plan.pinned_vector);
    for (block_index, lines) in exits {
        let block = &mut function.blocks[block_index];
        let mut out = Vec::new();
        for line in std::mem::take(&mut block.instructions) {
            if line.starts_with("SI_RETURN") {
                out.extend(lines.iter().cloned());
                out.extend(vector_uses.iter().cloned());
                out.push(with_operands(line, &at_return));
            } else {
                out.push(line);
            }
        }
        block.instructions = out;
    }
    pin_vector_registers(function, isa, &plan.pinned_vector, through_terminators);
    for Phi { block: block_index, result: phi, incoming } in phis {
        let operands: Vec<String> = incoming
            .iter()
            .map(|(predecessor, value)| format!("{value}, %bb.{}", function.blocks[*predecessor].number))
            .collect();
        function.blocks[block_index].instructions.insert(0, format!("{phi} = PHI {}", operands.join(", ")));
    }
    // Live-ins: everything at the entry; SCC (not allocatable) in every
    // block when pinned. Allocatable registers may not be live into other
    // blocks before register allocation: vector pins are per-block clobbers.
    for (index, block) in function.blocks.iter_mut().enumerate() {
        let mut liveins: BTreeSet<String> = block.liveins.iter().cloned().collect();
        if index == 0 {
            for unit in copied.union(&pinned).iter() {
                liveins.insert(mir_name(unit));
            }
        } else if plan.pinned_scc {
            liveins.insert("$scc".into());
        }
        for unit in plan.reserved_live.iter() {
            liveins.insert(mir_name(unit));
        }
        block.liveins = liveins.into_iter().collect();
    }
    let entry = &mut function.blocks[0];
    entry_lines.append(&mut entry.instructions);
    entry.instructions = entry_lines;
    function.registers = std::mem::take(&mut state.registers);
    annotate_classes(function);

    let mut written: UnitSet = writes.iter().map(|w| w.unit).collect();
    written.union_with(&state.written_in_place);
    Ok(LoweredPayload {
        kernel_arguments: std::mem::take(&mut state.kernel_arguments),
        copied,
        pinned,
        written,
        frame_reads,
        saves_frame: state.reads_saved_frame,
    })
}

/// Writes the class at the definition of every virtual register stage 8
/// created (`%33:sreg_32 = COPY $sgpr4`), as llc prints its own.
fn annotate_classes(function: &mut MirFunction) {
    let registers = function.registers.clone();
    for line in function.blocks.iter_mut().flat_map(|b| b.instructions.iter_mut()) {
        let Some((defs, rest)) = line.split_once(" = ") else { continue };
        let annotated: Vec<String> = defs
            .split(", ")
            .map(|def| match def.strip_prefix('%').and_then(|n| n.parse::<u32>().ok()) {
                Some(id) => registers.get(&id).map_or(def.to_string(), |class| format!("{def}:{class}")),
                None => def.to_string(),
            })
            .collect();
        *line = format!("{} = {rest}", annotated.join(", "));
    }
}

fn with_operands(mut line: String, operands: &[String]) -> String {
    for operand in operands {
        line.push_str(if line.contains(' ') { ", " } else { " " });
        line.push_str(operand);
    }
    line
}

/// The opcode of an instruction line (`%3:sreg_32 = S_MOV_B32 0` -> S_MOV_B32).
fn opcode(line: &str) -> &str {
    let rest = line.split_once(" = ").map_or(line, |(_, rest)| rest);
    rest.split_whitespace().next().unwrap_or("")
}

/// Keeps vector registers untouched through the payload whatever EXEC is:
/// each block (after the entry, where they are live-ins) starts with an
/// empty inline assembly that "defines" them, followed by a scheduling
/// barrier, and ends with a scheduling barrier and empty inline assemblies
/// that use them, right before its terminators, so the allocator sees them
/// occupied everywhere and no code writes them. (A copy into a virtual
/// register would move only the active lanes, and a lane inactive here may
/// hold a live value.) The uses come [`PINNED_USES_PER_INSTRUCTION`] to an
/// instruction: LLVM's Live Variable Analysis marks each kill by scanning
/// the killing instruction's operands, which costs the square of their
/// number, and one instruction using ~100 pinned VGPRs took half of llc's
/// time. Codegen runs without machine sinking and early tail duplication,
/// which could move code above the clobber or across the uses; the
/// machine-code check is the proof. `through_terminators`
/// ([`PinnedUntil::TheLastTerminator`]): the block's last terminator uses
/// them too.
fn pin_vector_registers(function: &mut MirFunction, isa: &Isa, pinned: &UnitSet, through_terminators: bool) {
    if pinned.is_empty() {
        return;
    }
    let last_uses: Vec<String> = match through_terminators {
        true => pinned.iter().map(|u| format!("implicit {}", mir_name(u))).collect(),
        false => Vec::new(),
    };
    let clobbers: Vec<String> =
        pinned.iter().map(|u| format!("12 /* clobber */, implicit-def early-clobber {}", mir_name(u))).collect();
    let clobber = format!("INLINEASM &\"\", 1 /* sideeffect attdialect */, {}", clobbers.join(", "));
    let uses = vector_pin_uses(pinned);
    let is_terminator = |line: &str| {
        isa.opcode_by_name(opcode(line))
            .and_then(|op| isa.info(op))
            .is_some_and(|info| info.flags.has(crate::native::OpcodeFlags::TERMINATOR))
    };
    let numbers: Vec<u32> = function.blocks.iter().map(|b| b.number).collect();
    for (index, block) in function.blocks.iter_mut().enumerate() {
        if index > 0 {
            // Nothing may be scheduled above the clobber: a value living
            // only before it could take a pinned register.
            let first = block.instructions.iter().position(|l| opcode(l) != "PHI").unwrap_or(block.instructions.len());
            block.instructions.insert(first, "SCHED_BARRIER 0".to_string());
            block.instructions.insert(first, clobber.clone());
        }
        match block.instructions.last() {
            // The return's block got its uses before the copies back.
            Some(last) if last.starts_with("SI_RETURN") => {}
            Some(last) if is_terminator(last) => {
                let mut first_terminator = block.instructions.len();
                while first_terminator > 0 && is_terminator(&block.instructions[first_terminator - 1]) {
                    first_terminator -= 1;
                }
                block.instructions.splice(first_terminator..first_terminator, uses.iter().cloned());
                if through_terminators {
                    // SI_IF, SI_ELSE and SI_LOOP are replaced before
                    // allocation, and a conditional branch may fall through:
                    // an S_BRANCH carries the uses.
                    let falls_through =
                        !opcode(block.instructions.last().expect("a terminator")).starts_with("S_BRANCH");
                    let next = numbers.get(index + 1).copied().filter(|n| block.successors.contains(n));
                    match (falls_through, next) {
                        (false, _) => {
                            let last = block.instructions.pop().expect("a terminator");
                            block.instructions.push(with_operands(last, &last_uses));
                        }
                        (true, Some(next)) => {
                            block.instructions.push(with_operands(format!("S_BRANCH %bb.{next}"), &last_uses))
                        }
                        // Ends the function otherwise (no fall-through).
                        (true, None) => {}
                    }
                }
            }
            _ => {
                // Falls through: an explicit branch, so that copies LLVM
                // puts at the block's end go before it.
                let next = numbers.get(index + 1).copied();
                if let Some(next) = next.filter(|n| block.successors.contains(n)) {
                    block.instructions.extend(uses.iter().cloned());
                    block.instructions.push(with_operands(format!("S_BRANCH %bb.{next}"), &last_uses));
                }
            }
        }
    }
}

/// How many pinned registers one uses-instruction names.
const PINNED_USES_PER_INSTRUCTION: usize = 8;

/// The instructions that end the pinned registers' live ranges at a block's
/// end: a scheduling barrier (nothing may move below the uses) and empty
/// inline assemblies using [`PINNED_USES_PER_INSTRUCTION`] registers each.
fn vector_pin_uses(pinned: &UnitSet) -> Vec<String> {
    let names: Vec<String> = pinned.iter().map(|u| format!("implicit {}", mir_name(u))).collect();
    if names.is_empty() {
        return Vec::new();
    }
    std::iter::once("SCHED_BARRIER 0".to_string())
        .chain(
            names
                .chunks(PINNED_USES_PER_INSTRUCTION)
                .map(|chunk| format!("INLINEASM &\"\", 1 /* sideeffect attdialect */, {}", chunk.join(", "))),
        )
        .collect()
}
