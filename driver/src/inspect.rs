//! `gpuinstr-link inspect`: what a file holds. Code objects (target, code
//! object version), their kernels, and for a tool the embedded hooks (with
//! signatures) and the intrinsics they use.

use std::fmt::Write;
use std::path::Path;

use gpuinstr_intrinsics::naming::HOOK_HANDLE_PREFIX;
use inkwell::context::Context;
use serde::Serialize;

use crate::error::LoadProblem;
use crate::error::{Error, Location};
use crate::stages::load::instrumented::{self, PartialKernel, ToolGlobalEntry, SITE_TABLE};
use crate::stages::load::{self, InputKind, LoadedInput};
use crate::tool::{self, ToolSummary};

#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    pub name: String,
    /// A GPUINSTR_EXPORT_HOOK_HANDLE stub rather than a real kernel.
    pub hook_handle: bool,
    pub arguments: usize,
    pub hidden_arguments: usize,
    pub kernarg_segment_size: u64,
    pub group_segment_fixed_size: u64,
    pub private_segment_fixed_size: u64,
    pub sgpr_count: u64,
    pub vgpr_count: u64,
    pub agpr_count: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CodeObjectReport {
    /// Where in the file ("" for a plain code object).
    pub origin: String,
    pub target: String,
    pub code_object_version: u32,
    pub kernels: Vec<KernelReport>,
    /// Present when the code object is a gpuinstr tool.
    pub tool: Option<ToolSummary>,
    /// Present when gpuinstr-link instrumented the code object.
    pub instrumented: Option<InstrumentedSummary>,
}

/// What an instrumented code object says about itself.
#[derive(Clone, Debug, Serialize)]
pub struct InstrumentedSummary {
    /// Original instructions that got inserted code before them.
    pub sites: usize,
    /// Instrumentation points in the point table (what hooks' `site` numbers index).
    pub points: usize,
    /// Points the table names `file:line` (the application was built with `-g`).
    pub located: usize,
    /// The tool's data: the globals its payloads write.
    pub tool_globals: Vec<ToolGlobalEntry>,
    /// The kernels whose numbers miss points left out (`--allow-partial`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial_kernels: Vec<PartialKernel>,
}

#[derive(Clone, Debug, Serialize)]
pub struct InspectReport {
    pub file: String,
    pub kind: String,
    pub code_objects: Vec<CodeObjectReport>,
}

/// Inspects a file, optionally only the code objects of one target.
pub fn inspect(path: &Path, target: Option<&str>) -> Result<InspectReport, Error> {
    let mut input = load::load(path)?;
    if let Some(target) = target {
        input = input.select_target(target)?;
    }
    report(&input)
}

pub fn report(input: &LoadedInput) -> Result<InspectReport, Error> {
    let kind = match input.kind {
        InputKind::CodeObject => "code object".to_string(),
        InputKind::OffloadBundle => "offload bundle".to_string(),
        InputKind::HostWithFatbin { bundles } => {
            format!("host ELF with .hip_fatbin ({bundles} bundle{})", if bundles == 1 { "" } else { "s" })
        }
    };
    let mut code_objects = Vec::new();
    for code_object in &input.code_objects {
        let kernels = code_object
            .kernels
            .iter()
            .map(|k| {
                let m = &k.metadata;
                KernelReport {
                    name: m.name.clone(),
                    hook_handle: m.name.starts_with(HOOK_HANDLE_PREFIX),
                    arguments: m.arguments.iter().filter(|a| !a.is_hidden()).count(),
                    hidden_arguments: m.arguments.iter().filter(|a| a.is_hidden()).count(),
                    kernarg_segment_size: m.kernarg_segment_size,
                    group_segment_fixed_size: m.group_segment_fixed_size,
                    private_segment_fixed_size: m.private_segment_fixed_size,
                    sgpr_count: m.sgpr_count,
                    vgpr_count: m.vgpr_count,
                    agpr_count: m.agpr_count,
                }
            })
            .collect();
        let tool = if code_object.has_section(gpuinstr_intrinsics::naming::EMBEDDED_SECTION) {
            let location = Location { file: input.path.clone(), inside: code_object.origin.clone() };
            let fail = |problem| Error::Tool { location: location.clone(), problem };
            let files = tool::embedded_bitcode(code_object).map_err(fail)?.len();
            let context = Context::create();
            let module = tool::read_tool_module(&context, code_object).map_err(fail)?;
            Some(tool::summarize(&module, files))
        } else {
            None
        };
        let instrumented = if code_object.has_section(SITE_TABLE) {
            let location = Location { file: input.path.clone(), inside: code_object.origin.clone() };
            let fail =
                |problem| Error::Load { location: location.clone(), problem: LoadProblem::InstrumentedTable(problem) };
            let points = instrumented::point_table(code_object).map_err(fail)?;
            Some(InstrumentedSummary {
                sites: instrumented::site_table(code_object).map_err(fail)?.len(),
                points: points.len(),
                located: points.iter().filter(|p| !p.location.is_empty()).count(),
                tool_globals: instrumented::tool_globals(code_object).map_err(fail)?,
                partial_kernels: instrumented::partial_kernels(code_object).map_err(fail)?,
            })
        } else {
            None
        };
        code_objects.push(CodeObjectReport {
            origin: code_object.origin.join(": "),
            target: code_object.target.to_string(),
            code_object_version: code_object.code_object_version,
            kernels,
            tool,
            instrumented,
        });
    }
    Ok(InspectReport { file: input.path.display().to_string(), kind, code_objects })
}

/// The human-readable form.
pub fn render_text(report: &InspectReport) -> String {
    let mut out = String::new();
    let count = report.code_objects.len();
    writeln!(out, "{}: {}, {count} code object{}", report.file, report.kind, if count == 1 { "" } else { "s" })
        .unwrap();
    for (index, code_object) in report.code_objects.iter().enumerate() {
        let origin = if code_object.origin.is_empty() { String::new() } else { format!(" ({})", code_object.origin) };
        writeln!(
            out,
            "\ncode object {}{origin}: target {}, code object v{}, {} kernel{}",
            index,
            code_object.target,
            code_object.code_object_version,
            code_object.kernels.len(),
            if code_object.kernels.len() == 1 { "" } else { "s" }
        )
        .unwrap();
        for kernel in &code_object.kernels {
            let role = if kernel.hook_handle { "  [hook handle]" } else { "" };
            let agprs = kernel.agpr_count.map(|a| format!(" agpr {a}")).unwrap_or_default();
            writeln!(
                out,
                "  kernel {}{role}\n    args {} (+{} hidden), kernarg {} B, lds {} B, scratch {} B, sgpr {} vgpr {}{agprs}",
                kernel.name,
                kernel.arguments,
                kernel.hidden_arguments,
                kernel.kernarg_segment_size,
                kernel.group_segment_fixed_size,
                kernel.private_segment_fixed_size,
                kernel.sgpr_count,
                kernel.vgpr_count,
            )
            .unwrap();
        }
        if let Some(instrumented) = &code_object.instrumented {
            let (sites, points) = (instrumented.sites, instrumented.points);
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            writeln!(
                out,
                "  instrumented by gpuinstr-link: {sites} site{}, {points} point{}",
                plural(sites),
                plural(points)
            )
            .unwrap();
            if instrumented.located > 0 {
                writeln!(out, "    {} of the points named file:line", instrumented.located).unwrap();
            }
            if !instrumented.partial_kernels.is_empty() {
                let kernels: Vec<String> =
                    instrumented.partial_kernels.iter().map(|k| format!("{} ({})", k.kernel, k.left_out)).collect();
                writeln!(
                    out,
                    "    PARTIAL (--allow-partial): kernels whose numbers miss points left out: {}",
                    kernels.join(", ")
                )
                .unwrap();
            }
            for global in &instrumented.tool_globals {
                let managed = if global.managed { ", managed" } else { "" };
                let records = global
                    .records
                    .as_ref()
                    .map_or(String::new(), |r| format!(", records of {} B counted by {}", r.record_bytes, r.count));
                let ring =
                    global.ring.map_or(String::new(), |bytes| format!(", points at a ring of {bytes} B records"));
                writeln!(
                    out,
                    "    tool global {}  {} B at {}{managed}{records}{ring}",
                    global.tool_name, global.size, global.symbol
                )
                .unwrap();
            }
        }
        let Some(tool) = &code_object.tool else {
            writeln!(out, "  not a gpuinstr tool (no .llvmbc section)").unwrap();
            continue;
        };
        writeln!(
            out,
            "  gpuinstr tool: {} hook{}, {} intrinsic{}, {} embedded module{}",
            tool.hooks.len(),
            if tool.hooks.len() == 1 { "" } else { "s" },
            tool.intrinsics.len(),
            if tool.intrinsics.len() == 1 { "" } else { "s" },
            tool.bitcode_files,
            if tool.bitcode_files == 1 { "" } else { "s" },
        )
        .unwrap();
        for hook in &tool.hooks {
            let uses =
                if hook.intrinsics.is_empty() { "no intrinsics".to_string() } else { hook.intrinsics.join(", ") };
            writeln!(out, "    hook {}({})  uses {uses}", hook.name, hook.parameters.join(", ")).unwrap();
        }
        for intrinsic in &tool.intrinsics {
            let origin = if intrinsic.builtin { "built-in" } else { "user" };
            writeln!(out, "    intrinsic {}  {}  [{origin}]", intrinsic.function, intrinsic.signature).unwrap();
        }
        for global in &tool.globals {
            let state = if global.defined { "defined" } else { "external" };
            writeln!(out, "    global {}  addrspace({}), {state}", global.name, global.address_space).unwrap();
        }
    }
    out
}
