//! Just enough of LLVM's MIR text format to edit what llc prints after
//! instruction selection: functions, their virtual register classes, basic
//! blocks (successors, live-ins) and instruction lines. Everything not
//! edited is printed back exactly as read.

use std::collections::BTreeMap;

/// A MIR file: the embedded IR module, then one document per function.
#[derive(Clone, Debug)]
pub struct MirModule {
    /// Everything before the first function document.
    pub header: String,
    pub functions: Vec<MirFunction>,
}

#[derive(Clone, Debug)]
pub struct MirFunction {
    pub name: String,
    /// YAML lines before `registers:`.
    pub head: Vec<String>,
    /// Virtual register classes by id.
    pub registers: BTreeMap<u32, String>,
    /// YAML lines between the register list and `body:`.
    pub middle: Vec<String>,
    pub blocks: Vec<MirBlock>,
}

#[derive(Clone, Debug)]
pub struct MirBlock {
    pub number: u32,
    /// `bb.0 (%ir-block.0):` as printed.
    pub header: String,
    /// The successors line as printed (kept for the branch probabilities).
    pub successors_line: Option<String>,
    pub successors: Vec<u32>,
    pub liveins: Vec<String>,
    /// Instruction lines, without indentation.
    pub instructions: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("MIR from llc is not in the expected form: {0}")]
pub struct MirParseError(pub String);

fn block_number(token: &str) -> Option<u32> {
    let rest = token.trim().strip_prefix("%bb.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl MirModule {
    pub fn parse(text: &str) -> Result<MirModule, MirParseError> {
        let mut documents = text.split("\n---\n");
        let header = documents.next().unwrap_or_default().to_string();
        let functions = documents.map(MirFunction::parse).collect::<Result<Vec<_>, _>>()?;
        Ok(MirModule { header, functions })
    }

    /// The module with only the functions `keep` accepts, in the MIR
    /// functions and in the embedded IR alike (llc needs both to agree).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) -> MirModule {
        let mut header = String::with_capacity(self.header.len());
        let mut skipping = false;
        for line in self.header.split_inclusive('\n') {
            let trimmed = line.trim_start();
            if skipping {
                if trimmed.trim_end() == "}" {
                    skipping = false;
                }
                continue;
            }
            if let Some(rest) = trimmed.strip_prefix("define ") {
                let name = rest.split('@').nth(1).and_then(|n| n.split('(').next()).unwrap_or("");
                if !keep(name.trim_matches('"')) {
                    skipping = !trimmed.trim_end().ends_with('}');
                    continue;
                }
            }
            header.push_str(line);
        }
        let functions = self.functions.iter().filter(|f| keep(&f.name)).cloned().collect();
        MirModule { header, functions }
    }

    pub fn print(&self) -> String {
        let mut out = self.header.clone();
        for function in &self.functions {
            out.push_str("\n---\n");
            out.push_str(&function.print());
        }
        out
    }
}

/// The `machineFunctionInfo` field naming the SGPR pair LLVM 20+ reserves
/// to save EXEC around whole-wave spills and copies.
const SGPR_FOR_EXEC_COPY: &str = "sgprForEXECCopy:";

impl MirFunction {
    /// The low SGPR of the pair reserved for EXEC copies (`sgprForEXECCopy`), if any.
    pub fn sgpr_for_exec_copy(&self) -> Option<u16> {
        let line = self.middle.iter().find(|l| l.trim_start().starts_with(SGPR_FOR_EXEC_COPY))?;
        let value = line.trim_start()[SGPR_FOR_EXEC_COPY.len()..].trim().trim_matches('\'');
        let low = value.strip_prefix("$sgpr")?.split('_').next()?;
        low.parse().ok()
    }

    /// Names another pair (`low`, `low + 1`) for EXEC copies.
    pub fn set_sgpr_for_exec_copy(&mut self, low: u16) {
        for line in self.middle.iter_mut().filter(|l| l.trim_start().starts_with(SGPR_FOR_EXEC_COPY)) {
            let indent = &line[..line.len() - line.trim_start().len()];
            *line = format!("{indent}{SGPR_FOR_EXEC_COPY} '$sgpr{low}_sgpr{}'", low + 1);
        }
    }

    fn parse(document: &str) -> Result<MirFunction, MirParseError> {
        let lines: Vec<&str> = document.lines().collect();
        let name = lines
            .iter()
            .find_map(|l| l.strip_prefix("name:"))
            .map(|n| n.trim().trim_matches('\'').trim_matches('"').to_string())
            .ok_or_else(|| MirParseError("a function without a name".into()))?;
        let registers_at = lines
            .iter()
            .position(|l| l.starts_with("registers:"))
            .ok_or_else(|| MirParseError(format!("{name}: no `registers:` list")))?;
        let body_at = lines
            .iter()
            .position(|l| l.starts_with("body:"))
            .ok_or_else(|| MirParseError(format!("{name}: no `body:`")))?;
        let head = lines[..registers_at].iter().map(|l| l.to_string()).collect();

        let mut registers = BTreeMap::new();
        let mut middle_start = registers_at + 1;
        // LLVM 20+ wraps a long entry (`flags: [ ... ] }` on a line of its own).
        let mut entries: Vec<String> = Vec::new();
        for line in &lines[registers_at + 1..body_at] {
            let open = entries.last().is_some_and(|entry| !entry.trim_end().ends_with('}'));
            if open {
                let last = entries.last_mut().expect("an open entry");
                last.push(' ');
                last.push_str(line.trim());
            } else if line.trim().starts_with("- {") {
                entries.push(line.trim().to_string());
            } else {
                break;
            }
            middle_start += 1;
        }
        for line in &entries {
            let Some(entry) = line.strip_prefix("- {") else { break };
            let field = |key: &str| {
                entry.split(',').find_map(|part| part.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            };
            let id = field("id:").and_then(|v| v.parse::<u32>().ok());
            let class = field("class:");
            match (id, class) {
                (Some(id), Some(class)) => {
                    registers.insert(id, class);
                }
                _ => return Err(MirParseError(format!("{name}: register entry `{line}`"))),
            }
        }
        let middle = lines[middle_start..=body_at].iter().map(|l| l.to_string()).collect();

        let mut blocks: Vec<MirBlock> = Vec::new();
        for line in &lines[body_at + 1..] {
            if line.trim() == "..." {
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            let trimmed = line.trim();
            let indent = line.len() - line.trim_start().len();
            if indent <= 2 && trimmed.starts_with("bb.") {
                let number = trimmed[3..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .map_err(|_| MirParseError(format!("{name}: block header `{trimmed}`")))?;
                blocks.push(MirBlock {
                    number,
                    header: trimmed.to_string(),
                    successors_line: None,
                    successors: Vec::new(),
                    liveins: Vec::new(),
                    instructions: Vec::new(),
                });
                continue;
            }
            let block = blocks.last_mut().ok_or_else(|| MirParseError(format!("{name}: code before any block")))?;
            if let Some(list) = trimmed.strip_prefix("successors:") {
                block.successors = list.split(',').filter_map(block_number).collect();
                block.successors_line = Some(trimmed.to_string());
            } else if let Some(list) = trimmed.strip_prefix("liveins:") {
                block.liveins = list.split(',').map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect();
            } else {
                block.instructions.push(trimmed.to_string());
            }
        }
        Ok(MirFunction { name, head, registers, middle, blocks })
    }

    fn print(&self) -> String {
        let mut out = String::new();
        for line in &self.head {
            out.push_str(line);
            out.push('\n');
        }
        if self.registers.is_empty() {
            out.push_str("registers:       []\n");
        } else {
            out.push_str("registers:\n");
            for (id, class) in &self.registers {
                out.push_str(&format!("  - {{ id: {id}, class: {class}, preferred-register: '' }}\n"));
            }
        }
        for line in &self.middle {
            out.push_str(line);
            out.push('\n');
        }
        for (index, block) in self.blocks.iter().enumerate() {
            if index > 0 {
                out.push('\n');
            }
            out.push_str(&format!("  {}\n", block.header));
            if let Some(successors) = &block.successors_line {
                out.push_str(&format!("    {successors}\n"));
            }
            if !block.liveins.is_empty() {
                out.push_str(&format!("    liveins: {}\n", block.liveins.join(", ")));
            }
            for instruction in &block.instructions {
                out.push_str(&format!("    {instruction}\n"));
            }
        }
        out.push_str("\n...\n");
        out
    }

    /// Predecessors of each block, by block position.
    pub fn predecessors(&self) -> Vec<Vec<usize>> {
        let position: BTreeMap<u32, usize> = self.blocks.iter().enumerate().map(|(i, b)| (b.number, i)).collect();
        let mut predecessors = vec![Vec::new(); self.blocks.len()];
        for (index, block) in self.blocks.iter().enumerate() {
            for successor in &block.successors {
                if let Some(&target) = position.get(successor) {
                    predecessors[target].push(index);
                }
            }
        }
        predecessors
    }

    pub fn next_register(&self) -> u32 {
        self.registers.keys().next_back().map_or(0, |id| id + 1)
    }
}

/// One operand group of an INLINEASM placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsmOperand {
    Def { register: u32, class: String },
    Use { register: u32, class: String },
}

/// A parsed `INLINEASM &"<text>", <flags>, <operand groups...>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineAsm {
    pub text: String,
    pub operands: Vec<AsmOperand>,
}

/// `%12` or `killed %12` or `%12:sreg_32` -> 12.
fn virtual_register(token: &str) -> Option<u32> {
    let token = token.trim();
    let token = token.rsplit(' ').next()?;
    let rest = token.strip_prefix('%')?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

impl InlineAsm {
    /// Parses an INLINEASM line; `None` for other instructions.
    pub fn parse(line: &str) -> Option<Result<InlineAsm, MirParseError>> {
        let rest = line.strip_prefix("INLINEASM &\"")?;
        let end = rest.find('"')?;
        let text = rest[..end].to_string();
        let tokens: Vec<&str> = rest[end + 1..].split(", ").map(str::trim).filter(|t| !t.is_empty()).collect();
        // tokens[0] is `,` leftovers of the string end; the flags word follows.
        let mut tokens = tokens.into_iter().skip_while(|t| *t == ",").peekable();
        let _extra_info = tokens.next();
        let mut operands = Vec::new();
        while let Some(flag) = tokens.next() {
            let kind_and_class = flag.split("/*").nth(1).and_then(|c| c.split("*/").next()).map(str::trim);
            let Some(kind_and_class) = kind_and_class else {
                return Some(Err(MirParseError(format!("INLINEASM operand flag `{flag}` in `{line}`"))));
            };
            let (kind, class) = kind_and_class.split_once(':').unwrap_or((kind_and_class, ""));
            let Some(register) = tokens.next().and_then(virtual_register) else {
                return Some(Err(MirParseError(format!("INLINEASM operand after `{flag}` in `{line}`"))));
            };
            let class = class.to_ascii_lowercase();
            match kind {
                "regdef" | "regdef-ec" => operands.push(AsmOperand::Def { register, class }),
                "reguse" => operands.push(AsmOperand::Use { register, class }),
                other => return Some(Err(MirParseError(format!("unexpected INLINEASM operand kind `{other}`")))),
            }
        }
        Some(Ok(InlineAsm { text, operands }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "--- |\n  ; ModuleID = 'x'\n...\n---\nname:            p\nalignment:       1\nregisters:\n  - { id: 0, class: sgpr_64, preferred-register: '' }\n  - { id: 1, class: vgpr_32, preferred-register: '' }\nliveins:         []\nbody:             |\n  bb.0 (%ir-block.0):\n    successors: %bb.1(0x80000000)\n\n    %0:sgpr_64 = COPY $exec\n    INLINEASM &\"; gpuinstr-intrinsic 0\", 1 /* sideeffect attdialect */, 1835018 /* regdef:VGPR_32 */, def %1, 3276809 /* reguse:SGPR_64 */, %0\n\n  bb.1:\n    SI_RETURN\n\n...\n";

    #[test]
    fn wrapped_register_entries_are_one_entry() {
        let text = SAMPLE.replace(
            "  - { id: 1, class: vgpr_32, preferred-register: '' }\n",
            "  - { id: 1, class: sreg_32_xexec_hi_and_sreg_32_xm0, preferred-register: '', \n      flags: [  ] }\n",
        );
        let module = MirModule::parse(&text).unwrap();
        let function = &module.functions[0];
        assert_eq!(function.registers.get(&1).map(String::as_str), Some("sreg_32_xexec_hi_and_sreg_32_xm0"));
        assert!(!function.middle.iter().any(|l| l.contains("flags")), "{:?}", function.middle);
    }

    #[test]
    fn the_exec_copy_pair_is_read_and_renamed() {
        let text = SAMPLE.replace(
            "liveins:         []\n",
            "liveins:         []\nmachineFunctionInfo:\n  sgprForEXECCopy: '$sgpr100_sgpr101'\n",
        );
        let mut function = MirModule::parse(&text).unwrap().functions.remove(0);
        assert_eq!(function.sgpr_for_exec_copy(), Some(100));
        function.set_sgpr_for_exec_copy(96);
        assert_eq!(function.sgpr_for_exec_copy(), Some(96));
        assert!(function.middle.contains(&"  sgprForEXECCopy: '$sgpr96_sgpr97'".to_string()), "{:?}", function.middle);
        assert_eq!(MirModule::parse(SAMPLE).unwrap().functions[0].sgpr_for_exec_copy(), None);
    }

    #[test]
    fn parses_and_prints_back() {
        let module = MirModule::parse(SAMPLE).unwrap();
        assert_eq!(module.functions.len(), 1);
        let function = &module.functions[0];
        assert_eq!(function.name, "p");
        assert_eq!(function.registers.get(&1).map(String::as_str), Some("vgpr_32"));
        assert_eq!(function.blocks.len(), 2);
        assert_eq!(function.blocks[0].successors, vec![1]);
        assert_eq!(function.predecessors(), vec![vec![], vec![0]]);
        assert_eq!(function.next_register(), 2);
        let again = MirModule::parse(&module.print()).unwrap();
        assert_eq!(again.print(), module.print());
    }

    #[test]
    fn modules_keep_only_the_functions_asked_for() {
        let text = "--- |\n  define void @a() {\n  entry:\n    ret void\n  }\n  define void @b() {\n  entry:\n    ret void\n  }\n...\n---\nname:            a\nregisters:       []\nbody:             |\n  bb.0:\n    SI_RETURN\n\n...\n---\nname:            b\nregisters:       []\nbody:             |\n  bb.0:\n    SI_RETURN\n\n...\n";
        let module = MirModule::parse(text).unwrap();
        let only_b = module.retain(|name| name == "b");
        assert_eq!(only_b.functions.len(), 1);
        assert_eq!(only_b.functions[0].name, "b");
        assert!(!only_b.header.contains("@a()") && only_b.header.contains("@b()"), "{}", only_b.header);
    }

    #[test]
    fn placeholders_parse_into_operands() {
        let module = MirModule::parse(SAMPLE).unwrap();
        let line = &module.functions[0].blocks[0].instructions[1];
        let asm = InlineAsm::parse(line).unwrap().unwrap();
        assert_eq!(asm.text, "; gpuinstr-intrinsic 0");
        assert_eq!(
            asm.operands,
            vec![
                AsmOperand::Def { register: 1, class: "vgpr_32".into() },
                AsmOperand::Use { register: 0, class: "sgpr_64".into() }
            ]
        );
        assert!(InlineAsm::parse("SI_RETURN").is_none());
    }
}
