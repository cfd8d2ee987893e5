//! The AMDGPU metadata note (`NT_AMDGPU_METADATA`, MessagePack) of code
//! objects v3+. The whole document is kept as a MessagePack value (so it can
//! be written back unchanged); the fields the driver reads are lifted into
//! typed structs.

use serde::Serialize;

use crate::error::LoadProblem;

/// One argument of a kernel, as the metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelArgument {
    pub name: Option<String>,
    pub type_name: Option<String>,
    pub offset: u64,
    pub size: u64,
    /// `.value_kind`: `global_buffer`, `by_value`, `hidden_block_count_x`, ...
    pub value_kind: String,
}

impl KernelArgument {
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

/// The metadata of one kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelMetadata {
    pub name: String,
    /// The kernel descriptor symbol (`name.kd`).
    pub symbol: String,
    pub arguments: Vec<KernelArgument>,
    pub kernarg_segment_size: u64,
    pub group_segment_fixed_size: u64,
    pub private_segment_fixed_size: u64,
    pub sgpr_count: u64,
    pub vgpr_count: u64,
    pub agpr_count: Option<u64>,
    pub wavefront_size: u64,
    /// `.max_flat_workgroup_size`: bounds the registers a wave may use.
    pub max_flat_workgroup_size: u64,
}

/// The whole metadata note.
#[derive(Clone, Debug, PartialEq)]
pub struct Metadata {
    /// The document: with several notes, the first note's with every
    /// note's kernels in `amdhsa.kernels`, in order.
    pub document: rmpv::Value,
    /// Each note's document and how many kernels it holds: a code object
    /// linked from several objects (Tensile's, one object per kernel) has a
    /// note per object, which CoMGR reads as one list of kernels.
    pub notes: Vec<(rmpv::Value, usize)>,
    /// `amdhsa.version`.
    pub version: Option<(u64, u64)>,
    /// `amdhsa.target`, e.g. `amdgcn-amd-amdhsa--gfx90a:xnack-`.
    pub target: Option<String>,
    pub kernels: Vec<KernelMetadata>,
}

fn field<'v>(map: &'v rmpv::Value, key: &str) -> Option<&'v rmpv::Value> {
    map.as_map()?.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
}

fn string(map: &rmpv::Value, key: &str) -> Option<String> {
    field(map, key)?.as_str().map(str::to_string)
}

fn number(map: &rmpv::Value, key: &str) -> Option<u64> {
    field(map, key)?.as_u64()
}

impl Metadata {
    pub fn parse(note: &[u8]) -> Result<Self, LoadProblem> {
        let mut reader = note;
        let document =
            rmpv::decode::read_value(&mut reader).map_err(|e| LoadProblem::MalformedMetadata(e.to_string()))?;
        if !document.is_map() {
            return Err(LoadProblem::MalformedMetadata("the document is not a map".into()));
        }
        check_types(&document, "the document")?;
        let version = field(&document, "amdhsa.version").and_then(|v| {
            let list = v.as_array()?;
            Some((list.first()?.as_u64()?, list.get(1)?.as_u64()?))
        });
        let target = string(&document, "amdhsa.target");
        let mut kernels = Vec::new();
        if let Some(list) = field(&document, "amdhsa.kernels").and_then(|v| v.as_array()) {
            for (index, kernel) in list.iter().enumerate() {
                let name = string(kernel, ".name")
                    .ok_or_else(|| LoadProblem::MalformedMetadata(format!("kernel {index} has no .name")))?;
                let symbol = string(kernel, ".symbol").ok_or_else(|| LoadProblem::Kernel {
                    kernel: name.clone(),
                    problem: "the metadata gives no .symbol (kernel descriptor symbol)".into(),
                })?;
                let arguments = field(kernel, ".args")
                    .and_then(|v| v.as_array())
                    .map(|args| {
                        args.iter()
                            .map(|arg| KernelArgument {
                                name: string(arg, ".name"),
                                type_name: string(arg, ".type_name"),
                                offset: number(arg, ".offset").unwrap_or(0),
                                size: number(arg, ".size").unwrap_or(0),
                                value_kind: string(arg, ".value_kind").unwrap_or_default(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                kernels.push(KernelMetadata {
                    name,
                    symbol,
                    arguments,
                    kernarg_segment_size: number(kernel, ".kernarg_segment_size").unwrap_or(0),
                    group_segment_fixed_size: number(kernel, ".group_segment_fixed_size").unwrap_or(0),
                    private_segment_fixed_size: number(kernel, ".private_segment_fixed_size").unwrap_or(0),
                    sgpr_count: number(kernel, ".sgpr_count").unwrap_or(0),
                    vgpr_count: number(kernel, ".vgpr_count").unwrap_or(0),
                    agpr_count: number(kernel, ".agpr_count"),
                    wavefront_size: number(kernel, ".wavefront_size").unwrap_or(64),
                    max_flat_workgroup_size: number(kernel, ".max_flat_workgroup_size").unwrap_or(1024),
                });
            }
        }
        let notes = vec![(document.clone(), kernels.len())];
        Ok(Metadata { document, notes, version, target, kernels })
    }

    /// The metadata of every note of a code object, merged: kernels in
    /// order; the notes must agree on the version and the target.
    pub fn parse_notes(notes: &[Vec<u8>]) -> Result<Self, LoadProblem> {
        let mut parsed = notes.iter().map(|note| Metadata::parse(note));
        let mut merged = parsed.next().ok_or(LoadProblem::MissingMetadata)??;
        for (index, note) in parsed.enumerate() {
            let note = note?;
            // A note may leave the version or the target out (Tensile's
            // code objects have such notes among hundreds): it agrees.
            merged.version = merged.version.or(note.version);
            merged.target = merged.target.clone().or_else(|| note.target.clone());
            let version_agrees = note.version.is_none() || note.version == merged.version;
            let target_agrees = note.target.is_none() || note.target == merged.target;
            if !(version_agrees && target_agrees) {
                return Err(LoadProblem::MalformedMetadata(format!(
                    "metadata note {} says version {:?} and target {:?}, the first {:?} and {:?}",
                    index + 2,
                    note.version,
                    note.target,
                    merged.version,
                    merged.target
                )));
            }
            merged.notes.push((note.document, note.kernels.len()));
            merged.kernels.extend(note.kernels);
        }
        if merged.notes.len() > 1 {
            let all: Vec<rmpv::Value> = merged.notes.iter().flat_map(|(document, _)| kernel_list(document)).collect();
            set_kernel_list(&mut merged.document, all);
        }
        Ok(merged)
    }

    /// `document` (this metadata's, patched) as the notes it came from:
    /// each note's own fields and its share of the kernels, in order; any
    /// kernels past the originals (instrumented copies) go in the last.
    pub fn split_into_notes(&self, document: &rmpv::Value) -> Vec<rmpv::Value> {
        if self.notes.len() <= 1 {
            return vec![document.clone()];
        }
        let mut kernels = kernel_list(document).into_iter();
        let last = self.notes.len() - 1;
        self.notes
            .iter()
            .enumerate()
            .map(|(index, (note, count))| {
                let mut note = note.clone();
                let share: Vec<rmpv::Value> =
                    if index == last { kernels.by_ref().collect() } else { kernels.by_ref().take(*count).collect() };
                set_kernel_list(&mut note, share);
                note
            })
            .collect()
    }
}

/// The entries of a document's `amdhsa.kernels` whose `.name` is one of
/// `names`, in the document's order.
pub fn kernel_entries(document: &rmpv::Value, names: &[String]) -> Vec<rmpv::Value> {
    let wanted: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let kernels = field(document, "amdhsa.kernels").and_then(|v| v.as_array());
    let named =
        |kernel: &&rmpv::Value| field(kernel, ".name").and_then(|n| n.as_str()).is_some_and(|n| wanted.contains(n));
    kernels.into_iter().flatten().filter(named).cloned().collect()
}

/// `document` with each entry of its `amdhsa.kernels` that one of
/// `entries` has the `.name` of replaced by that one.
pub fn replace_kernel_entries(document: &mut rmpv::Value, entries: Vec<rmpv::Value>) {
    let name = |kernel: &rmpv::Value| field(kernel, ".name").and_then(|n| n.as_str()).map(str::to_string);
    let mut by_name: std::collections::HashMap<String, rmpv::Value> =
        entries.into_iter().filter_map(|entry| Some((name(&entry)?, entry))).collect();
    let mut kernels = kernel_list(document);
    for kernel in &mut kernels {
        if let Some(replacement) = name(kernel).and_then(|n| by_name.remove(&n)) {
            *kernel = replacement;
        }
    }
    set_kernel_list(document, kernels);
}

/// A document's `amdhsa.kernels` list.
fn kernel_list(document: &rmpv::Value) -> Vec<rmpv::Value> {
    field(document, "amdhsa.kernels").and_then(|v| v.as_array()).cloned().unwrap_or_default()
}

fn set_kernel_list(document: &mut rmpv::Value, kernels: Vec<rmpv::Value>) {
    if let rmpv::Value::Map(entries) = document {
        match entries.iter_mut().find(|(k, _)| k.as_str() == Some("amdhsa.kernels")) {
            Some((_, value)) => *value = rmpv::Value::Array(kernels),
            None => entries.push(("amdhsa.kernels".into(), rmpv::Value::Array(kernels))),
        }
    }
}

/// What the metadata note may hold: maps with string, integer or boolean
/// keys (Tensile writes `AssertSizeMultiple: {3: 1}`), arrays, strings,
/// numbers, booleans (LLVM writes nothing else, and the emitter writes it
/// back as YAML, whose plain scalars LLVM reads back as the same integers
/// and booleans, and which has no binary data and no container keys).
fn check_types(value: &rmpv::Value, at: &str) -> Result<(), LoadProblem> {
    use rmpv::Value;
    match value {
        Value::Map(entries) => {
            for (key, value) in entries {
                let key = match key {
                    Value::String(text) => text.as_str().map(str::to_string),
                    Value::Integer(_) | Value::Boolean(_) => Some(key.to_string()),
                    _ => None,
                };
                let Some(key) = key else {
                    return Err(LoadProblem::MalformedMetadata(format!(
                        "{at} has a key that is not a string, an integer or a boolean"
                    )));
                };
                check_types(value, &key)?;
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|item| check_types(item, at)),
        Value::Binary(_) | Value::Ext(..) => {
            Err(LoadProblem::MalformedMetadata(format!("{at} holds binary data, which the metadata never has")))
        }
        Value::String(text) if text.as_str().is_none() => {
            Err(LoadProblem::MalformedMetadata(format!("{at} holds a string that is not UTF-8")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value;

    fn map(entries: Vec<(&str, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
    }

    #[test]
    fn reads_kernels_and_arguments() {
        let document = map(vec![
            ("amdhsa.version", Value::Array(vec![1.into(), 1.into()])),
            ("amdhsa.target", "amdgcn-amd-amdhsa--gfx90a".into()),
            (
                "amdhsa.kernels",
                Value::Array(vec![map(vec![
                    (".name", "vadd".into()),
                    (".symbol", "vadd.kd".into()),
                    (".sgpr_count", 12.into()),
                    (".vgpr_count", 3.into()),
                    (
                        ".args",
                        Value::Array(vec![
                            map(vec![
                                (".offset", 0.into()),
                                (".size", 8.into()),
                                (".value_kind", "global_buffer".into()),
                            ]),
                            map(vec![
                                (".offset", 8.into()),
                                (".size", 4.into()),
                                (".value_kind", "hidden_block_count_x".into()),
                            ]),
                        ]),
                    ),
                ])]),
            ),
        ]);
        let mut bytes = Vec::new();
        rmpv::encode::write_value(&mut bytes, &document).unwrap();
        let metadata = Metadata::parse(&bytes).unwrap();
        assert_eq!(metadata.version, Some((1, 1)));
        assert_eq!(metadata.kernels[0].symbol, "vadd.kd");
        assert_eq!(metadata.kernels[0].sgpr_count, 12);
        assert!(!metadata.kernels[0].arguments[0].is_hidden());
        assert!(metadata.kernels[0].arguments[1].is_hidden());
        assert_eq!(metadata.document, document);
    }

    /// Tensile's kernels carry maps keyed by integers; a container as a
    /// key is refused.
    #[test]
    fn integer_keys_are_read_and_container_keys_refused() {
        let with_keys = |key: Value| {
            let document = map(vec![
                ("amdhsa.version", Value::Array(vec![1.into(), 1.into()])),
                ("amdhsa.kernels", Value::Array(vec![])),
                ("custom", Value::Map(vec![(key, 1.into())])),
            ]);
            let mut bytes = Vec::new();
            rmpv::encode::write_value(&mut bytes, &document).unwrap();
            Metadata::parse(&bytes)
        };
        assert_eq!(with_keys(3.into()).unwrap().document["custom"], Value::Map(vec![(3.into(), 1.into())]));
        let error = with_keys(Value::Array(vec![])).unwrap_err().to_string();
        assert!(error.contains("custom has a key that is not a string, an integer or a boolean"), "{error}");
    }

    /// Notes merge when each leaves the version or target out or agrees
    /// (Tensile's); one naming another target is refused.
    #[test]
    fn notes_without_a_target_agree_with_the_others() {
        let note = |target: Option<&str>, kernel: &str| {
            let mut entries = vec![("amdhsa.version", Value::Array(vec![1.into(), 1.into()]))];
            if let Some(target) = target {
                entries.push(("amdhsa.target", target.into()));
            }
            let kernels =
                Value::Array(vec![map(vec![(".name", kernel.into()), (".symbol", format!("{kernel}.kd").into())])]);
            entries.push(("amdhsa.kernels", kernels));
            let mut bytes = Vec::new();
            rmpv::encode::write_value(&mut bytes, &map(entries)).unwrap();
            bytes
        };
        let gfx90a = Some("amdgcn-amd-amdhsa--gfx90a");
        let merged = Metadata::parse_notes(&[note(gfx90a, "a"), note(None, "b"), note(gfx90a, "c")]).unwrap();
        assert_eq!(merged.target.as_deref(), gfx90a);
        assert_eq!(merged.kernels.len(), 3);
        let error = Metadata::parse_notes(&[note(gfx90a, "a"), note(Some("amdgcn-amd-amdhsa--gfx908"), "b")]);
        assert!(error.unwrap_err().to_string().contains("metadata note 2 says"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Metadata::parse(&[0xc1]).is_err());
        assert!(Metadata::parse(&[0x01]).is_err());
    }
}
