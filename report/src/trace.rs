//! The run's dispatches as a trace viewer's file: Chrome's trace-event
//! JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open. Each
//! dispatch is a complete event on its queue's track, from when the
//! runtime saw its packet to when it read its values (the host's clock),
//! with its shape and the tool's numbers as arguments.

use serde_json::{json, Value};

use crate::run::Run;

/// Seconds to the format's microseconds.
fn micros(seconds: f64) -> f64 {
    (seconds * 1e6).round()
}

pub fn trace_events(run: &Run) -> Value {
    let mut events = vec![json!({
        "name": "process_name", "ph": "M", "pid": 1, "args": { "name": run.program }
    })];
    let mut queues: Vec<u32> = run.dispatches.iter().map(|d| d.queue).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        events.push(json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": queue, "args": { "name": format!("queue {queue}") }
        }));
    }
    for dispatch in &run.dispatches {
        let mut args = json!({
            "dispatch": dispatch.id,
            "grid": dispatch.grid,
            "workgroup": dispatch.workgroup,
        });
        for (name, value) in &dispatch.numbers {
            args[name] = json!(value);
        }
        events.push(json!({
            "name": dispatch.kernel,
            "cat": "dispatch",
            "ph": "X",
            "pid": 1,
            "tid": dispatch.queue,
            "ts": micros(dispatch.submitted),
            "dur": micros((dispatch.completed - dispatch.submitted).max(0.0)),
            "args": args,
        }));
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::DispatchSpan;

    #[test]
    fn each_dispatch_is_a_complete_event_on_its_queue() {
        let run = Run {
            program: "./app".into(),
            dispatches: vec![DispatchSpan {
                id: 1,
                kernel: "_Z5scalePffi".into(),
                queue: 2,
                submitted: 0.25,
                completed: 0.5,
                grid: [1024, 1, 1],
                workgroup: [256, 1, 1],
                numbers: [("instructions".to_string(), 7)].into(),
            }],
            ..Run::default()
        };
        let trace = trace_events(&run);
        let events = trace["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 3, "the process's name, the queue's, the dispatch");
        assert_eq!(events[1]["args"]["name"], "queue 2");
        let dispatch = &events[2];
        assert_eq!((dispatch["ph"].as_str(), dispatch["tid"].as_u64()), (Some("X"), Some(2)));
        assert_eq!((dispatch["ts"].as_f64(), dispatch["dur"].as_f64()), (Some(250_000.0), Some(250_000.0)));
        assert_eq!(dispatch["args"]["instructions"], 7);
    }
}
