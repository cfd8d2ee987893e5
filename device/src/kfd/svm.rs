//! Shared virtual memory (`AMDKFD_IOC_SVM`): ranges of the process's own
//! memory that the GPU reaches at their host addresses, with the
//! attributes the runtime sets and reads back. XNACK is off, so the GPU
//! reaches a range only once it is given access (or access in place); the
//! device's memory is the host's, so where data should live (preferred and
//! prefetch locations) is recorded and reported, never acted on.
//!
//! HIP's managed memory (`hipMallocManaged`, `__managed__` globals) and,
//! from ROCr 6.2's thunk on, registered host memory go through these
//! ranges once the node advertises the SVM API, as every MI300 system's
//! kernel driver does.

use std::collections::BTreeMap;

use super::abi::{
    SvmAttribute, SVM_ATTR_ACCESS, SVM_ATTR_ACCESS_IN_PLACE, SVM_ATTR_CLR_FLAGS, SVM_ATTR_GRANULARITY,
    SVM_ATTR_NO_ACCESS, SVM_ATTR_PREFERRED_LOC, SVM_ATTR_PREFETCH_LOC, SVM_ATTR_SET_FLAGS, SVM_FLAG_COHERENT,
    SVM_FLAG_HOST_ACCESS, SVM_LOCATION_SYSMEM, SVM_LOCATION_UNDEFINED,
};
use super::Errno;
use crate::topology::GPU_ID;

/// The kernel driver's default migration granularity: 2^9 pages.
const DEFAULT_GRANULARITY: u32 = 9;
/// Its largest.
const MAX_GRANULARITY: u32 = 0x3f;

/// How the GPU reaches a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GpuAccess {
    None,
    /// Mapped, data may migrate (here it never does).
    Mapped,
    /// Mapped where the data is.
    InPlace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Attributes {
    preferred: u32,
    prefetch: u32,
    flags: u32,
    granularity: u32,
    access: GpuAccess,
}

/// What a range the runtime never set has (the kernel driver's defaults).
impl Default for Attributes {
    fn default() -> Attributes {
        Attributes {
            preferred: SVM_LOCATION_UNDEFINED,
            prefetch: SVM_LOCATION_UNDEFINED,
            flags: SVM_FLAG_HOST_ACCESS | SVM_FLAG_COHERENT,
            granularity: DEFAULT_GRANULARITY,
            access: GpuAccess::None,
        }
    }
}

impl Attributes {
    fn apply(&mut self, attribute: &SvmAttribute) {
        match attribute.kind {
            SVM_ATTR_PREFERRED_LOC => self.preferred = attribute.value,
            SVM_ATTR_PREFETCH_LOC => self.prefetch = attribute.value,
            SVM_ATTR_ACCESS => self.access = GpuAccess::Mapped,
            SVM_ATTR_ACCESS_IN_PLACE => self.access = GpuAccess::InPlace,
            SVM_ATTR_NO_ACCESS => self.access = GpuAccess::None,
            SVM_ATTR_SET_FLAGS => self.flags |= attribute.value,
            SVM_ATTR_CLR_FLAGS => self.flags &= !attribute.value,
            SVM_ATTR_GRANULARITY => self.granularity = attribute.value.min(MAX_GRANULARITY),
            _ => unreachable!("attributes are checked before they are applied"),
        }
    }
}

/// The process's SVM ranges: disjoint, keyed by start (byte addresses).
#[derive(Debug, Default)]
pub struct SvmRanges {
    ranges: BTreeMap<u64, (u64, Attributes)>,
}

/// Whether the driver takes `attribute` in a set (`get` false) or a get.
fn check(attribute: &SvmAttribute, get: bool) -> Result<(), Errno> {
    let value = attribute.value;
    let accepted = match attribute.kind {
        SVM_ATTR_PREFERRED_LOC => get || [SVM_LOCATION_SYSMEM, SVM_LOCATION_UNDEFINED, GPU_ID].contains(&value),
        SVM_ATTR_PREFETCH_LOC => get || [SVM_LOCATION_SYSMEM, GPU_ID].contains(&value),
        SVM_ATTR_ACCESS => value == GPU_ID,
        SVM_ATTR_ACCESS_IN_PLACE | SVM_ATTR_NO_ACCESS => !get && value == GPU_ID,
        SVM_ATTR_SET_FLAGS | SVM_ATTR_CLR_FLAGS | SVM_ATTR_GRANULARITY => true,
        _ => false,
    };
    accepted.then_some(()).ok_or(Errno::INVAL)
}

impl SvmRanges {
    /// Sets `attributes`, in order, on [start, end): ranges there are split
    /// at its ends, and gaps become ranges with the defaults first.
    pub fn set(&mut self, start: u64, end: u64, attributes: &[SvmAttribute]) -> Result<(), Errno> {
        attributes.iter().try_for_each(|a| check(a, false))?;
        self.split_at(start);
        self.split_at(end);
        let existing: Vec<(u64, u64)> = self.ranges.range(start..end).map(|(&s, &(e, _))| (s, e)).collect();
        let mut cursor = start;
        for (range_start, range_end) in existing {
            if cursor < range_start {
                self.ranges.insert(cursor, (range_start, Attributes::default()));
            }
            cursor = range_end;
        }
        if cursor < end {
            self.ranges.insert(cursor, (end, Attributes::default()));
        }
        for (_, (_, range)) in self.ranges.range_mut(start..end) {
            attributes.iter().for_each(|a| range.apply(a));
        }
        Ok(())
    }

    /// Answers `attributes` for [start, end) in place, over the ranges
    /// there (the defaults where there are none): a location all share or
    /// none, the flags all have (SET_FLAGS) and none has (CLR_FLAGS), the
    /// finest granularity; an ACCESS query's kind becomes how all ranges
    /// are reached (ACCESS, ACCESS_IN_PLACE, else NO_ACCESS).
    pub fn get(&self, start: u64, end: u64, attributes: &mut [SvmAttribute]) -> Result<(), Errno> {
        attributes.iter().try_for_each(|a| check(a, true))?;
        let mut covered: Vec<Attributes> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(range_end, _))| range_end > start)
            .map(|(_, &(_, range))| range)
            .collect();
        if covered.is_empty() {
            covered.push(Attributes::default());
        }
        let common = |location: fn(&Attributes) -> u32| {
            let first = location(&covered[0]);
            if covered.iter().all(|r| location(r) == first) {
                first
            } else {
                SVM_LOCATION_UNDEFINED
            }
        };
        for attribute in attributes.iter_mut() {
            match attribute.kind {
                SVM_ATTR_PREFERRED_LOC => attribute.value = common(|r| r.preferred),
                SVM_ATTR_PREFETCH_LOC => attribute.value = common(|r| r.prefetch),
                SVM_ATTR_ACCESS => {
                    attribute.kind = if covered.iter().all(|r| r.access == GpuAccess::Mapped) {
                        SVM_ATTR_ACCESS
                    } else if covered.iter().all(|r| r.access == GpuAccess::InPlace) {
                        SVM_ATTR_ACCESS_IN_PLACE
                    } else {
                        SVM_ATTR_NO_ACCESS
                    }
                }
                SVM_ATTR_SET_FLAGS => attribute.value = covered.iter().fold(!0, |all, r| all & r.flags),
                SVM_ATTR_CLR_FLAGS => attribute.value = !covered.iter().fold(0, |any, r| any | r.flags),
                SVM_ATTR_GRANULARITY => attribute.value = covered.iter().map(|r| r.granularity).min().unwrap_or(0),
                _ => unreachable!("checked above"),
            }
        }
        Ok(())
    }

    /// Forgets [start, end): the driver's own buffer now lives there (the
    /// kernel driver drops a range when its memory is unmapped, which
    /// this device does not see).
    pub fn remove(&mut self, start: u64, end: u64) {
        self.split_at(start);
        self.split_at(end);
        let inside: Vec<u64> = self.ranges.range(start..end).map(|(&s, _)| s).collect();
        for range_start in inside {
            self.ranges.remove(&range_start);
        }
    }

    /// The ranges the GPU reaches now, (start, end), adjacent ones merged.
    pub fn accessible(&self) -> Vec<(u64, u64)> {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (&start, &(end, range)) in &self.ranges {
            if range.access == GpuAccess::None {
                continue;
            }
            match merged.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => merged.push((start, end)),
            }
        }
        merged
    }

    /// Makes `at` a boundary between ranges.
    fn split_at(&mut self, at: u64) {
        let Some((&start, &(end, range))) = self.ranges.range(..at).next_back() else { return };
        if end > at {
            self.ranges.insert(start, (at, range));
            self.ranges.insert(at, (end, range));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(kind: u32, value: u32) -> SvmAttribute {
        SvmAttribute { kind, value }
    }

    #[test]
    fn access_makes_ranges_reachable_and_splits_where_it_ends() {
        let mut svm = SvmRanges::default();
        svm.set(0x10000, 0x20000, &[attribute(SVM_ATTR_ACCESS, GPU_ID)]).unwrap();
        svm.set(0x18000, 0x30000, &[attribute(SVM_ATTR_NO_ACCESS, GPU_ID)]).unwrap();
        assert_eq!(svm.accessible(), vec![(0x10000, 0x18000)]);
        svm.set(0x18000, 0x20000, &[attribute(SVM_ATTR_ACCESS_IN_PLACE, GPU_ID)]).unwrap();
        assert_eq!(svm.accessible(), vec![(0x10000, 0x20000)], "adjacent ranges merge");

        // Over both: mixed access reads as none; one kind reads as that kind.
        let mut query = [attribute(SVM_ATTR_ACCESS, GPU_ID)];
        svm.get(0x10000, 0x20000, &mut query).unwrap();
        assert_eq!(query[0], attribute(SVM_ATTR_NO_ACCESS, GPU_ID));
        let mut query = [attribute(SVM_ATTR_ACCESS, GPU_ID)];
        svm.get(0x18000, 0x20000, &mut query).unwrap();
        assert_eq!(query[0], attribute(SVM_ATTR_ACCESS_IN_PLACE, GPU_ID));

        svm.remove(0x14000, 0x1c000);
        assert_eq!(svm.accessible(), vec![(0x10000, 0x14000), (0x1c000, 0x20000)]);
    }

    #[test]
    fn gets_combine_what_the_ranges_share() {
        let mut svm = SvmRanges::default();
        let set = [
            attribute(SVM_ATTR_PREFERRED_LOC, GPU_ID),
            attribute(SVM_ATTR_SET_FLAGS, 0x20),
            attribute(SVM_ATTR_CLR_FLAGS, SVM_FLAG_COHERENT),
            attribute(SVM_ATTR_GRANULARITY, 0xff),
        ];
        svm.set(0x1000, 0x3000, &set).unwrap();
        svm.set(0x3000, 0x4000, &[attribute(SVM_ATTR_PREFETCH_LOC, SVM_LOCATION_SYSMEM)]).unwrap();
        let mut query = [
            attribute(SVM_ATTR_PREFERRED_LOC, 0),
            attribute(SVM_ATTR_PREFETCH_LOC, 0),
            attribute(SVM_ATTR_SET_FLAGS, 0),
            attribute(SVM_ATTR_CLR_FLAGS, 0),
            attribute(SVM_ATTR_GRANULARITY, 0),
        ];
        svm.get(0x1000, 0x2000, &mut query).unwrap();
        let values: Vec<u32> = query.iter().map(|a| a.value).collect();
        assert_eq!(values, [GPU_ID, SVM_LOCATION_UNDEFINED, 0x21, !0x21, 0x3f]);

        svm.get(0x1000, 0x4000, &mut query).unwrap();
        let values: Vec<u32> = query.iter().map(|a| a.value).collect();
        let (all, any) = (SVM_FLAG_HOST_ACCESS, SVM_FLAG_HOST_ACCESS | SVM_FLAG_COHERENT | 0x20);
        assert_eq!(values, [SVM_LOCATION_UNDEFINED, SVM_LOCATION_UNDEFINED, all, !any, 0x3f.min(DEFAULT_GRANULARITY)]);

        // Where nothing was set: the defaults.
        svm.get(0x8000, 0x9000, &mut query).unwrap();
        assert_eq!(query[2].value, SVM_FLAG_HOST_ACCESS | SVM_FLAG_COHERENT);
    }

    #[test]
    fn unknown_gpus_and_kinds_are_refused() {
        let mut svm = SvmRanges::default();
        assert_eq!(svm.set(0x1000, 0x2000, &[attribute(SVM_ATTR_ACCESS, GPU_ID + 1)]), Err(Errno::INVAL));
        assert_eq!(svm.set(0x1000, 0x2000, &[attribute(8, 0)]), Err(Errno::INVAL));
        assert_eq!(
            svm.set(0x1000, 0x2000, &[attribute(SVM_ATTR_PREFETCH_LOC, SVM_LOCATION_UNDEFINED)]),
            Err(Errno::INVAL)
        );
        let mut query = [attribute(SVM_ATTR_NO_ACCESS, GPU_ID)];
        assert_eq!(svm.get(0x1000, 0x2000, &mut query), Err(Errno::INVAL));
        assert!(svm.accessible().is_empty(), "a refused set changes nothing");
    }
}
