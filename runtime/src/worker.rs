//! Dynamic mode instruments each code object in a process of its own
//! (`gpuinstr-dynamic-worker`), never in the program's: whatever happens
//! there (LLVM's fatal errors, which abort the process, on a full disk say;
//! a crash; a bug of ours) costs the program nothing but that code
//! object's instrumentation, which then runs as it is, said loudly. This is
//! the request the runtime writes, the outcome the worker answers, and the
//! worker's job.

use std::path::{Path, PathBuf};

use gpuinstr::instrument::{instrument_code_object, InstrumentError, InstrumentOptions};
use gpuinstr::plan::Plan;
use gpuinstr::stages::load::code_object::CodeObject;
use gpuinstr::stages::sva::RegisterGrowth;
use gpuinstr::tool::Tool;
use gpuinstr_intrinsics::Registry;
use serde::{Deserialize, Serialize};

/// What the runtime asks: instrument the code object in `input` with the
/// tool and plan, with the options, into `output`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub tool: PathBuf,
    pub plan: PathBuf,
    pub input: PathBuf,
    pub output: PathBuf,
    pub allow_partial: bool,
    /// `free`, `never` or `always` (`RegisterGrowth`).
    pub grow_registers: String,
    pub keep_originals: bool,
}

/// What the worker answers, on its standard output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// `output` holds the instrumented code object; `left_out` of the
    /// `selected` points were left out; how long each step took.
    Instrumented { selected: usize, left_out: usize, steps: Vec<(String, f64)> },
    /// The plan selects nothing in it.
    NothingSelected,
    /// It cannot be instrumented, and why.
    Failed(String),
}

/// The register growth option as the request spells it.
pub fn growth_name(growth: RegisterGrowth) -> &'static str {
    match growth {
        RegisterGrowth::FreeOfOccupancy => "free",
        RegisterGrowth::Never => "never",
        RegisterGrowth::Always => "always",
    }
}

fn growth(name: &str) -> Result<RegisterGrowth, String> {
    match name {
        "free" => Ok(RegisterGrowth::FreeOfOccupancy),
        "never" => Ok(RegisterGrowth::Never),
        "always" => Ok(RegisterGrowth::Always),
        other => Err(format!("register growth `{other}`")),
    }
}

/// The worker's job: the request's code object instrumented (written to
/// its output) or why not.
pub fn serve(request: &Request) -> Outcome {
    match instrument(request) {
        Ok(outcome) => outcome,
        Err(why) => Outcome::Failed(why),
    }
}

fn instrument(request: &Request) -> Result<Outcome, String> {
    let tool = Tool::load(&request.tool).map_err(|e| e.to_string())?;
    let plan = Plan::load(&request.plan).map_err(|e| e.to_string())?;
    let bytes = read(&request.input)?;
    let app = CodeObject::parse(bytes, vec![]).map_err(|e| format!("it cannot be read: {e}"))?;
    let tool = tool.for_target(&app.target).map_err(|e| e.to_string())?;
    let options = InstrumentOptions {
        allow_partial: request.allow_partial,
        grow_registers: growth(&request.grow_registers)?,
        keep_originals: request.keep_originals,
        ..InstrumentOptions::default()
    };
    let (out, report) = match instrument_code_object(tool, &app, &plan, &Registry::with_builtins(), &options) {
        Ok(made) => made,
        Err(InstrumentError::NothingSelected(_)) => return Ok(Outcome::NothingSelected),
        Err(error) => return Err(error.to_string()),
    };
    std::fs::write(&request.output, out).map_err(|e| format!("cannot write {}: {e}", request.output.display()))?;
    let steps = report.steps.iter().map(|(name, seconds)| (name.to_string(), *seconds)).collect();
    Ok(Outcome::Instrumented { selected: report.selected, left_out: report.left_out.len(), steps })
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_outcomes_cross_the_process_boundary_unchanged() {
        let request = Request {
            tool: "/t/tool.o".into(),
            plan: "/t/plan.toml".into(),
            input: "/t/in".into(),
            output: "/t/out".into(),
            allow_partial: true,
            grow_registers: growth_name(RegisterGrowth::Never).into(),
            keep_originals: false,
        };
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        for outcome in [
            Outcome::Instrumented { selected: 3, left_out: 1, steps: vec![("lift".into(), 0.5)] },
            Outcome::NothingSelected,
            Outcome::Failed("why".into()),
        ] {
            let text = serde_json::to_string(&outcome).unwrap();
            assert_eq!(serde_json::from_str::<Outcome>(&text).unwrap(), outcome);
        }
        assert_eq!(growth("sometimes").unwrap_err(), "register growth `sometimes`");
        assert_eq!(growth(growth_name(RegisterGrowth::Always)), Ok(RegisterGrowth::Always));
    }

    #[test]
    fn a_request_that_cannot_be_served_says_why() {
        let request = Request {
            tool: "/nonexistent/tool.o".into(),
            plan: "/nonexistent/plan.toml".into(),
            input: "/nonexistent/in".into(),
            output: "/nonexistent/out".into(),
            allow_partial: false,
            grow_registers: "free".into(),
            keep_originals: false,
        };
        assert!(matches!(serve(&request), Outcome::Failed(why) if why.contains("/nonexistent/tool.o")));
    }
}
