//! Kernel arguments written as text, for the command line and argument
//! files: `u32:5`, `i64:-1`, `f32:0.5`, `f64:2`, `buffer:f32:1,2,3` (an
//! allocation holding those values; the argument is its address),
//! `zeros:f32:256` (an allocation of 256 zeroed f32), `bytes:0a0b` (raw).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("kernel argument `{text}`: {reason} (forms: u32:5, i32:-1, u64:7, f32:0.5, f64:2, buffer:f32:1,2,3, zeros:u32:256, bytes:0a0b)")]
pub struct ArgumentError {
    pub text: String,
    pub reason: String,
}

/// Element types of scalars and buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    U8,
    U16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

impl Element {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "u8" => Element::U8,
            "u16" => Element::U16,
            "u32" => Element::U32,
            "i32" => Element::I32,
            "u64" => Element::U64,
            "i64" => Element::I64,
            "f32" => Element::F32,
            "f64" => Element::F64,
            _ => return None,
        })
    }

    pub fn size(self) -> usize {
        match self {
            Element::U8 => 1,
            Element::U16 => 2,
            Element::U32 | Element::I32 | Element::F32 => 4,
            Element::U64 | Element::I64 | Element::F64 => 8,
        }
    }

    /// One value's little-endian bytes.
    pub fn encode(self, text: &str) -> Option<Vec<u8>> {
        let int = |t: &str| -> Option<i128> {
            match t.strip_prefix("0x") {
                Some(hex) => i128::from_str_radix(hex, 16).ok(),
                None => t.parse().ok(),
            }
        };
        Some(match self {
            Element::U8 => vec![u8::try_from(int(text)?).ok()?],
            Element::U16 => u16::try_from(int(text)?).ok()?.to_le_bytes().to_vec(),
            Element::U32 => u32::try_from(int(text)?).ok()?.to_le_bytes().to_vec(),
            Element::I32 => i32::try_from(int(text)?).ok()?.to_le_bytes().to_vec(),
            Element::U64 => u64::try_from(int(text)?).ok()?.to_le_bytes().to_vec(),
            Element::I64 => i64::try_from(int(text)?).ok()?.to_le_bytes().to_vec(),
            Element::F32 => text.parse::<f32>().ok()?.to_le_bytes().to_vec(),
            Element::F64 => text.parse::<f64>().ok()?.to_le_bytes().to_vec(),
        })
    }

    /// Renders values read back from memory.
    pub fn render(self, bytes: &[u8]) -> Vec<String> {
        bytes
            .chunks_exact(self.size())
            .map(|b| match self {
                Element::U8 => b[0].to_string(),
                Element::U16 => u16::from_le_bytes([b[0], b[1]]).to_string(),
                Element::U32 => u32::from_le_bytes(b.try_into().expect("4")).to_string(),
                Element::I32 => i32::from_le_bytes(b.try_into().expect("4")).to_string(),
                Element::U64 => u64::from_le_bytes(b.try_into().expect("8")).to_string(),
                Element::I64 => i64::from_le_bytes(b.try_into().expect("8")).to_string(),
                Element::F32 => f32::from_le_bytes(b.try_into().expect("4")).to_string(),
                Element::F64 => f64::from_le_bytes(b.try_into().expect("8")).to_string(),
            })
            .collect()
    }
}

/// A parsed argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Argument {
    /// Bytes placed in the kernel argument segment as they are.
    Value(Vec<u8>),
    /// An allocation made before the launch; the argument is its address.
    Buffer { element: Element, bytes: Vec<u8> },
}

pub fn parse(text: &str) -> Result<Argument, ArgumentError> {
    let fail = |reason: &str| ArgumentError { text: text.to_string(), reason: reason.to_string() };
    let (kind, rest) = text.split_once(':').ok_or_else(|| fail("no `kind:` prefix"))?;
    match kind {
        "buffer" | "zeros" => {
            let (element, values) = rest.split_once(':').ok_or_else(|| fail("needs an element type and values"))?;
            let element = Element::parse(element).ok_or_else(|| fail("unknown element type"))?;
            let bytes = if kind == "zeros" {
                let count: usize = values.parse().map_err(|_| fail("the count is not a number"))?;
                vec![0; count * element.size()]
            } else {
                let mut bytes = Vec::new();
                for value in values.split(',').filter(|v| !v.is_empty()) {
                    bytes.extend(element.encode(value.trim()).ok_or_else(|| fail("a value does not fit the type"))?);
                }
                bytes
            };
            Ok(Argument::Buffer { element, bytes })
        }
        "bytes" => {
            let hex = rest.trim();
            if hex.len() % 2 != 0 {
                return Err(fail("an odd number of hex digits"));
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| fail("not hex"))?;
            Ok(Argument::Value(bytes))
        }
        scalar => {
            let element = Element::parse(scalar).ok_or_else(|| fail("unknown kind"))?;
            Ok(Argument::Value(element.encode(rest.trim()).ok_or_else(|| fail("the value does not fit the type"))?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_forms() {
        assert_eq!(parse("u32:5"), Ok(Argument::Value(vec![5, 0, 0, 0])));
        assert_eq!(parse("i32:-1"), Ok(Argument::Value(vec![0xff; 4])));
        assert_eq!(parse("f32:1"), Ok(Argument::Value(1f32.to_le_bytes().to_vec())));
        assert_eq!(
            parse("buffer:u16:1,0x10"),
            Ok(Argument::Buffer { element: Element::U16, bytes: vec![1, 0, 0x10, 0] })
        );
        assert_eq!(parse("zeros:f64:2"), Ok(Argument::Buffer { element: Element::F64, bytes: vec![0; 16] }));
        assert_eq!(parse("bytes:0a0b"), Ok(Argument::Value(vec![10, 11])));
        assert!(parse("u8:300").unwrap_err().to_string().contains("does not fit"));
        assert!(parse("vec:1").is_err());
    }
}
