//! Shared payloads: points of one function that call the same hooks with
//! the same arguments get one compiled payload where it fits them all. It
//! is compiled for the union of their live registers, so it keeps every
//! register any of them needs kept, and the machine-code check that proves
//! it for the union proves it for each point (a subset). LLVM's work then
//! grows with the groups, not with the points: an instruction counter
//! before every instruction compiles one payload per stretch of code whose
//! live registers stay alike.

use std::collections::HashMap;

use gpuinstr_intrinsics::builtins::point_constant;

use crate::stages::liveness::{RegisterFile, UnitSet};
use crate::stages::lower_mir::PayloadSite;
use crate::stages::payload::{HookArgument, PointConstantArgument};

use crate::stages::payload::PayloadPoint;
use crate::stages::payloads::{CodeLine, PayloadCode};

/// How many more VGPRs (SGPRs) a group's union may have live than its
/// sparsest point: the shared payload allocates around the union, so this
/// bounds how much less room any point's payload gets than its own would.
pub const SHARED_EXTRA_VGPRS: usize = 8;
pub const SHARED_EXTRA_SGPRS: usize = 16;

/// How many more registers of each file a group's union may have live
/// than its sparsest member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slack {
    pub vgprs: usize,
    pub sgprs: usize,
}

impl Slack {
    /// Points alike enough to share a payload.
    pub const ALIKE: Slack = Slack { vgprs: SHARED_EXTRA_VGPRS, sgprs: SHARED_EXTRA_SGPRS };
    /// Points whose live VGPRs are the same (SGPRs are copied, not pinned:
    /// the allocator may still spill them).
    pub const SAME_VGPRS: Slack = Slack { vgprs: 0, sgprs: SHARED_EXTRA_SGPRS };
}

/// Points compiled as one payload.
#[derive(Clone, Debug)]
pub struct PayloadGroup {
    /// Point indices, in order; the first one names the group in messages.
    pub members: Vec<usize>,
    /// The members' site with the union of their live registers.
    pub site: PayloadSite,
    sparsest_vgprs: usize,
    sparsest_sgprs: usize,
}

/// What must be equal for two points to share a payload: the function, the
/// calls (but for the values of integer constants and of memory address
/// offsets), the site's registers, kernel and whole-wave copies, and which
/// special registers (SCC, VCC, EXEC, M0, ...) are live, since saving one
/// costs code.
fn sharing_key(point: &PayloadPoint, site: &PayloadSite) -> String {
    let specials: Vec<String> =
        site.live.iter().filter(|u| u.file() == RegisterFile::Special).map(|u| u.to_string()).collect();
    // Integer constants may differ: they become point constants.
    let calls: Vec<String> = point
        .calls
        .iter()
        .map(|call| {
            let arguments: Vec<String> = call
                .arguments
                .iter()
                .map(|argument| match argument {
                    HookArgument::Int(_) => "int".to_string(),
                    other => other.address_shape().unwrap_or_else(|| format!("{other:?}")),
                })
                .collect();
            format!("{}({})", call.hook, arguments.join(", "))
        })
        .collect();
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{}|{}|{:?}|{:?}|{}",
        point.function,
        calls,
        site.sva,
        site.work_item_ids,
        site.hidden_arguments,
        site.max_flat_workgroup_size,
        site.max_vgprs,
        site.unplaced,
        site.parking,
        specials.join(",")
    )
}

/// Groups points (each `sites[i]` for `points[i]`): a point joins the
/// latest group of its key when the union stays within the extra
/// registers allowed, else it starts a new one. Linear in the points.
pub fn group_points(points: &[PayloadPoint], sites: &[PayloadSite], slack: Slack) -> Vec<PayloadGroup> {
    let mut groups: Vec<PayloadGroup> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    for (index, (point, site)) in points.iter().zip(sites).enumerate() {
        let vgprs = site.live.count_in(RegisterFile::Vgpr);
        let sgprs = site.live.count_in(RegisterFile::Sgpr);
        let key = sharing_key(point, site);
        if let Some(group) = open.get(&key).map(|g| &mut groups[*g]) {
            let union: UnitSet = group.site.live.union(&site.live);
            let sparsest_vgprs = group.sparsest_vgprs.min(vgprs);
            let sparsest_sgprs = group.sparsest_sgprs.min(sgprs);
            if union.count_in(RegisterFile::Vgpr) <= sparsest_vgprs + slack.vgprs
                && union.count_in(RegisterFile::Sgpr) <= sparsest_sgprs + slack.sgprs
            {
                group.site.live = union;
                group.sparsest_vgprs = sparsest_vgprs;
                group.sparsest_sgprs = sparsest_sgprs;
                group.members.push(index);
                continue;
            }
        }
        open.insert(key, groups.len());
        groups.push(PayloadGroup {
            members: vec![index],
            site: site.clone(),
            sparsest_vgprs: vgprs,
            sparsest_sgprs: sgprs,
        });
    }
    groups
}

/// The part of an argument that may differ between points sharing a
/// payload: an integer constant, or a memory address's immediate offset.
pub fn constant_part(argument: &HookArgument) -> Option<i64> {
    match argument {
        HookArgument::Int(value) => Some(*value),
        HookArgument::MemoryAddress { offset, .. } | HookArgument::LdsAddress { offset, .. } => Some(*offset),
        HookArgument::BufferAddress(buffer) => Some(buffer.offset),
        _ => None,
    }
}

/// The integer arguments and memory address offsets whose value differs
/// between a group's members (which have alike calls): the shared payload
/// reads them as point constants.
pub fn varying_constants(points: &[PayloadPoint], members: &[usize]) -> Vec<PointConstantArgument> {
    let Some(first) = members.first().map(|m| &points[*m]) else { return Vec::new() };
    let mut varying = Vec::new();
    for (call_index, call) in first.calls.iter().enumerate() {
        for (position, argument) in call.arguments.iter().enumerate() {
            let Some(value) = constant_part(argument) else { continue };
            let (mut min, mut max) = (value, value);
            for member in members {
                if let Some(other) = points[*member]
                    .calls
                    .get(call_index)
                    .and_then(|c| c.arguments.get(position))
                    .and_then(constant_part)
                {
                    min = min.min(other);
                    max = max.max(other);
                }
            }
            if min != max {
                varying.push(PointConstantArgument { call: call_index, argument: position, min, max });
            }
        }
    }
    varying
}

/// A shared payload's code for one of its points: every point-constant
/// symbol replaced by that point's value.
pub fn with_point_constants(
    code: &PayloadCode,
    constants: &[PointConstantArgument],
    point: &PayloadPoint,
) -> Result<PayloadCode, String> {
    if constants.is_empty() {
        return Ok(code.clone());
    }
    let mut words = Vec::with_capacity(2 * constants.len());
    for (slot, constant) in constants.iter().enumerate() {
        let argument = point.calls.get(constant.call).and_then(|c| c.arguments.get(constant.argument));
        let value = match argument.and_then(constant_part) {
            Some(value) => value as u64,
            None => {
                return Err(format!(
                    "argument {} of call {} is {argument:?}, neither an integer nor a memory address",
                    constant.argument, constant.call
                ))
            }
        };
        for (high, word) in [(false, value as u32), (true, (value >> 32) as u32)] {
            let symbol = point_constant::symbol(slot as u32, high);
            words.push((format!("\"{symbol}\""), format!("{word:#x}")));
            words.push((symbol, format!("{word:#x}")));
        }
    }
    let mut out = Vec::with_capacity(code.len());
    for line in code.iter() {
        if !line.contains(point_constant::SYMBOL_PREFIX) {
            out.push(line.clone());
            continue;
        }
        let mut line = line.to_string();
        for (symbol, value) in &words {
            line = line.replace(symbol.as_str(), value);
        }
        if line.contains(point_constant::SYMBOL_PREFIX) {
            return Err(format!("`{line}` names a point constant the payload does not have"));
        }
        out.push(line.into());
    }
    Ok(out.into())
}

/// Gives payload `from`'s local labels the names of payload `to`'s (every
/// local label of a payload is `.Lgpuinstr_payload<index>_...`).
pub fn relabel(code: &[CodeLine], from: usize, to: usize) -> Vec<CodeLine> {
    if from == to {
        return code.to_vec();
    }
    let (old, new) = (format!(".Lgpuinstr_payload{from}_"), format!(".Lgpuinstr_payload{to}_"));
    code.iter().map(|line| if line.contains(&old) { line.replace(&old, &new).into() } else { line.clone() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::liveness::Unit;
    use crate::stages::payload::{HookArgument, HookCall};

    fn point(function: usize, hook: &str) -> PayloadPoint {
        PayloadPoint {
            function,
            instruction: 0,
            calls: vec![HookCall { hook: hook.into(), arguments: vec![HookArgument::Int(1)] }],
        }
    }

    fn site(vgprs: impl IntoIterator<Item = u16>, specials: &[&str]) -> PayloadSite {
        let mut site = PayloadSite { sva: Some(200), ..Default::default() };
        for v in vgprs {
            site.live.insert(Unit::vgpr(v));
        }
        for s in specials {
            site.live.insert(Unit::special(s));
        }
        site
    }

    #[test]
    fn alike_points_share_and_the_union_is_kept() {
        let points = vec![point(0, "count"), point(0, "count"), point(0, "count")];
        let sites = vec![site(0..10, &[]), site(2..12, &[]), site(0..11, &[])];
        let groups = group_points(&points, &sites, Slack::ALIKE);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].members, vec![0, 1, 2]);
        assert_eq!(groups[0].site.live.count_in(RegisterFile::Vgpr), 12);
        for site in &sites {
            assert_eq!(site.live.difference(&groups[0].site.live), UnitSet::EMPTY);
        }
    }

    #[test]
    fn starved_points_share_only_with_the_same_live_vgprs() {
        let points = vec![point(0, "count"); 4];
        let sites = vec![site(0..10, &[]), site(0..10, &[]), site(1..11, &[]), site(0..10, &[])];
        let members: Vec<Vec<usize>> =
            group_points(&points, &sites, Slack::SAME_VGPRS).iter().map(|g| g.members.clone()).collect();
        // Point 2 differs by one VGPR: alone, and point 3 joins the latest
        // group of its key, which is point 2's (the union would grow).
        assert_eq!(members, vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(group_points(&points, &sites, Slack::ALIKE).len(), 1);
    }

    #[test]
    fn different_hooks_functions_specials_and_dense_unions_do_not_share() {
        let points =
            vec![point(0, "count"), point(0, "other"), point(1, "count"), point(0, "count"), point(0, "count")];
        let sites =
            vec![site(0..10, &[]), site(0..10, &[]), site(0..10, &[]), site(0..10, &["SCC"]), site(20..30, &[])];
        let groups = group_points(&points, &sites, Slack::ALIKE);
        let members: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        assert_eq!(members, vec![vec![0], vec![1], vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn points_share_only_the_same_whole_wave_copies_and_sva_problem() {
        let points = vec![point(0, "count"), point(0, "count"), point(0, "count")];
        let mut sites = vec![site(0..10, &[]), site(0..10, &[]), site(0..10, &[])];
        sites[1].unplaced = Some("no register".into());
        sites[2].unplaced = Some("no register".into());
        let members: Vec<Vec<usize>> =
            group_points(&points, &sites, Slack::ALIKE).iter().map(|g| g.members.clone()).collect();
        assert_eq!(members, vec![vec![0], vec![1, 2]]);
        sites[1].unplaced = None;
        sites[0].parking = Some(Default::default());
        let members: Vec<Vec<usize>> =
            group_points(&points, &sites, Slack::ALIKE).iter().map(|g| g.members.clone()).collect();
        assert_eq!(members, vec![vec![0], vec![1], vec![2]]);
    }

    fn call(hook: &str, arguments: Vec<HookArgument>) -> HookCall {
        HookCall { hook: hook.into(), arguments }
    }

    #[test]
    fn differing_integer_constants_share_and_become_point_constants() {
        let with = |opcode: i64, flag: i64, scale: f64| PayloadPoint {
            function: 0,
            instruction: 0,
            calls: vec![
                call("count", vec![HookArgument::Int(1)]),
                call("histogram", vec![HookArgument::Int(opcode), HookArgument::Int(flag), HookArgument::Float(scale)]),
            ],
        };
        let points = vec![with(114, 0, 1.0), with(7, 0, 1.0), with(0x1_0000_0002, 0, 1.0), with(3, 0, 2.0)];
        let sites = vec![site(0..4, &[]); 4];
        let groups = group_points(&points, &sites, Slack::ALIKE);
        let members: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        // A float is not a point constant: the last point compiles apart.
        assert_eq!(members, vec![vec![0, 1, 2], vec![3]]);
        // Only the opcode differs; the flag and `count`'s constant stay folded.
        let varying = varying_constants(&points, &groups[0].members);
        assert_eq!(varying, vec![PointConstantArgument { call: 1, argument: 0, min: 7, max: 0x1_0000_0002 }]);
        assert_eq!(varying_constants(&points, &groups[1].members), vec![]);

        let lines = |texts: &[&str]| -> Vec<CodeLine> { texts.iter().map(|t| CodeLine::from(*t)).collect() };
        let code = lines(&[
            "s_mov_b32 s20, gpuinstr.point.0.lo",
            "s_mov_b32 s21, \"gpuinstr.point.0.hi\"",
            "v_mov_b32_e32 v1, s20",
        ]);
        let code = PayloadCode::from(code);
        let filled = with_point_constants(&code, &varying, &points[2]).unwrap();
        assert_eq!(filled.to_vec(), lines(&["s_mov_b32 s20, 0x2", "s_mov_b32 s21, 0x1", "v_mov_b32_e32 v1, s20"]));
        // Lines without a constant stay shared with the template.
        assert!(std::sync::Arc::ptr_eq(&filled[2], &code[2]));
        assert_eq!(&*with_point_constants(&code, &varying, &points[0]).unwrap()[0], "s_mov_b32 s20, 0x72");
        let unknown = PayloadCode::from(lines(&["s_mov_b32 s20, gpuinstr.point.1.lo"]));
        let error = with_point_constants(&unknown, &varying, &points[0]).unwrap_err();
        assert!(error.contains("gpuinstr.point.1.lo"), "{error}");
    }

    #[test]
    fn memory_address_offsets_share_and_become_point_constants() {
        use gpuinstr_intrinsics::Register;
        let access = |base: u16, offset: i64| PayloadPoint {
            function: 0,
            instruction: 0,
            calls: vec![call(
                "trace",
                vec![
                    HookArgument::Int(0x100),
                    HookArgument::MemoryAddress { base: Register::Vgpr(base), index: None, offset },
                ],
            )],
        };
        let points = vec![access(2, 16), access(2, -8), access(2, 16), access(4, 16)];
        let sites = vec![site(0..6, &[]); 4];
        let groups = group_points(&points, &sites, Slack::ALIKE);
        let members: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        // Another base register is another payload; another offset is not.
        assert_eq!(members, vec![vec![0, 1, 2], vec![3]]);
        let varying = varying_constants(&points, &groups[0].members);
        assert_eq!(varying, vec![PointConstantArgument { call: 0, argument: 1, min: -8, max: 16 }]);
        let code = PayloadCode::from(vec![CodeLine::from("s_mov_b32 s4, gpuinstr.point.0.lo")]);
        let filled = |point: &PayloadPoint| with_point_constants(&code, &varying, point).unwrap()[0].to_string();
        assert_eq!(filled(&points[1]), "s_mov_b32 s4, 0xfffffff8");
        assert_eq!(filled(&points[0]), "s_mov_b32 s4, 0x10");
    }

    #[test]
    fn relabelling_touches_only_the_payloads_labels() {
        let code: Vec<CodeLine> = [
            "s_cbranch_scc1 .Lgpuinstr_payload1_BB0_2",
            ".Lgpuinstr_payload1_end:",
            "s_nop 0 ; .Lgpuinstr_payload12_end",
        ]
        .map(CodeLine::from)
        .to_vec();
        let relabelled: Vec<String> = relabel(&code, 1, 7).iter().map(|l| l.to_string()).collect();
        assert_eq!(
            relabelled,
            [".Lgpuinstr_payload7_BB0_2", ".Lgpuinstr_payload7_end:", "s_nop 0 ; .Lgpuinstr_payload12_end"]
                .iter()
                .enumerate()
                .map(|(i, t)| if i == 0 { format!("s_cbranch_scc1 {t}") } else { t.to_string() })
                .collect::<Vec<_>>()
        );
        // Lines without its labels stay shared.
        assert!(std::sync::Arc::ptr_eq(&relabel(&code, 1, 7)[2], &code[2]));
    }
}
