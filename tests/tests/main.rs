//! One test binary for the whole repository: the plugin under the real
//! toolchain, and the driver on the code objects it produces.

mod cmake;
mod compressed_bundles;
mod corpus;
mod custom_intrinsic;
mod differential;
mod emulator;
mod emulator_rocrand;
mod emulator_widths;
mod inspect;
mod instrument;
mod lift_emit;
mod liveness;
mod payloads;
mod plan;
mod plugin_errors;
mod plugin_examples;
mod plugin_rdc;
mod plugin_steps;
mod register_report;
mod regressions;
mod runtime;
mod stages;
mod sva;
mod verify;
