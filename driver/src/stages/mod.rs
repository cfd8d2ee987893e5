//! The pipeline stages, one module each, in pipeline order (see
//! crate::pipeline for the table).

pub mod codegen;
pub mod emit;
pub mod lift;
pub mod liveness;
pub mod load;
pub mod lower_ir;
pub mod lower_mir;
pub mod patch;
pub mod payload;
pub mod payloads;
pub mod sva;
