//! Vector memory: FLAT (global, LDS or scratch by aperture), GLOBAL and
//! MUBUF (buffer resources, including the swizzled private segment buffer
//! scratch goes through) loads, stores and atomics. Memory completes at
//! once; lanes access memory in lane order.

use super::lds::lds_write;
use super::{Context, Handler};
use crate::access::Space;
use crate::error::Fault;
use crate::memory::{APERTURE_SIZE, PRIVATE_APERTURE, SHARED_APERTURE};
use crate::operands::{Operand, FLAT_SCRATCH, M0};
use crate::program::Inst;
use crate::wave::active_lanes;

/// Where one lane's access goes.
#[derive(Clone, Copy, Debug)]
enum Place {
    Global(u64),
    Lds(u64),
    /// Out of a buffer's range: loads read 0, stores and atomics do nothing.
    Nowhere,
}

/// A private (scratch) byte offset of a lane, as swizzled into the wave's
/// scratch: dwords of the 64 lanes interleave.
pub fn swizzled_private(scratch_base: u64, private_offset: u64, lane: usize) -> u64 {
    scratch_base + (private_offset / 4) * 256 + lane as u64 * 4 + private_offset % 4
}

fn flat_place(c: &Context<'_>, address: u64, lane: usize) -> Place {
    if (SHARED_APERTURE..SHARED_APERTURE + APERTURE_SIZE).contains(&address) {
        Place::Lds(address - SHARED_APERTURE)
    } else if (PRIVATE_APERTURE..PRIVATE_APERTURE + APERTURE_SIZE).contains(&address) {
        Place::Global(swizzled_private(c.wave.scratch_base, address - PRIVATE_APERTURE, lane))
    } else {
        Place::Global(address)
    }
}

fn read(c: &mut Context<'_>, place: Place, out: &mut [u8]) -> Result<(), Fault> {
    match place {
        Place::Global(address) => c.memory.read(address, out),
        Place::Lds(offset) => super::lds::lds_read(c, offset, out),
        Place::Nowhere => {
            out.fill(0);
            Ok(())
        }
    }
}

fn write(c: &mut Context<'_>, place: Place, data: &[u8]) -> Result<(), Fault> {
    match place {
        Place::Global(address) => c.memory.write(address, data),
        Place::Lds(offset) => super::lds::lds_write(c, offset, data),
        Place::Nowhere => Ok(()),
    }
}

/// What a load or store moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Width {
    Dwords(u32),
    Byte {
        signed: bool,
    },
    Short {
        signed: bool,
    },
    /// 16-bit load into one half of the register, the other kept.
    D16 {
        bytes: u32,
        signed: bool,
        high: bool,
    },
}

fn width(name: &str) -> Option<Width> {
    let op = name.split("_LOAD_").nth(1).or_else(|| name.split("_STORE_").nth(1))?;
    // Address forms: _SADDR (an SGPR base), and for scratch _SVS (gfx940+:
    // a VGPR and an SGPR) and _ST (the offset alone).
    let op = ["_SADDR", "_SVS", "_ST"].iter().find_map(|s| op.strip_suffix(s)).unwrap_or(op);
    let op =
        ["_OFFEN", "_OFFSET", "_IDXEN", "_BOTHEN", "_ADDR64"].iter().find_map(|s| op.strip_suffix(s)).unwrap_or(op);
    // Buffer loads into LDS (`lds`) move the same widths.
    width_of(op.strip_suffix("_LDS").unwrap_or(op))
}

fn width_of(op: &str) -> Option<Width> {
    Some(match op {
        "DWORD" => Width::Dwords(1),
        "DWORDX2" => Width::Dwords(2),
        "DWORDX3" => Width::Dwords(3),
        "DWORDX4" => Width::Dwords(4),
        "UBYTE" | "BYTE" => Width::Byte { signed: false },
        "SBYTE" => Width::Byte { signed: true },
        "USHORT" | "SHORT" => Width::Short { signed: false },
        "SSHORT" => Width::Short { signed: true },
        "UBYTE_D16" => Width::D16 { bytes: 1, signed: false, high: false },
        "UBYTE_D16_HI" | "BYTE_D16_HI" => Width::D16 { bytes: 1, signed: false, high: true },
        "SBYTE_D16" => Width::D16 { bytes: 1, signed: true, high: false },
        "SBYTE_D16_HI" => Width::D16 { bytes: 1, signed: true, high: true },
        "SHORT_D16" => Width::D16 { bytes: 2, signed: false, high: false },
        "SHORT_D16_HI" => Width::D16 { bytes: 2, signed: false, high: true },
        _ => return None,
    })
}

/// The places of an access's dwords (swizzled scratch keeps a lane's dwords
/// apart, so each is placed on its own).
fn dword_places(width: Width, place_of: impl Fn(u64) -> Place) -> Vec<Place> {
    match width {
        Width::Dwords(n) => (0..u64::from(n)).map(|k| place_of(4 * k)).collect(),
        _ => vec![place_of(0)],
    }
}

fn load_lane(c: &mut Context<'_>, i: &Inst, lane: usize, places: &[Place], width: Width) -> Result<(), Fault> {
    let dst = i.defs[0];
    let place = places[0];
    match width {
        Width::Dwords(_) => {
            for (k, place) in places.iter().enumerate() {
                let mut bytes = [0u8; 4];
                read(c, *place, &mut bytes)?;
                c.wave.write_lane32_at(&dst, lane, k, u32::from_le_bytes(bytes));
            }
        }
        Width::Byte { signed } => {
            let mut b = [0u8; 1];
            read(c, place, &mut b)?;
            let v = if signed { b[0] as i8 as i32 as u32 } else { u32::from(b[0]) };
            c.wave.write_lane32(&dst, lane, v);
        }
        Width::Short { signed } => {
            let mut b = [0u8; 2];
            read(c, place, &mut b)?;
            let h = u16::from_le_bytes(b);
            let v = if signed { h as i16 as i32 as u32 } else { u32::from(h) };
            c.wave.write_lane32(&dst, lane, v);
        }
        Width::D16 { bytes, signed, high } => {
            let mut b = [0u8; 2];
            read(c, place, &mut b[..bytes as usize])?;
            let h = if bytes == 1 {
                if signed {
                    b[0] as i8 as i16 as u16
                } else {
                    u16::from(b[0])
                }
            } else {
                u16::from_le_bytes(b)
            };
            let old = if c.machine.d16_zeroes_other_half { 0 } else { c.wave.lane32(&dst, lane) };
            let v = if high { (old & 0xffff) | (u32::from(h) << 16) } else { (old & 0xffff_0000) | u32::from(h) };
            c.wave.write_lane32(&dst, lane, v);
        }
    }
    Ok(())
}

fn store_lane(c: &mut Context<'_>, data: &Operand, lane: usize, places: &[Place], width: Width) -> Result<(), Fault> {
    let place = places[0];
    match width {
        Width::Dwords(_) => {
            for (k, place) in places.iter().enumerate() {
                let v = c.wave.lane32_at(data, lane, k);
                write(c, *place, &v.to_le_bytes())?;
            }
        }
        Width::Byte { .. } => {
            let v = c.wave.lane32(data, lane);
            write(c, place, &[v as u8])?;
        }
        Width::Short { .. } => {
            let v = c.wave.lane32(data, lane);
            write(c, place, &(v as u16).to_le_bytes())?;
        }
        Width::D16 { bytes, high, .. } => {
            let v = c.wave.lane32(data, lane);
            let half = if high { (v >> 16) as u16 } else { v as u16 };
            write(c, place, &half.to_le_bytes()[..bytes as usize])?;
        }
    }
    Ok(())
}

/// Per-lane addresses of a FLAT or GLOBAL instruction. `srcs` holds the
/// address operands in MC order: vaddr (64-bit), or saddr then vaddr
/// (32-bit offset) for the `_SADDR` forms of loads; stores and atomics put
/// the data between.
struct FlatAddressing {
    vaddr: Operand,
    saddr: Option<Operand>,
    offset: i64,
    flat: bool,
}

fn flat_addressing(i: &Inst, load: bool) -> FlatAddressing {
    let saddr_form = i.name.contains("_SADDR");
    let flat = i.name.starts_with("FLAT_");
    let (vaddr, saddr) = match (load, saddr_form) {
        (true, true) => (i.srcs[1].operand, Some(i.srcs[0].operand)),
        (true, false) => (i.srcs[0].operand, None),
        (false, true) => (i.srcs[0].operand, Some(i.srcs[2].operand)),
        (false, false) => (i.srcs[0].operand, None),
    };
    let offset = if flat { i.imm(0) } else { segment_offset(i.imm(0)) };
    FlatAddressing { vaddr, saddr, offset, flat }
}

/// GLOBAL and SCRATCH offsets are 13-bit signed on GFX9; LLVM 15's decoder
/// leaves the raw field (`offset:-8` decodes as 8184). FLAT's are unsigned.
fn segment_offset(raw: i64) -> i64 {
    (raw << 51) >> 51
}

fn flat_lane_places(c: &Context<'_>, a: &FlatAddressing, lane: usize, width: Width) -> Vec<Place> {
    let address = flat_lane_address(c, a, lane);
    dword_places(
        width,
        |offset| {
            if a.flat {
                flat_place(c, address + offset, lane)
            } else {
                Place::Global(address + offset)
            }
        },
    )
}

fn flat_lane_place(c: &Context<'_>, a: &FlatAddressing, lane: usize) -> Place {
    let address = flat_lane_address(c, a, lane);
    if a.flat {
        flat_place(c, address, lane)
    } else {
        Place::Global(address)
    }
}

fn flat_lane_address(c: &Context<'_>, a: &FlatAddressing, lane: usize) -> u64 {
    match a.saddr {
        Some(saddr) => {
            let base = c.wave.scalar64(&saddr);
            base.wrapping_add(u64::from(c.wave.lane32(&a.vaddr, lane)))
        }
        None => c.wave.lane64(&a.vaddr, lane),
    }
    .wrapping_add(a.offset as u64)
}

fn record_access(c: &mut Context<'_>, a: &FlatAddressing, lane: usize, bytes: u64) {
    if c.accessed.is_some() {
        let address = flat_lane_address(c, a, lane);
        c.log_access(lane, address, if a.flat { Space::Flat } else { Space::Global }, bytes);
    }
}

/// Logs a buffer access by where its first dword goes (a lane out of the
/// buffer's range accesses nothing); not one through the private segment
/// buffer (a resource with `add_tid`: scratch, as SCRATCH instructions'
/// accesses are not logged).
fn record_buffer_access(c: &mut Context<'_>, i: &Inst, first: usize, lane: usize, places: &[Place], bytes: u64) {
    if c.accessed.is_none() {
        return;
    }
    let name = i.name.as_str();
    let has_vaddr = ["_OFFEN", "_IDXEN", "_BOTHEN"].iter().any(|form| name.contains(form));
    if resource(c, &i.srcs[first + usize::from(has_vaddr)].operand).add_tid {
        return;
    }
    if let Some(Place::Global(address)) = places.first() {
        c.log_access(lane, *address, Space::Buffer, bytes);
    }
}

fn flat_load(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let width = width(&i.name).ok_or(Fault::Unimplemented)?;
    let a = flat_addressing(i, true);
    for lane in active_lanes(c.wave.exec()) {
        record_access(c, &a, lane, width_bytes(width));
        let places = flat_lane_places(c, &a, lane, width);
        load_lane(c, i, lane, &places, width).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

fn flat_store(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let width = width(&i.name).ok_or(Fault::Unimplemented)?;
    let a = flat_addressing(i, false);
    let data = i.srcs[1].operand;
    for lane in active_lanes(c.wave.exec()) {
        record_access(c, &a, lane, width_bytes(width));
        let places = flat_lane_places(c, &a, lane, width);
        store_lane(c, &data, lane, &places, width).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

/// The value an atomic leaves in memory, given the old value and the data
/// (`data[1]` is the compare value of cmpswap).
pub(super) fn atomic_result(op: &str, old: u64, data: [u64; 2], wide: bool) -> Option<u64> {
    let (o32, d32) = (old as u32, data[0] as u32);
    Some(if wide {
        match op {
            "SWAP" => data[0],
            "CMPSWAP" => {
                if old == data[1] {
                    data[0]
                } else {
                    old
                }
            }
            "ADD" => old.wrapping_add(data[0]),
            "SUB" => old.wrapping_sub(data[0]),
            "SMIN" => (old as i64).min(data[0] as i64) as u64,
            "UMIN" => old.min(data[0]),
            "SMAX" => (old as i64).max(data[0] as i64) as u64,
            "UMAX" => old.max(data[0]),
            "AND" => old & data[0],
            "OR" => old | data[0],
            "XOR" => old ^ data[0],
            "INC" => {
                if old >= data[0] {
                    0
                } else {
                    old + 1
                }
            }
            "DEC" => {
                if old == 0 || old > data[0] {
                    data[0]
                } else {
                    old - 1
                }
            }
            "ADD_F64" => (f64::from_bits(old) + f64::from_bits(data[0])).to_bits(),
            "MIN_F64" => f64::from_bits(old).min(f64::from_bits(data[0])).to_bits(),
            "MAX_F64" => f64::from_bits(old).max(f64::from_bits(data[0])).to_bits(),
            _ => return None,
        }
    } else {
        u64::from(match op {
            "SWAP" => d32,
            "CMPSWAP" => {
                if o32 == data[1] as u32 {
                    d32
                } else {
                    o32
                }
            }
            "ADD" => o32.wrapping_add(d32),
            "SUB" => o32.wrapping_sub(d32),
            "SMIN" => (o32 as i32).min(d32 as i32) as u32,
            "UMIN" => o32.min(d32),
            "SMAX" => (o32 as i32).max(d32 as i32) as u32,
            "UMAX" => o32.max(d32),
            "AND" => o32 & d32,
            "OR" => o32 | d32,
            "XOR" => o32 ^ d32,
            "INC" => {
                if o32 >= d32 {
                    0
                } else {
                    o32 + 1
                }
            }
            "DEC" => {
                if o32 == 0 || o32 > d32 {
                    d32
                } else {
                    o32 - 1
                }
            }
            "ADD_F32" => (f32::from_bits(o32) + f32::from_bits(d32)).to_bits(),
            "PK_ADD_F16" => {
                let add = |shift: u32| {
                    let a = half::f16::from_bits((o32 >> shift) as u16);
                    let b = half::f16::from_bits((d32 >> shift) as u16);
                    u32::from(half::f16::from_f32(f32::from(a) + f32::from(b)).to_bits()) << shift
                };
                add(0) | add(16)
            }
            // Rounded to nearest even (an f32 sum of two bf16 is exact
            // enough that rounding it again is the single rounding).
            "PK_ADD_BF16" => {
                let add = |shift: u32| {
                    let a = half::bf16::from_bits((o32 >> shift) as u16);
                    let b = half::bf16::from_bits((d32 >> shift) as u16);
                    u32::from(half::bf16::from_f32(f32::from(a) + f32::from(b)).to_bits()) << shift
                };
                add(0) | add(16)
            }
            _ => return None,
        })
    })
}

/// `GLOBAL_ATOMIC_ADD_F32_SADDR_RTN` -> ("ADD_F32", wide, returns).
fn atomic_kind(name: &str) -> Option<(&str, bool, bool)> {
    let rest = name.split("_ATOMIC_").nth(1)?;
    let returns = rest.contains("_RTN");
    let mut op = rest;
    for suffix in ["_RTN", "_SADDR", "_OFFEN", "_OFFSET", "_IDXEN", "_BOTHEN", "_ADDR64"] {
        op = op.trim_end_matches(suffix);
        if let Some((head, _)) = op.split_once(suffix) {
            op = head;
        }
    }
    let (op, wide) = match op.strip_suffix("_X2") {
        Some(op) => (op, true),
        None => (op, op.ends_with("_F64")),
    };
    atomic_result(op, 0, [0, 0], wide)?;
    Some((op, wide, returns))
}

fn atomic_lane(c: &mut Context<'_>, i: &Inst, data: &Operand, lane: usize, place: Place) -> Result<(), Fault> {
    let (op, wide, returns) = atomic_kind(&i.name).ok_or(Fault::Unimplemented)?;
    let dwords = if wide { 2 } else { 1 };
    let read_data = |k: usize| {
        if wide {
            u64::from(c.wave.lane32_at(data, lane, 2 * k)) | (u64::from(c.wave.lane32_at(data, lane, 2 * k + 1)) << 32)
        } else {
            u64::from(c.wave.lane32_at(data, lane, k))
        }
    };
    let operands = [read_data(0), if op == "CMPSWAP" { read_data(1) } else { 0 }];
    let mut bytes = [0u8; 8];
    read(c, place, &mut bytes[..dwords * 4])?;
    let old = u64::from_le_bytes(bytes);
    let new = atomic_result(op, old, operands, wide).ok_or(Fault::Unimplemented)?;
    if !matches!(place, Place::Nowhere) {
        write(c, place, &new.to_le_bytes()[..dwords * 4])?;
    }
    if returns {
        c.wave.write_lane32_at(&i.defs[0], lane, 0, old as u32);
        if wide {
            c.wave.write_lane32_at(&i.defs[0], lane, 1, (old >> 32) as u32);
        }
    }
    Ok(())
}

fn flat_atomic(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let a = flat_addressing(i, false);
    let data = i.srcs[1].operand;
    let (_, wide, _) = atomic_kind(&i.name).ok_or(Fault::Unimplemented)?;
    for lane in active_lanes(c.wave.exec()) {
        record_access(c, &a, lane, if wide { 8 } else { 4 });
        let place = flat_lane_place(c, &a, lane);
        atomic_lane(c, i, &data, lane, place).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

/// The operands of a SCRATCH instruction: `(vaddr, vdata, saddr)`. LLVM's
/// forms: plain (a VGPR offset), `_SADDR` (an SGPR), `_SVS` (gfx940+: a VGPR
/// plus an SGPR) and `_ST` (the instruction offset alone). Loads have
/// `srcs` = [vaddr?, saddr?]; stores [vdata, vaddr?, saddr?] (MC puts a
/// scratch store's data first, unlike a global store's, though the
/// assembly writes `vaddr, vdata`).
fn scratch_operands(i: &Inst, load: bool) -> (Option<Operand>, Option<Operand>, Option<Operand>) {
    let (vaddr, saddr) = if i.name.ends_with("_SADDR") {
        (false, true)
    } else if i.name.ends_with("_SVS") {
        (true, true)
    } else if i.name.ends_with("_ST") {
        (false, false)
    } else {
        (true, false)
    };
    let mut srcs = i.srcs.iter().map(|s| s.operand);
    let data = if load { None } else { srcs.next() };
    let vaddr = if vaddr { srcs.next() } else { None };
    let saddr = if saddr { srcs.next() } else { None };
    (vaddr, data, saddr)
}

/// A lane's private offset (VGPR, SGPR, both or neither, plus the
/// instruction offset), swizzled into the wave's scratch at FLAT_SCRATCH.
fn scratch_places(c: &Context<'_>, i: &Inst, lane: usize, load: bool, width: Width) -> Vec<Place> {
    let (vaddr, _, saddr) = scratch_operands(i, load);
    let mut base = 0u32;
    if let Some(vaddr) = vaddr {
        base = base.wrapping_add(c.wave.lane32(&vaddr, lane));
    }
    if let Some(saddr) = saddr {
        base = base.wrapping_add(c.wave.scalar32(&saddr));
    }
    let private = u64::from(base.wrapping_add(segment_offset(i.imm(0)) as u32));
    let flat_scratch = c.wave.scalar64(&Operand::Scalar { index: FLAT_SCRATCH, dwords: 2 });
    dword_places(width, |offset| Place::Global(swizzled_private(flat_scratch, private + offset, lane)))
}

fn scratch_load(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let width = width(&i.name).ok_or(Fault::Unimplemented)?;
    for lane in active_lanes(c.wave.exec()) {
        let places = scratch_places(c, i, lane, true, width);
        load_lane(c, i, lane, &places, width).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

fn scratch_store(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let width = width(&i.name).ok_or(Fault::Unimplemented)?;
    let (_, data, _) = scratch_operands(i, false);
    let data = data.ok_or(Fault::Unimplemented)?;
    for lane in active_lanes(c.wave.exec()) {
        let places = scratch_places(c, i, lane, false, width);
        store_lane(c, &data, lane, &places, width).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

/// A buffer resource (V#) as GFX9 lays it out.
struct Resource {
    base: u64,
    stride: u64,
    records: u64,
    swizzle: bool,
    element_size: u64,
    index_stride: u64,
    add_tid: bool,
}

fn resource(c: &Context<'_>, operand: &Operand) -> Resource {
    let w = |k| c.wave.scalar_dword(operand, k);
    let (w1, w3) = (w(1), w(3));
    Resource {
        base: u64::from(w(0)) | (u64::from(w1 & 0xffff) << 32),
        stride: u64::from((w1 >> 16) & 0x3fff),
        records: u64::from(w(2)),
        swizzle: w1 >> 31 != 0,
        element_size: 2 << ((w3 >> 19) & 3),
        index_stride: 8 << ((w3 >> 21) & 3),
        add_tid: (w3 >> 23) & 1 != 0,
    }
}

/// MUBUF operands: (vaddr, resource, soffset) positions in `srcs` after the
/// data operand of stores and atomics.
fn buffer_place(c: &Context<'_>, i: &Inst, first: usize, lane: usize, extra: u64, size: u64) -> Place {
    let name = i.name.as_str();
    let (offen, idxen) =
        (name.contains("_OFFEN") || name.contains("_BOTHEN"), name.contains("_IDXEN") || name.contains("_BOTHEN"));
    let has_vaddr = offen || idxen;
    let vaddr = i.srcs[first].operand;
    let r = resource(c, &i.srcs[first + usize::from(has_vaddr)].operand);
    let soffset = u64::from(c.wave.scalar32(&i.srcs[first + usize::from(has_vaddr) + 1].operand));
    let (mut index, mut offset) = (0u64, (i.imm(0) as u64).wrapping_add(extra));
    match (idxen, offen) {
        (true, true) => {
            index = u64::from(c.wave.lane32_at(&vaddr, lane, 0));
            offset += u64::from(c.wave.lane32_at(&vaddr, lane, 1));
        }
        (true, false) => index = u64::from(c.wave.lane32(&vaddr, lane)),
        (false, true) => offset += u64::from(c.wave.lane32(&vaddr, lane)),
        (false, false) => {}
    }
    if r.add_tid {
        index += lane as u64;
    }
    let in_range = if r.swizzle || r.add_tid {
        true
    } else if r.stride == 0 {
        offset + size <= r.records
    } else {
        index < r.records
    };
    if !in_range {
        return Place::Nowhere;
    }
    let buffer_offset = if r.swizzle {
        let (index_msb, index_lsb) = (index / r.index_stride, index % r.index_stride);
        let (offset_msb, offset_lsb) = (offset / r.element_size, offset % r.element_size);
        (index_msb * r.stride + offset_msb * r.element_size) * r.index_stride + index_lsb * r.element_size + offset_lsb
    } else {
        index * r.stride + offset
    };
    Place::Global(r.base.wrapping_add(soffset).wrapping_add(buffer_offset))
}

fn width_bytes(width: Width) -> u64 {
    match width {
        Width::Dwords(n) => 4 * u64::from(n),
        Width::Byte { .. } => 1,
        Width::Short { .. } => 2,
        Width::D16 { bytes, .. } => u64::from(bytes),
    }
}

fn buffer_load(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let width = width(&i.name).ok_or(Fault::Unimplemented)?;
    if i.name.contains("_LDS") {
        return buffer_load_to_lds(c, i);
    }
    let size = width_bytes(width).min(4);
    for lane in active_lanes(c.wave.exec()) {
        let places = dword_places(width, |extra| buffer_place(c, i, 0, lane, extra, size));
        record_buffer_access(c, i, 0, lane, &places, width_bytes(width));
        load_lane(c, i, lane, &places, width).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

/// A buffer load with `lds` set (Tensile's DirectToLds): each lane's dword
/// goes to the workgroup's LDS at `M0 + offset + lane * 4`, not to a
/// register. The instruction's offset counts in both addresses; an
/// out-of-range buffer read writes 0. Only the dword form is modelled (the
/// only one in rocBLAS's and hipBLASLt's code objects): the sub-dword and
/// gfx950's wider forms have no handler, and a run stops naming them.
fn buffer_load_to_lds(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let m0 = c.wave.scalar32(&Operand::Scalar { index: M0, dwords: 1 });
    let lds_base = m0.wrapping_add(i.imm(0) as u32);
    for lane in active_lanes(c.wave.exec()) {
        let place = buffer_place(c, i, 0, lane, 0, 4);
        record_buffer_access(c, i, 0, lane, &[place], 4);
        let mut bytes = [0u8; 4];
        read(c, place, &mut bytes).map_err(|f| f.in_lane(lane))?;
        let at = lds_base.wrapping_add(4 * lane as u32);
        lds_write(c, u64::from(at), &bytes).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

fn buffer_store(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let width = width(&i.name).ok_or(Fault::Unimplemented)?;
    let data = i.srcs[0].operand;
    let size = width_bytes(width).min(4);
    for lane in active_lanes(c.wave.exec()) {
        let places = dword_places(width, |extra| buffer_place(c, i, 1, lane, extra, size));
        record_buffer_access(c, i, 1, lane, &places, width_bytes(width));
        store_lane(c, &data, lane, &places, width).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

fn buffer_atomic(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let data = i.srcs[0].operand;
    let (_, wide, _) = atomic_kind(&i.name).ok_or(Fault::Unimplemented)?;
    for lane in active_lanes(c.wave.exec()) {
        let place = buffer_place(c, i, 1, lane, 0, if wide { 8 } else { 4 });
        record_buffer_access(c, i, 1, lane, &[place], if wide { 8 } else { 4 });
        atomic_lane(c, i, &data, lane, place).map_err(|f| f.in_lane(lane))?;
    }
    Ok(())
}

pub fn handler(name: &str) -> Option<Handler> {
    let flat_or_global = name.starts_with("FLAT_") || name.starts_with("GLOBAL_");
    if flat_or_global && name.contains("_ATOMIC_") {
        atomic_kind(name)?;
        return Some(flat_atomic);
    }
    if flat_or_global && name.contains("_LOAD_") {
        width(name)?;
        return Some(flat_load);
    }
    if flat_or_global && name.contains("_STORE_") {
        width(name)?;
        return Some(flat_store);
    }
    if name.starts_with("SCRATCH_LOAD_") {
        width(name)?;
        return Some(scratch_load);
    }
    if name.starts_with("SCRATCH_STORE_") {
        width(name)?;
        return Some(scratch_store);
    }
    if name.starts_with("BUFFER_ATOMIC_") {
        atomic_kind(name)?;
        return Some(buffer_atomic);
    }
    if name.starts_with("BUFFER_LOAD_") && !name.contains("FORMAT") {
        // Into LDS, only the dword form is modelled.
        if width(name)? != Width::Dwords(1) && name.contains("_LDS") {
            return None;
        }
        return Some(buffer_load);
    }
    if name.starts_with("BUFFER_STORE_") && !name.contains("FORMAT") {
        width(name)?;
        return Some(buffer_store);
    }
    // Cache write-backs and invalidations (gfx940+'s memory model uses
    // BUFFER_INV): memory here has no caches.
    if name.starts_with("BUFFER_WBL2")
        || name.starts_with("BUFFER_INVL2")
        || name.starts_with("BUFFER_WBINVL1")
        || name == "BUFFER_INV"
    {
        return Some(|_, _| Ok(()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_names_decompose() {
        assert_eq!(width("GLOBAL_LOAD_DWORDX4_SADDR"), Some(Width::Dwords(4)));
        assert_eq!(width("BUFFER_LOAD_DWORD_OFFEN"), Some(Width::Dwords(1)));
        assert_eq!(width("BUFFER_LOAD_DWORD_LDS_OFFEN"), Some(Width::Dwords(1)));
        assert_eq!(width("GLOBAL_STORE_SHORT_D16_HI"), Some(Width::D16 { bytes: 2, signed: false, high: true }));
        assert_eq!(atomic_kind("GLOBAL_ATOMIC_ADD_F32_SADDR_RTN"), Some(("ADD_F32", false, true)));
        assert_eq!(segment_offset(8184), -8);
        assert_eq!(segment_offset(4095), 4095);
        assert_eq!(atomic_kind("GLOBAL_ATOMIC_CMPSWAP_X2_SADDR"), Some(("CMPSWAP", true, false)));
        assert_eq!(atomic_kind("BUFFER_ATOMIC_ADD_F64_OFFEN_RTN"), Some(("ADD_F64", true, true)));
        assert_eq!(atomic_kind("FLAT_ATOMIC_UMAX_RTN"), Some(("UMAX", false, true)));
        assert_eq!(swizzled_private(0, 4, 1), 256 + 4);
    }
}
