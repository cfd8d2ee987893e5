//! gpuinstr-report: a run's page from the database the runtime writes
//! (docs/runtime.md, "The page"). Reading and writing are separate steps:
//! [`run::read`] turns the database into typed data, [`page::page`] that
//! into HTML and [`trace::trace_events`] into a trace viewer's file.

pub mod page;
pub mod run;
pub mod trace;

pub use page::{page, FromDisk, Sources};
pub use run::{read, ReadError, Run};
pub use trace::trace_events;
