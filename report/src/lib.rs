//! gpuinstr-report: a run's page from the database the runtime writes
//! (docs/runtime.md, "The page"). Reading and writing are separate steps:
//! [`run::read`] turns the database into typed data, [`page::page`] that
//! into HTML.

pub mod page;
pub mod run;

pub use page::{page, FromDisk, Sources};
pub use run::{read, ReadError, Run};
