//! The intrinsics a payload compilation knows: the built-ins, plus any a
//! program registers the same way.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::builtins;
use crate::lowering::Intrinsic;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("intrinsic {0} is registered twice")]
pub struct DuplicateIntrinsic(pub String);

pub struct Registry {
    intrinsics: BTreeMap<String, Box<dyn Intrinsic>>,
}

impl Registry {
    /// Only the built-ins.
    pub fn with_builtins() -> Registry {
        let mut registry = Registry { intrinsics: BTreeMap::new() };
        for intrinsic in builtins::lowerings().into_iter().chain(builtins::internal_lowerings()) {
            registry.register(intrinsic).expect("built-in names are unique");
        }
        registry
    }

    /// Adds an intrinsic; its name must be new.
    pub fn register(&mut self, intrinsic: Box<dyn Intrinsic>) -> Result<(), DuplicateIntrinsic> {
        let name = intrinsic.name().to_string();
        if self.intrinsics.contains_key(&name) {
            return Err(DuplicateIntrinsic(name));
        }
        self.intrinsics.insert(name, intrinsic);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&dyn Intrinsic> {
        self.intrinsics.get(name).map(|b| b.as_ref())
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.intrinsics.keys().map(String::as_str)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::with_builtins()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lowering::{IntrinsicError, IrCall, IrLowering, MirBuilder, MirOperands};

    struct Custom;
    impl Intrinsic for Custom {
        fn name(&self) -> &str {
            "mytool::hwId"
        }
        fn lower_ir(&self, _: &IrCall<'_>) -> Result<IrLowering, IntrinsicError> {
            Ok(IrLowering::default())
        }
        fn lower_mir(&self, _: &IrLowering, _: &MirOperands, _: &mut dyn MirBuilder) -> Result<(), IntrinsicError> {
            Ok(())
        }
    }

    #[test]
    fn user_intrinsics_register_like_builtins() {
        let mut registry = Registry::with_builtins();
        assert!(registry.get("gpuinstr::readReg").is_some());
        assert!(registry.get("mytool::hwId").is_none());
        registry.register(Box::new(Custom)).unwrap();
        assert_eq!(registry.get("mytool::hwId").unwrap().name(), "mytool::hwId");
        assert_eq!(registry.register(Box::new(Custom)), Err(DuplicateIntrinsic("mytool::hwId".into())));
    }
}
