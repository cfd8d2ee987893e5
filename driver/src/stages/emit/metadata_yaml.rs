//! The AMDGPU metadata document (MessagePack) written as the YAML of an
//! `.amdgpu_metadata` block. LLVM 15 reads plain scalars as unsigned, then
//! signed integers, then booleans, then floats, then strings (msgpack
//! DocNode::fromString), and writes maps sorted; so a string that would read
//! as something else is quoted, and everything else is written plainly.

use std::fmt::Write;

use rmpv::Value;

fn needs_quotes(text: &str) -> bool {
    text.is_empty()
        || text.parse::<u64>().is_ok()
        || text.parse::<i64>().is_ok()
        || text.parse::<f64>().is_ok()
        || matches!(text.to_ascii_lowercase().as_str(), "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~")
        || text.starts_with(|c: char| "-?:,[]{}#&*!|>'\"%@` ".contains(c))
        || text.ends_with(' ')
        || text.contains(": ")
        || text.contains(" #")
        || text.chars().any(|c| c.is_control())
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Nil => "~".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::F32(f) => format!("{f:?}"),
        Value::F64(f) => format!("{f:?}"),
        Value::String(s) => {
            let text = s.as_str().unwrap_or_default();
            if needs_quotes(text) {
                format!("'{}'", text.replace('\'', "''"))
            } else {
                text.to_string()
            }
        }
        Value::Binary(bytes) => format!("'{}'", String::from_utf8_lossy(bytes).replace('\'', "''")),
        Value::Ext(_, bytes) => format!("'{}'", String::from_utf8_lossy(bytes).replace('\'', "''")),
        Value::Array(_) | Value::Map(_) => unreachable!("containers are not scalars"),
    }
}

fn is_container(value: &Value) -> bool {
    matches!(value, Value::Array(a) if !a.is_empty()) || matches!(value, Value::Map(m) if !m.is_empty())
}

fn empty_container(value: &Value) -> Option<&'static str> {
    match value {
        Value::Array(a) if a.is_empty() => Some("[]"),
        Value::Map(m) if m.is_empty() => Some("{}"),
        _ => None,
    }
}

fn write_node(out: &mut String, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Map(entries) => {
            for (key, value) in entries {
                let key = match key {
                    Value::String(_) => scalar(key),
                    other => scalar(other),
                };
                if is_container(value) {
                    writeln!(out, "{pad}{key}:").unwrap();
                    write_node(out, value, indent + 2);
                } else if let Some(empty) = empty_container(value) {
                    writeln!(out, "{pad}{key}: {empty}").unwrap();
                } else {
                    writeln!(out, "{pad}{key}: {}", scalar(value)).unwrap();
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Map(entries) if !entries.is_empty() => {
                        // The first entry shares the dash's line.
                        let mut nested = String::new();
                        write_node(&mut nested, item, indent + 2);
                        let nested = nested.strip_prefix(&" ".repeat(indent + 2)).unwrap_or(&nested);
                        write!(out, "{pad}- {nested}").unwrap();
                    }
                    _ if is_container(item) => {
                        writeln!(out, "{pad}-").unwrap();
                        write_node(out, item, indent + 2);
                    }
                    _ => match empty_container(item) {
                        Some(empty) => writeln!(out, "{pad}- {empty}").unwrap(),
                        None => writeln!(out, "{pad}- {}", scalar(item)).unwrap(),
                    },
                }
            }
        }
        other => writeln!(out, "{pad}{}", scalar(other)).unwrap(),
    }
}

/// The `.amdgpu_metadata` block for a metadata document.
pub fn amdgpu_metadata_block(document: &Value) -> String {
    let mut out = String::from("\t.amdgpu_metadata\n---\n");
    write_node(&mut out, document, 0);
    out.push_str("...\n\t.end_amdgpu_metadata\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_block_yaml() {
        let document = Value::Map(vec![
            (
                Value::from("amdhsa.kernels"),
                Value::Array(vec![Value::Map(vec![
                    (
                        Value::from(".args"),
                        Value::Array(vec![Value::Map(vec![
                            (Value::from(".offset"), Value::from(0)),
                            (Value::from(".type_name"), Value::from("float*")),
                        ])]),
                    ),
                    (Value::from(".name"), Value::from("vadd")),
                    (Value::from(".uses_dynamic_stack"), Value::from(false)),
                ])]),
            ),
            (Value::from("amdhsa.version"), Value::Array(vec![Value::from(1), Value::from(1)])),
            (Value::from("odd"), Value::from("123")),
        ]);
        let yaml = amdgpu_metadata_block(&document);
        assert_eq!(
            yaml,
            "\t.amdgpu_metadata\n---\namdhsa.kernels:\n  - .args:\n      - .offset: 0\n        .type_name: float*\n    \
             .name: vadd\n    .uses_dynamic_stack: false\namdhsa.version:\n  - 1\n  - 1\nodd: '123'\n...\n\t.end_amdgpu_metadata\n"
        );
    }
}
