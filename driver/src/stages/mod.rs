//! The pipeline stages, one module each, in pipeline order (see
//! crate::pipeline for the table).

pub mod emit;
pub mod lift;
pub mod liveness;
pub mod load;
