//! Payloads one group of kernels compiled, taken by the other groups of
//! the same code object. A code object instrumented a group of kernels at
//! a time (`pipeline/pieces.rs`) compiles each group's payloads with llc
//! on its own, and the groups of Tensile's code objects ask for the same
//! templates: 277 payloads compiled in the 14 groups of rocBLAS's 553-kernel
//! `DD` object, 30 of them distinct.
//!
//! `compile_each` reads nothing of a point but its hook calls (and its
//! label, for messages): a payload is made from the calls, the site and
//! the point constants, so those, written out with the pass, are its key.
//! A taken payload is the compiled one with the point's label and place,
//! and its labels renumbered for its position; only payloads that compiled
//! and passed the machine-code check are shared (a refusal's message may
//! name the point it was compiled for).

use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxHashMap;

use super::{
    compile_each, point_labels, sharing, Compilation, CompileError, CompilePass, CompiledPayload, CompiledPayloads,
    Compiler, PayloadOptions, PayloadSource, ToolGlobal,
};
use crate::stages::lower_mir::PayloadSite;
use crate::stages::payload::{PayloadPoint, PointConstantArgument};

/// The payloads a code object's groups of kernels compiled, by key: each
/// compiled by the first group to ask for it, the others waiting for it
/// (so the same payloads are compiled however the groups interleave).
#[derive(Default)]
pub struct SharedPayloads {
    compiled: Mutex<FxHashMap<String, Arc<Slot>>>,
}

/// A key's payload once its group compiled it; None: it did not compile
/// (refused, or the compilation failed), and each group compiles its own.
type Slot = OnceLock<Option<SharedPayload>>;

impl std::fmt::Debug for SharedPayloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedPayloads({} keys)", self.compiled.lock().expect("shared payloads").len())
    }
}

struct SharedPayload {
    /// As compiled, for the point of the group that compiled it.
    payload: CompiledPayload,
    /// Its function's number in that compilation (the number its labels
    /// carry).
    position: usize,
    /// The tool's globals its code refers to.
    globals: Vec<ToolGlobal>,
}

impl SharedPayloads {
    /// Each key's slot, and whether this caller claimed it (and must fill
    /// it).
    fn claim(&self, keys: &[String]) -> Vec<(Arc<Slot>, bool)> {
        let mut compiled = self.compiled.lock().expect("shared payloads");
        keys.iter()
            .map(|key| match compiled.get(key) {
                Some(slot) => (slot.clone(), false),
                None => {
                    let slot = Arc::new(Slot::new());
                    compiled.insert(key.clone(), slot.clone());
                    (slot, true)
                }
            })
            .collect()
    }
}

/// Fills the claimed slots a compilation left empty (it failed) with None
/// on the way out, so no group waits for them forever.
struct Claimed<'c>(&'c [(Arc<Slot>, bool)]);

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        for (slot, _) in self.0.iter().filter(|(_, mine)| *mine) {
            let _ = slot.set(None);
        }
    }
}

/// Everything `compile_each` reads of a point, its site and constants.
fn key(
    point: &PayloadPoint,
    site: &PayloadSite,
    constants: Option<&Vec<PointConstantArgument>>,
    pass: CompilePass,
) -> String {
    format!("{pass:?}\n{:?}\n{site:?}\n{constants:?}", point.calls)
}

/// Whether `code` refers to `global` (as `compile_each` finds the globals
/// a compilation uses in llc's assembly).
fn refers_to(code: &[super::CodeLine], global: &str) -> bool {
    let (relocated, offset) = (format!("{global}@"), format!("{global}+"));
    code.iter().any(|line| line.contains(&relocated) || line.contains(&offset))
}

/// [`compile_each`] with the payloads another group compiled taken from
/// `shared`, and those this group compiles first shared: the same
/// payloads, labels and points in the same order. The taken ones make a
/// compilation of their own, marked [`Compilation::shared`] (not counted
/// as compiled here).
pub(super) fn compile_each_shared(
    shared: &SharedPayloads,
    compiler: Compiler<'_, '_>,
    points: &[PayloadPoint],
    sites: &[PayloadSite],
    point_constants: &[Vec<PointConstantArgument>],
    options: &PayloadOptions,
    pass: CompilePass,
) -> Result<CompiledPayloads, CompileError> {
    let keys: Vec<String> =
        points.iter().zip(sites).enumerate().map(|(i, (p, s))| key(p, s, point_constants.get(i), pass)).collect();
    let claims = shared.claim(&keys);
    let claimed = Claimed(&claims);
    let own_options = PayloadOptions { shared: None, ..options.clone() };
    let compile = |indices: &[usize]| -> Result<Option<CompiledPayloads>, CompileError> {
        if indices.is_empty() {
            return Ok(None);
        }
        let points: Vec<PayloadPoint> = indices.iter().map(|i| points[*i].clone()).collect();
        let sites: Vec<PayloadSite> = indices.iter().map(|i| sites[*i].clone()).collect();
        let constants: Vec<Vec<PointConstantArgument>> =
            indices.iter().map(|i| point_constants.get(*i).cloned().unwrap_or_default()).collect();
        let compiled = compile_each(compiler, &points, &sites, &constants, &own_options, pass)
            .map_err(|e| e.at_points(indices))?;
        Ok(Some(compiled))
    };
    let mine: Vec<usize> = (0..points.len()).filter(|i| claims[*i].1).collect();
    let own = compile(&mine)?;
    for (position, index) in mine.iter().enumerate() {
        let payload = &own.as_ref().expect("compiled").payloads[position];
        let entry = payload.rejected.is_none().then(|| {
            let globals = own.as_ref().expect("compiled").globals.iter();
            let globals = globals.filter(|g| refers_to(&payload.code, &g.name)).cloned().collect();
            SharedPayload { payload: payload.clone(), position, globals }
        });
        let _ = claims[*index].0.set(entry);
    }
    drop(claimed);
    // The others' payloads, once compiled; those that did not compile
    // there are compiled here.
    let taken: Vec<Option<&SharedPayload>> =
        claims.iter().map(|(slot, mine)| if *mine { None } else { slot.wait().as_ref() }).collect();
    let again: Vec<usize> = (0..points.len()).filter(|i| !claims[*i].1 && taken[*i].is_none()).collect();
    let again_compiled = compile(&again)?;

    let labels = point_labels(compiler.lifted, points)?;
    let mut payloads: Vec<Option<CompiledPayload>> = vec![None; points.len()];
    let mut out = CompiledPayloads {
        payloads: Vec::new(),
        globals: Vec::new(),
        compilations: Vec::new(),
        compiled_as: vec![PayloadSource::default(); points.len()],
        timings: Vec::new(),
        counted: Default::default(),
        counts_set_at_entry: Default::default(),
    };
    for (indices, compiled) in [(&mine, own), (&again, again_compiled)] {
        let Some(compiled) = compiled else { continue };
        let offset = out.compilations.len();
        out.compilations.extend(compiled.compilations);
        super::add_globals(&mut out.globals, compiled.globals);
        out.timings.extend(compiled.timings);
        for (position, ((payload, source), index)) in
            compiled.payloads.into_iter().zip(compiled.compiled_as).zip(indices.iter()).enumerate()
        {
            let code = sharing::relabel(&payload.code, position, *index);
            payloads[*index] = Some(CompiledPayload { code: code.into(), ..payload });
            out.compiled_as[*index] =
                PayloadSource { compilation: offset + source.compilation, position: source.position };
        }
    }
    let taken_count = taken.iter().filter(|t| t.is_some()).count();
    let taken_compilation = out.compilations.len();
    if taken_count > 0 {
        out.compilations.push(Compilation {
            pass,
            sharing: super::Sharing::OneByOne,
            payloads: taken_count,
            refused: 0,
            seconds: 0.0,
            texts: Default::default(),
            shared: true,
        });
    }
    for (index, entry) in taken.iter().enumerate() {
        let Some(entry) = entry else { continue };
        super::add_globals(&mut out.globals, entry.globals.clone());
        out.compiled_as[index] = PayloadSource { compilation: taken_compilation, position: index };
        payloads[index] = Some(CompiledPayload {
            label: labels[index].clone(),
            function: points[index].function,
            instruction: points[index].instruction,
            code: sharing::relabel(&entry.payload.code, entry.position, index).into(),
            ..entry.payload.clone()
        });
    }
    out.payloads = payloads.into_iter().map(|p| p.expect("a payload for every point")).collect();
    Ok(out)
}
