//! Selective instrumentation: which dispatches of kernels whose originals
//! were kept (`instrument --keep-originals`) run their instrumented copy.
//! Set by `gpuinstr-run --select-kernel/--select-first/--select-every`
//! (`GPUINSTR_SELECT_KERNEL`, `_FIRST`, `_EVERY`); with none of them every
//! dispatch is instrumented.

use serde::Serialize;

/// What the user chose, and what it chose so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Selection {
    /// Kernels whose name contains one of these (all when empty).
    pub kernels: Vec<String>,
    /// Only each kernel's first N dispatches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
    /// Only each kernel's dispatches 1, 1 + N, 1 + 2N, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    /// Dispatches that ran the instrumented copy.
    pub selected: u64,
    /// Dispatches that ran the original.
    pub not_selected: u64,
}

impl Selection {
    /// The selection the environment asks for; an error names the variable.
    pub fn from_environment() -> Result<Selection, String> {
        let number = |variable: &str| -> Result<Option<u64>, String> {
            match std::env::var(variable) {
                Ok(text) if !text.is_empty() => match text.parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(format!("{variable}={text}: a whole number of at least 1 is expected")),
                },
                _ => Ok(None),
            }
        };
        let kernels = std::env::var("GPUINSTR_SELECT_KERNEL").unwrap_or_default();
        Ok(Selection {
            kernels: kernels.split(',').filter(|k| !k.is_empty()).map(str::to_string).collect(),
            first: number("GPUINSTR_SELECT_FIRST")?,
            every: number("GPUINSTR_SELECT_EVERY")?,
            ..Selection::default()
        })
    }

    /// Did the user narrow the selection at all?
    pub fn is_narrowed(&self) -> bool {
        !self.kernels.is_empty() || self.first.is_some() || self.every.is_some()
    }

    /// Whether the `ordinal`-th dispatch (1, 2, ...) of `kernel` runs
    /// instrumented; counted.
    pub fn choose(&mut self, kernel: &str, ordinal: u64) -> bool {
        let named = self.kernels.is_empty() || self.kernels.iter().any(|k| kernel.contains(k.as_str()));
        let early = match self.first {
            Some(first) => ordinal <= first,
            None => true,
        };
        let on_step = match self.every {
            Some(every) => (ordinal - 1).checked_rem(every) == Some(0),
            None => true,
        };
        let chosen = named && early && on_step;
        match chosen {
            true => self.selected += 1,
            false => self.not_selected += 1,
        }
        chosen
    }

    /// The selection as the summary says it.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.kernels.is_empty() {
            parts.push(format!("kernels named *{}*", self.kernels.join("* or *")));
        }
        if let Some(first) = self.first {
            parts.push(format!("each kernel's first {first} dispatches"));
        }
        if let Some(every) = self.every {
            parts.push(format!("one in {every} of each kernel's dispatches (from its first)"));
        }
        if parts.is_empty() {
            "every dispatch".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_chooses_by_name_then_by_each_kernels_ordinal() {
        let mut selection =
            Selection { kernels: vec!["scale".into()], first: Some(3), every: Some(2), ..Selection::default() };
        let chosen: Vec<bool> = (1..=5).map(|n| selection.choose("_Z5scalePffi", n)).collect();
        assert_eq!(chosen, [true, false, true, false, false]);
        assert!(!selection.choose("_Z7rowSumsPKfPfi", 1));
        assert_eq!((selection.selected, selection.not_selected), (2, 4));
        assert_eq!(
            selection.describe(),
            "kernels named *scale*, each kernel's first 3 dispatches, one in 2 of each kernel's dispatches (from its first)"
        );
        let mut everything = Selection::default();
        assert!(!everything.is_narrowed());
        assert!((1..=4).all(|n| everything.choose("k", n)));
    }
}
