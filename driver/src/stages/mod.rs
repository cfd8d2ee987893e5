//! The pipeline stages, one module each, in pipeline order (see
//! crate::pipeline for the table).

pub mod load;
