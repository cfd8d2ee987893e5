//! Step 4: intrinsic bindings lose their bodies and are renamed
//! `<qualified name>.<return type>.<argument types>`, like LLVM intrinsics.
//! Bindings nothing calls are dropped.

use gpuinstr_intrinsics::naming::{intrinsic_function_name, INTRINSIC_ATTRIBUTE};

use super::{display_name, Outcome, StepError};
use crate::ir::{Function, Module};
use crate::type_names::spell;

/// Parameter attributes that pass aggregates through memory: the intrinsic
/// would see a pointer where the source has a value.
const MEMORY_PASSING_ATTRIBUTES: [&str; 4] = ["sret", "byval", "inalloca", "preallocated"];

/// The IR name of an intrinsic function, or why its signature is unsupported.
pub fn ir_name(function: &Function<'_>, qualified: &str) -> Result<String, String> {
    let ty = function.function_type();
    let shown = display_name(function);
    if ty.is_var_arg() {
        return Err(format!("intrinsic `{shown}` takes variable arguments"));
    }
    let return_type =
        spell(&ty.return_type().shape()).map_err(|t| format!("intrinsic `{shown}` returns unsupported type `{t}`"))?;
    let mut arguments = Vec::new();
    for (index, param) in ty.param_types().iter().enumerate() {
        if let Some(attribute) =
            MEMORY_PASSING_ATTRIBUTES.iter().find(|a| function.param_has_attribute(index as u32, a))
        {
            return Err(format!(
                "intrinsic `{shown}` passes argument {} by memory ({attribute}), which means an aggregate type",
                index + 1
            ));
        }
        arguments.push(
            spell(&param.shape())
                .map_err(|t| format!("intrinsic `{shown}` takes unsupported type `{t}` as argument {}", index + 1))?,
        );
    }
    Ok(intrinsic_function_name(qualified, &return_type, &arguments))
}

pub fn run(module: Module<'_>) -> Outcome<'_> {
    let mut outcome = Outcome::default();
    for function in module.functions() {
        let Some(qualified) = function.string_attribute(INTRINSIC_ATTRIBUTE) else {
            continue;
        };
        let new_name = match ir_name(&function, &qualified) {
            Ok(name) => name,
            Err(problem) => {
                outcome.errors.push(StepError::in_function(
                    function,
                    format!(
                        "gpuinstr: {problem}; intrinsics take and return integers, floating-point values, \
                         pointers or vectors of them"
                    ),
                ));
                continue;
            }
        };
        if !function.is_declaration() {
            function.delete_body();
            outcome.changed = true;
        }
        // The SDK header defines every binding in every tool; keep the used ones.
        if !function.has_uses() {
            function.erase();
            outcome.changed = true;
            continue;
        }
        if function.name() == new_name {
            continue;
        }
        match module.function(&new_name) {
            // Two C++ instantiations with one IR signature (readReg<int>,
            // readReg<unsigned>) are one intrinsic.
            Some(existing) => {
                function.replace_all_uses_with(existing);
                function.erase();
            }
            None => function.set_name(&new_name),
        }
        outcome.changed = true;
    }
    outcome
}
