//! Running LLVM's tools (llvm-mc, llc, ld.lld, opt) as child processes with
//! a deadline: LLVM can hang on input it should refuse (llvm-mc 15 went on
//! forever after reporting a symbol defined twice), and a hang must end as
//! an error, not take gpuinstr with it.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a tool may take on `input_bytes` of input: a minute, and a
/// second more per 100 kB (the largest rocSPARSE code object's assembly,
/// about 20 MB, assembles in seconds).
pub fn deadline_for(input_bytes: usize) -> Duration {
    Duration::from_secs(60 + (input_bytes / 100_000) as u64)
}

/// Runs `command` to completion, or kills it at `deadline`: `Ok(None)` then.
pub fn output_within(command: &mut Command, deadline: Duration) -> std::io::Result<Option<Output>> {
    output_within_given(command, None, deadline)
}

/// [`output_within`], with `input` on the command's standard input (no
/// temporary file to leave behind if this process is killed).
pub fn output_within_given(
    command: &mut Command,
    input: Option<Vec<u8>>,
    deadline: Duration,
) -> std::io::Result<Option<Output>> {
    let stdin = if input.is_some() { Stdio::piped() } else { Stdio::null() };
    let mut child = command.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
        // Written beside the wait: a reader that stops early closes the pipe.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut pipe, &input);
        });
    }
    // The pipes are drained while waiting, or a chatty tool would block.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Some(Output { status, stdout, stderr }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_deadline_is_killed() {
        let started = Instant::now();
        let outcome = output_within(Command::new("sleep").arg("30"), Duration::from_millis(200)).unwrap();
        assert!(outcome.is_none());
        assert!(started.elapsed() < Duration::from_secs(10));
        let done = output_within(Command::new("echo").arg("hi"), Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(done.stdout, b"hi\n");
    }
}
