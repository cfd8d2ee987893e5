//! Hidden kernel arguments a code object v5+ kernel does not declare.
//!
//! From code object v5 a kernel's metadata lists only the hidden arguments
//! its own code reads, and the runtime fills only those: a kernel that never
//! reads its launch shape gets none, and a hook reading `blockDim` or
//! `gridDim` through `implicitArgPtr` (as HIP does from v5) would read past
//! the kernel's arguments. For such a kernel, gpuinstr declares the hidden
//! arguments that describe the launch, where clang would have put them, so
//! the runtime (CLR fills every hidden argument the metadata lists) passes
//! them.

use super::code_object::CodeObject;
use super::metadata::KernelArgument;

/// The hidden arguments clang lays out first from code object v5, as
/// (value kind, offset from the first hidden argument, bytes): the grid's
/// shape. The rest of clang's hidden block (printf and hostcall buffers,
/// the heap, the queue) sets up runtime services and is not declared.
pub const V5_LAUNCH_SHAPE: &[(&str, u64, u64)] = &[
    ("hidden_block_count_x", 0, 4),
    ("hidden_block_count_y", 4, 4),
    ("hidden_block_count_z", 8, 4),
    ("hidden_group_size_x", 12, 2),
    ("hidden_group_size_y", 14, 2),
    ("hidden_group_size_z", 16, 2),
    ("hidden_remainder_x", 18, 2),
    ("hidden_remainder_y", 20, 2),
    ("hidden_remainder_z", 22, 2),
    // 24..40: reserved (tool correlation id and a reserved word).
    ("hidden_global_offset_x", 40, 8),
    ("hidden_global_offset_y", 48, 8),
    ("hidden_global_offset_z", 56, 8),
    ("hidden_grid_dims", 64, 2),
];

/// Bytes clang reserves for v5 hidden arguments (the kernarg segment grows
/// by this much, so a hook reading any of them stays inside it).
pub const V5_HIDDEN_BYTES: u64 = 256;

/// Hidden arguments start 8-aligned after the explicit ones.
const HIDDEN_ALIGNMENT: u64 = 8;

/// What declaring changed in one kernel.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeclaredHiddenArguments {
    pub kernel: String,
    /// Offset of the first hidden argument.
    pub offset: u64,
    /// The kernarg segment's size before and after.
    pub kernarg_segment_size: (u64, u64),
}

/// Where a kernel's hidden arguments begin: its first declared one, else
/// where clang would put them.
pub fn hidden_arguments_offset(arguments: &[KernelArgument]) -> u64 {
    arguments.iter().filter(|a| a.is_hidden()).map(|a| a.offset).min().unwrap_or_else(|| {
        let explicit_end = arguments.iter().map(|a| a.offset + a.size).max().unwrap_or(0);
        explicit_end.next_multiple_of(HIDDEN_ALIGNMENT)
    })
}

/// A copy of `code_object` in which each of `kernels` (indices into
/// `code_object.kernels`; each must declare no hidden argument) declares the
/// v5 launch shape: in the typed metadata, in the metadata document written
/// back, and in its descriptor's kernarg size.
pub fn declare_launch_shape(code_object: &CodeObject, kernels: &[usize]) -> (CodeObject, Vec<DeclaredHiddenArguments>) {
    let mut declared = code_object.clone();
    let mut changes = Vec::new();
    for &index in kernels {
        let kernel = &mut declared.kernels[index];
        debug_assert!(!kernel.metadata.arguments.iter().any(KernelArgument::is_hidden));
        let offset = hidden_arguments_offset(&kernel.metadata.arguments);
        let before = kernel.metadata.kernarg_segment_size;
        let after = (offset + V5_HIDDEN_BYTES).max(before);
        let added: Vec<KernelArgument> = V5_LAUNCH_SHAPE
            .iter()
            .map(|(kind, at, size)| KernelArgument {
                name: None,
                type_name: None,
                offset: offset + at,
                size: *size,
                value_kind: (*kind).to_string(),
            })
            .collect();
        set_in_document(&mut declared.metadata.document, &kernel.metadata.name, &added, after);
        kernel.metadata.arguments.extend(added);
        kernel.metadata.kernarg_segment_size = after;
        kernel.descriptor.kernarg_size = u32::try_from(after).unwrap_or(u32::MAX);
        if let Some(typed) = declared.metadata.kernels.iter_mut().find(|k| k.name == kernel.metadata.name) {
            *typed = kernel.metadata.clone();
        }
        changes.push(DeclaredHiddenArguments {
            kernel: kernel.metadata.name.clone(),
            offset,
            kernarg_segment_size: (before, after),
        });
    }
    (declared, changes)
}

/// Appends `added` to the kernel's `.args` and sets its `.kernarg_segment_size`.
fn set_in_document(document: &mut rmpv::Value, kernel: &str, added: &[KernelArgument], size: u64) {
    use rmpv::Value;
    let Value::Map(map) = document else { return };
    let Some((_, Value::Array(kernels))) = map.iter_mut().find(|(k, _)| k.as_str() == Some("amdhsa.kernels")) else {
        return;
    };
    let key = |name: &str| Value::from(name);
    for entry in kernels {
        let Value::Map(fields) = entry else { continue };
        if !fields.iter().any(|(k, v)| k.as_str() == Some(".name") && v.as_str() == Some(kernel)) {
            continue;
        }
        let arguments = added.iter().map(|a| {
            Value::Map(vec![
                (key(".offset"), Value::from(a.offset)),
                (key(".size"), Value::from(a.size)),
                (key(".value_kind"), Value::from(a.value_kind.as_str())),
            ])
        });
        match fields.iter_mut().find(|(k, _)| k.as_str() == Some(".args")) {
            Some((_, Value::Array(list))) => list.extend(arguments),
            Some((_, other)) => *other = Value::Array(arguments.collect()),
            None => fields.push((key(".args"), Value::Array(arguments.collect()))),
        }
        match fields.iter_mut().find(|(k, _)| k.as_str() == Some(".kernarg_segment_size")) {
            Some((_, old)) => *old = Value::from(size),
            None => fields.push((key(".kernarg_segment_size"), Value::from(size))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argument(offset: u64, size: u64, kind: &str) -> KernelArgument {
        KernelArgument { name: None, type_name: None, offset, size, value_kind: kind.into() }
    }

    #[test]
    fn hidden_arguments_begin_eight_aligned_after_the_explicit_ones() {
        assert_eq!(hidden_arguments_offset(&[]), 0);
        assert_eq!(hidden_arguments_offset(&[argument(0, 8, "global_buffer"), argument(8, 4, "by_value")]), 16);
        assert_eq!(hidden_arguments_offset(&[argument(0, 8, "global_buffer"), argument(8, 8, "by_value")]), 16);
        // A declared one is where it is.
        assert_eq!(hidden_arguments_offset(&[argument(0, 4, "by_value"), argument(24, 4, "hidden_block_count_x")]), 24);
    }

    #[test]
    fn the_launch_shape_is_clangs_v5_layout() {
        // Each argument naturally aligned, none overlapping, all inside the block.
        let mut end = 0;
        for (kind, offset, size) in V5_LAUNCH_SHAPE {
            assert_eq!(offset % size, 0, "{kind}");
            assert!(*offset >= end, "{kind}");
            end = offset + size;
        }
        assert!(end <= V5_HIDDEN_BYTES);
    }
}
