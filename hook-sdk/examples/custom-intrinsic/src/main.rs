//! Runs gpuinstr's payload compiler with this example's intrinsics
//! registered (src/lib.rs): the tool's hook at the entry of every kernel of
//! the application, printing the machine code of each payload.
//!
//! gpuinstr-custom-intrinsic TOOL APP [--target gfx90a] [--hook recordPlacement]

use std::path::Path;

use anyhow::{anyhow, bail, Result};

fn main() -> Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let mut files = Vec::new();
    let mut target = None;
    let mut hook = "recordPlacement".to_string();
    let mut iter = arguments.iter();
    while let Some(argument) = iter.next() {
        match argument.as_str() {
            "--target" => target = iter.next().cloned(),
            "--hook" => hook = iter.next().cloned().unwrap_or(hook),
            _ => files.push(argument),
        }
    }
    let [tool, app] = files.as_slice() else {
        bail!("usage: gpuinstr-custom-intrinsic TOOL APP [--target gfx90a] [--hook recordPlacement]");
    };
    let listing = custom_intrinsic::kernel_entry_payloads(Path::new(tool), Path::new(app), target.as_deref(), &hook)
        .map_err(|e| anyhow!("{e}"))?;
    print!("{listing}");
    Ok(())
}
