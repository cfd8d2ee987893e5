//! IR types spelled as in LLVM's overloaded intrinsic names (`i32`, `f32`,
//! `p4`, `v2i32`); used to name intrinsic functions.

use crate::ir::TypeShape;

/// The spelling of a type, or the printed type when intrinsics cannot take it.
pub fn spell(shape: &TypeShape) -> Result<String, String> {
    Ok(match shape {
        TypeShape::Void => "void".to_string(),
        TypeShape::Integer(bits) => format!("i{bits}"),
        TypeShape::Half => "f16".to_string(),
        TypeShape::BFloat => "bf16".to_string(),
        TypeShape::Float => "f32".to_string(),
        TypeShape::Double => "f64".to_string(),
        TypeShape::Pointer { address_space } => format!("p{address_space}"),
        TypeShape::Vector { length, element } => match **element {
            TypeShape::Void | TypeShape::Vector { .. } | TypeShape::Other(_) => {
                return Err(format!("<{length} x {}>", spell(element).unwrap_or_else(|e| e)))
            }
            _ => format!("v{length}{}", spell(element)?),
        },
        TypeShape::Other(printed) => return Err(printed.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spells_like_llvm_intrinsics() {
        assert_eq!(spell(&TypeShape::Integer(64)).unwrap(), "i64");
        assert_eq!(spell(&TypeShape::Pointer { address_space: 4 }).unwrap(), "p4");
        assert_eq!(
            spell(&TypeShape::Vector { length: 2, element: Box::new(TypeShape::Integer(32)) }).unwrap(),
            "v2i32"
        );
        assert_eq!(spell(&TypeShape::Other("{ i32, i32 }".into())), Err("{ i32, i32 }".to_string()));
    }
}
