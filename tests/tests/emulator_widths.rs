//! Address and operand arithmetic that has a width, generated: every form
//! of an instruction family is assembled into a kernel of its own, run in
//! the emulator over addresses chosen to cross the width's edges
//! (negative bases, offsets that wrap, accesses that run past the end),
//! and compared with a CPU model of what the ISA says, written here
//! without the emulator's code.
//!
//! LDS (`ds_*`): the address is the address VGPR plus the instruction's
//! offset (16 bits; two 8-bit offsets in element units for the
//! two-address forms, x64 for `ST64`), added in 32 bits. LLVM folds
//! offsets onto bases that can be negative, so `-65280 + 65520` must be
//! byte 240, not an address 4 GiB past the end. Each dword of an access
//! is checked against the workgroup's LDS on its own: out of range, a
//! read gives 0 and a write is dropped.

use gpuinstr_emulator::{Device, Launch, LdsOutOfRange};
use gpuinstr_tests::{every_target, kernels_from_assembly, AssemblyKernel};

/// The workgroup's LDS in these kernels.
const LDS_BYTES: u32 = 4096;
/// Result registers written per lane (v20..v27).
const RESULT_DWORDS: usize = 8;

/// What an LDS instruction does, for the CPU model.
#[derive(Clone, Copy, Debug)]
enum DsForm {
    /// `n` dwords read into v20...
    Read(u32),
    /// `n` dwords of v10... written.
    Write(u32),
    /// 1 or 2 bytes read, sign-extended or not, into all of v20 or into
    /// one half of it (`Some(high)`), the other half kept, or zeroed where
    /// the board's SRAM ECC is on (LLVM's `d16PreservesUnusedBits`).
    ReadSmall { bytes: u32, signed: bool, half: Option<bool> },
    /// 1 or 2 bytes of v10 (its high half for `_D16_HI`) written.
    WriteSmall { bytes: u32, high: bool },
    /// Two addresses `offset0 * unit` and `offset1 * unit` from the base,
    /// `dwords` each, into v20...
    Read2 { dwords: u32, unit: u32 },
    /// The same, writing v10... at the first and v14... at the second.
    Write2 { dwords: u32, unit: u32 },
    /// An atomic on one dword or two: the new value from the old and the
    /// data (v10..., and v14... for compare-and-store), the old returned
    /// into v20... when `returns`.
    Atomic { dwords: u32, op: AtomicOp, returns: bool },
}

#[derive(Clone, Copy, Debug)]
enum AtomicOp {
    Add,
    Exchange,
    /// Memory becomes data2 where it equals data.
    CompareStore,
}

/// Every form, with its assembly (`{addr}` and `{offset}` filled in).
fn ds_forms() -> Vec<(&'static str, DsForm, &'static str)> {
    use DsForm::*;
    let small = |bytes, signed, half| ReadSmall { bytes, signed, half };
    vec![
        ("read_b32", Read(1), "ds_read_b32 v20, {addr}{offset}"),
        ("read_b64", Read(2), "ds_read_b64 v[20:21], {addr}{offset}"),
        ("read_b96", Read(3), "ds_read_b96 v[20:22], {addr}{offset}"),
        ("read_b128", Read(4), "ds_read_b128 v[20:23], {addr}{offset}"),
        ("read_u8", small(1, false, None), "ds_read_u8 v20, {addr}{offset}"),
        ("read_i8", small(1, true, None), "ds_read_i8 v20, {addr}{offset}"),
        ("read_u16", small(2, false, None), "ds_read_u16 v20, {addr}{offset}"),
        ("read_i16", small(2, true, None), "ds_read_i16 v20, {addr}{offset}"),
        ("read_u8_d16", small(1, false, Some(false)), "ds_read_u8_d16 v20, {addr}{offset}"),
        ("read_u8_d16_hi", small(1, false, Some(true)), "ds_read_u8_d16_hi v20, {addr}{offset}"),
        ("read_i8_d16", small(1, true, Some(false)), "ds_read_i8_d16 v20, {addr}{offset}"),
        ("read_i8_d16_hi", small(1, true, Some(true)), "ds_read_i8_d16_hi v20, {addr}{offset}"),
        ("read_u16_d16", small(2, false, Some(false)), "ds_read_u16_d16 v20, {addr}{offset}"),
        ("read_u16_d16_hi", small(2, false, Some(true)), "ds_read_u16_d16_hi v20, {addr}{offset}"),
        ("write_b32", Write(1), "ds_write_b32 {addr}, v10{offset}"),
        ("write_b64", Write(2), "ds_write_b64 {addr}, v[10:11]{offset}"),
        ("write_b96", Write(3), "ds_write_b96 {addr}, v[10:12]{offset}"),
        ("write_b128", Write(4), "ds_write_b128 {addr}, v[10:13]{offset}"),
        ("write_b8", WriteSmall { bytes: 1, high: false }, "ds_write_b8 {addr}, v10{offset}"),
        ("write_b16", WriteSmall { bytes: 2, high: false }, "ds_write_b16 {addr}, v10{offset}"),
        ("write_b8_d16_hi", WriteSmall { bytes: 1, high: true }, "ds_write_b8_d16_hi {addr}, v10{offset}"),
        ("write_b16_d16_hi", WriteSmall { bytes: 2, high: true }, "ds_write_b16_d16_hi {addr}, v10{offset}"),
        ("read2_b32", Read2 { dwords: 1, unit: 4 }, "ds_read2_b32 v[20:21], {addr}{offsets}"),
        ("read2st64_b32", Read2 { dwords: 1, unit: 256 }, "ds_read2st64_b32 v[20:21], {addr}{offsets}"),
        ("read2_b64", Read2 { dwords: 2, unit: 8 }, "ds_read2_b64 v[20:23], {addr}{offsets}"),
        ("read2st64_b64", Read2 { dwords: 2, unit: 512 }, "ds_read2st64_b64 v[20:23], {addr}{offsets}"),
        ("write2_b32", Write2 { dwords: 1, unit: 4 }, "ds_write2_b32 {addr}, v10, v14{offsets}"),
        ("write2st64_b32", Write2 { dwords: 1, unit: 256 }, "ds_write2st64_b32 {addr}, v10, v14{offsets}"),
        ("write2_b64", Write2 { dwords: 2, unit: 8 }, "ds_write2_b64 {addr}, v[10:11], v[14:15]{offsets}"),
        ("write2st64_b64", Write2 { dwords: 2, unit: 512 }, "ds_write2st64_b64 {addr}, v[10:11], v[14:15]{offsets}"),
        ("add_u32", Atomic { dwords: 1, op: AtomicOp::Add, returns: false }, "ds_add_u32 {addr}, v10{offset}"),
        (
            "add_rtn_u32",
            Atomic { dwords: 1, op: AtomicOp::Add, returns: true },
            "ds_add_rtn_u32 v20, {addr}, v10{offset}",
        ),
        (
            "add_rtn_u64",
            Atomic { dwords: 2, op: AtomicOp::Add, returns: true },
            "ds_add_rtn_u64 v[20:21], {addr}, v[10:11]{offset}",
        ),
        (
            "wrxchg_rtn_b32",
            Atomic { dwords: 1, op: AtomicOp::Exchange, returns: true },
            "ds_wrxchg_rtn_b32 v20, {addr}, v10{offset}",
        ),
        (
            "cmpst_rtn_b32",
            Atomic { dwords: 1, op: AtomicOp::CompareStore, returns: true },
            "ds_cmpst_rtn_b32 v20, {addr}, v10, v14{offset}",
        ),
    ]
}

/// Offsets tried: small, and the largest the field holds (which wraps a
/// negative base back into the LDS). Two-address forms: both 8-bit fields
/// near their ends, each way round.
const OFFSETS: [u32; 2] = [0x100, 0xfff0];
const TWO_OFFSETS: [(u32, u32); 2] = [(0, 255), (255, 4)];

/// Bases (lane 0's address VGPR; each lane 16 bytes on): inside, so
/// negative that only the 16-bit offset brings it back, just below 4 GiB
/// (wrapping to 0 on the way), and running past the end.
const BASES: [u32; 4] = [0x100, 0xffff_0100, 0xffff_ff00, LDS_BYTES - 512];
const LANE_STRIDE: u32 = 16;

/// The two-address forms' second offset keeps lanes apart; with ST64 or
/// b32 units some pairs would land on a neighbour: those are left to the
/// other pair.
fn offsets_text(form: DsForm, index: usize) -> Option<String> {
    match form {
        DsForm::Read2 { unit, .. } | DsForm::Write2 { unit, .. } => {
            let (o0, o1) = TWO_OFFSETS[index];
            let apart = o0.abs_diff(o1) * unit;
            // Lanes are 16 bytes apart and 64 of them: a gap that is a
            // multiple of 16 under 1024 would land a lane on another's.
            (apart >= 64 * LANE_STRIDE || apart % LANE_STRIDE != 0).then(|| format!(" offset0:{o0} offset1:{o1}"))
        }
        _ => Some(format!(" offset:{}", OFFSETS[index])),
    }
}

/// The kernel for one form and offset: LDS filled from `input`, the
/// address VGPR `base + lane * 16`, data registers lane-dependent, the
/// instruction, then the result registers and all of LDS written to `out`.
fn ds_kernel(name: String, instruction: &str) -> AssemblyKernel {
    let mut body = String::from(
        "\ts_load_dwordx4 s[4:7], s[0:1], 0x0\n\
         \ts_load_dword s8, s[0:1], 0x10\n\
         \tv_lshlrev_b32_e32 v1, 2, v0\n\
         \ts_waitcnt lgkmcnt(0)\n",
    );
    for k in 0..LDS_BYTES / 256 {
        body += &format!(
            "\tv_add_u32_e32 v4, {}, v1\n\tglobal_load_dword v2, v4, s[4:5]\n\ts_waitcnt vmcnt(0)\n\tds_write_b32 v4, v2\n",
            k * 256
        );
    }
    body += "\ts_waitcnt lgkmcnt(0)\n\
             \tv_lshlrev_b32_e32 v3, 4, v0\n\
             \tv_add_u32_e32 v3, s8, v3\n";
    // Data: v10..v17 = lane * 0x01030507 + k * 0x11111111 (distinct per
    // lane and register, every byte moving); results v20..v27 start as a
    // marker, so a kept half or an untouched register shows.
    body += "\ts_mov_b32 s9, 0x1030507\n\tv_mul_lo_u32 v10, v0, s9\n";
    for k in 1..8 {
        body += &format!("\tv_add_u32_e32 v{}, 0x{:x}, v10\n", 10 + k, 0x1111_1111u32.wrapping_mul(k));
    }
    for k in 0..RESULT_DWORDS {
        body += &format!("\tv_xor_b32_e32 v{}, 0x{:x}, v0\n", 20 + k, 0xdead_0000u32 + k as u32 * 0x100);
    }
    body += &format!("\t{instruction}\n\ts_waitcnt lgkmcnt(0)\n");
    body += "\tv_lshlrev_b32_e32 v5, 5, v0\n\
             \tglobal_store_dwordx4 v5, v[20:23], s[6:7]\n\
             \tglobal_store_dwordx4 v5, v[24:27], s[6:7] offset:16\n";
    for k in 0..LDS_BYTES / 256 {
        body += &format!(
            "\tv_add_u32_e32 v4, {}, v1\n\tds_read_b32 v2, v4\n\tv_add_u32_e32 v6, 0x800, v4\n\ts_waitcnt lgkmcnt(0)\n\
             \tglobal_store_dword v6, v2, s[6:7]\n",
            k * 256
        );
    }
    body += "\ts_waitcnt vmcnt(0)\n";
    AssemblyKernel {
        name,
        body,
        arguments: vec![("input", 8), ("out", 8), ("base", 4)],
        group_segment: LDS_BYTES,
        private_segment: 0,
    }
}

/// The CPU model: LDS bytes and each lane's result registers after one
/// instruction, lanes in order. Panics when two lanes write one byte (a
/// case whose result depends on lane order is the generator's mistake).
struct Model {
    lds: Vec<u8>,
    results: Vec<[u32; RESULT_DWORDS]>,
    writer: Vec<Option<usize>>,
}

impl Model {
    fn in_range(at: u32, size: u32) -> bool {
        u64::from(at) + u64::from(size) <= u64::from(LDS_BYTES)
    }

    fn read(&self, at: u32, size: u32) -> u64 {
        if !Self::in_range(at, size) {
            return 0;
        }
        (0..size).rev().fold(0, |v, k| (v << 8) | u64::from(self.lds[(at + k) as usize]))
    }

    fn write(&mut self, lane: usize, at: u32, size: u32, value: u64) {
        if !Self::in_range(at, size) {
            return;
        }
        for k in 0..size {
            let byte = (at + k) as usize;
            if let Some(other) = self.writer[byte].filter(|&o| o != lane) {
                panic!("lanes {other} and {lane} both write LDS byte {byte}");
            }
            self.writer[byte] = Some(lane);
            self.lds[byte] = (value >> (8 * k)) as u8;
        }
    }
}

fn data(lane: u32, k: u32) -> u32 {
    lane.wrapping_mul(0x0103_0507).wrapping_add(0x1111_1111u32.wrapping_mul(k))
}

fn marker(lane: u32, k: usize) -> u32 {
    (0xdead_0000u32 + k as u32 * 0x100) ^ lane
}

fn model(form: DsForm, offsets: (u32, u32), base: u32, initial: &[u8], sram_ecc_on: bool) -> Model {
    let mut m = Model {
        lds: initial.to_vec(),
        results: (0..64).map(|lane| std::array::from_fn(|k| marker(lane, k))).collect(),
        writer: vec![None; LDS_BYTES as usize],
    };
    for lane in 0..64u32 {
        let l = lane as usize;
        let vaddr = base.wrapping_add(lane * LANE_STRIDE);
        let at = vaddr.wrapping_add(offsets.0);
        let dword = |at: u32, k: u32| at.wrapping_add(4 * k);
        match form {
            DsForm::Read(n) => {
                for k in 0..n {
                    m.results[l][k as usize] = m.read(dword(at, k), 4) as u32;
                }
            }
            DsForm::Write(n) => {
                for k in 0..n {
                    m.write(l, dword(at, k), 4, u64::from(data(lane, k)));
                }
            }
            DsForm::ReadSmall { bytes, signed, half } => {
                let raw = m.read(at, bytes) as u32;
                let value = match (signed, bytes) {
                    (true, 1) => raw as u8 as i8 as i32 as u32,
                    (true, _) => raw as u16 as i16 as i32 as u32,
                    _ => raw,
                };
                let old = if sram_ecc_on { 0 } else { m.results[l][0] };
                m.results[l][0] = match half {
                    None => value,
                    Some(true) => (old & 0xffff) | (value << 16),
                    Some(false) => (old & 0xffff_0000) | (value & 0xffff),
                };
            }
            DsForm::WriteSmall { bytes, high } => {
                let v = data(lane, 0);
                m.write(l, at, bytes, u64::from(if high { v >> 16 } else { v }));
            }
            DsForm::Read2 { dwords, unit } | DsForm::Write2 { dwords, unit } => {
                let write = matches!(form, DsForm::Write2 { .. });
                for (slot, offset) in [offsets.0, offsets.1].into_iter().enumerate() {
                    let at = vaddr.wrapping_add(offset * unit);
                    for k in 0..dwords {
                        if write {
                            m.write(l, dword(at, k), 4, u64::from(data(lane, 4 * slot as u32 + k)));
                        } else {
                            m.results[l][slot * dwords as usize + k as usize] = m.read(dword(at, k), 4) as u32;
                        }
                    }
                }
            }
            DsForm::Atomic { dwords, op, returns } => {
                let size = 4 * dwords;
                let wide = |k0: u32| {
                    let low = u64::from(data(lane, k0));
                    if dwords == 2 {
                        low | u64::from(data(lane, k0 + 1)) << 32
                    } else {
                        low
                    }
                };
                let mask = if dwords == 2 { u64::MAX } else { u64::from(u32::MAX) };
                // Out of range the hardware neither reads nor writes: the
                // old value returned is 0.
                let old = m.read(at, size);
                let new = match op {
                    AtomicOp::Add => old.wrapping_add(wide(0)) & mask,
                    AtomicOp::Exchange => wide(0),
                    AtomicOp::CompareStore => {
                        if old == wide(0) {
                            wide(4)
                        } else {
                            old
                        }
                    }
                };
                m.write(l, at, size, new);
                if returns {
                    m.results[l][0] = old as u32;
                    if dwords == 2 {
                        m.results[l][1] = (old >> 32) as u32;
                    }
                }
            }
        }
    }
    m
}

fn run_ds_case(device: &mut Device, kernel: &str, base: u32, initial: &[u8]) -> (Vec<[u32; RESULT_DWORDS]>, Vec<u8>) {
    let input = device.allocate("input", initial);
    let out = device.allocate("out", &vec![0u8; 0x800 + LDS_BYTES as usize]);
    let args = [out.to_le_bytes().to_vec(), base.to_le_bytes().to_vec()];
    let arguments = [input.to_le_bytes().to_vec(), args[0].clone(), args[1].clone()];
    device.launch(kernel, Launch::linear(1, 64), &arguments).unwrap_or_else(|e| panic!("{kernel} at {base:#x}: {e}"));
    let bytes = device.memory.bytes(out, 0x800 + LDS_BYTES as usize).unwrap();
    let results = (0..64)
        .map(|lane| {
            std::array::from_fn(|k| {
                let at = lane * 32 + 4 * k;
                u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
            })
        })
        .collect();
    (results, bytes[0x800..].to_vec())
}

/// Every `ds_*` form, at every offset and base, does to LDS and its
/// registers what the CPU model says, on every processor we emulate.
#[test]
fn lds_addresses_are_32_bit_sums_for_every_ds_form() {
    let initial: Vec<u8> = (0..LDS_BYTES).map(|i| (i.wrapping_mul(151) ^ (i >> 8)) as u8).collect();
    let mut cases = Vec::new();
    let mut kernels = Vec::new();
    for (name, form, template) in ds_forms() {
        for index in 0..2 {
            let Some(offsets) = offsets_text(form, index) else { continue };
            let offset_values = match form {
                DsForm::Read2 { .. } | DsForm::Write2 { .. } => TWO_OFFSETS[index],
                _ => (OFFSETS[index], 0),
            };
            let instruction =
                template.replace("{addr}", "v3").replace("{offsets}", &offsets).replace("{offset}", &offsets);
            let kernel = format!("ds_{name}_{index}");
            kernels.push(ds_kernel(kernel.clone(), &instruction));
            cases.push((kernel, instruction, form, offset_values));
        }
    }
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut wrapped = 0;
    // Every processor here has SRAM ECC: on (the boards' default), D16
    // reads zero the other half (Tensile's bf16 GEMMs OR two such halves);
    // off, they keep it.
    for (target, sram_ecc_on) in every_target().into_iter().flat_map(|t| [(t, true), (t, false)]) {
        let code_object = kernels_from_assembly(target, &kernels);
        let mut device = Device::new(code_object, format!("ds forms for {target}")).unwrap();
        device.options.lds_out_of_range = LdsOutOfRange::LikeHardware;
        device.options.sram_ecc_on = sram_ecc_on;
        for (kernel, instruction, form, offsets) in &cases {
            if !sram_ecc_on && !matches!(form, DsForm::ReadSmall { half: Some(_), .. }) {
                continue;
            }
            for base in BASES {
                let expected = model(*form, *offsets, base, &initial, sram_ecc_on);
                let (results, lds) = run_ds_case(&mut device, kernel, base, &initial);
                for (lane, (got, want)) in results.iter().zip(&expected.results).enumerate() {
                    assert_eq!(
                        got, want,
                        "{target} (SRAM ECC on: {sram_ecc_on}): `{instruction}` with v3 = {base:#x} + 16 * lane: lane \
                         {lane}'s registers"
                    );
                }
                if let Some(byte) = (0..lds.len()).find(|&b| lds[b] != expected.lds[b]) {
                    panic!(
                        "{target}: `{instruction}` with v3 = {base:#x} + 16 * lane: LDS byte {byte} is {:#04x}, \
                         the model's {:#04x}",
                        lds[byte], expected.lds[byte]
                    );
                }
                // The cases that only 32-bit sums get right: a base past
                // 2^31 whose sum with the offset lands inside the LDS.
                let lane0 = base.wrapping_add(offsets.0);
                wrapped += usize::from(base >= 0x8000_0000 && lane0 < LDS_BYTES);
            }
        }
    }
    assert!(wrapped >= 40, "{wrapped} cases wrap into the LDS");
}

/// `s_setreg_b32`, `s_setreg_imm32_b32` and `s_getreg_b32` on fields of
/// MODE (the only register a kernel writes): the field is
/// `hwreg(id, offset, size)` whatever the form, and only its bits change.
/// The assembly names the field first; in the encoding of
/// `s_setreg_imm32_b32` the field is the SOPK immediate and the value the
/// literal that follows (Triton's softmax writes the denormal mode so).
#[test]
fn hardware_register_fields_are_read_and_written_as_the_isa_orders_them() {
    let fields = [(0u32, 4u32), (4, 2), (4, 4), (8, 1), (2, 5)];
    let values = [3u32, 0xffff_fff5, 0];
    let mut cases = Vec::new();
    let mut kernels = Vec::new();
    for (f, &(offset, size)) in fields.iter().enumerate() {
        for (v, &value) in values.iter().enumerate() {
            let field = format!("hwreg(HW_REG_MODE, {offset}, {size})");
            for (form, write) in [
                ("setreg", format!("\ts_mov_b32 s11, 0x{value:x}\n\ts_setreg_b32 {field}, s11\n")),
                ("setreg_imm32", format!("\ts_setreg_imm32_b32 {field}, 0x{value:x}\n")),
            ] {
                let name = format!("{form}_{f}_{v}");
                let body = format!(
                    "\ts_load_dwordx2 s[4:5], s[0:1], 0x0\n\
                     \ts_getreg_b32 s10, hwreg(HW_REG_MODE, 0, 32)\n{write}\
                     \ts_getreg_b32 s12, hwreg(HW_REG_MODE, 0, 32)\n\
                     \ts_getreg_b32 s13, {field}\n\
                     \tv_mov_b32_e32 v2, 0\n\tv_mov_b32_e32 v4, s10\n\tv_mov_b32_e32 v5, s12\n\tv_mov_b32_e32 v6, s13\n\
                     \ts_waitcnt lgkmcnt(0)\n\tglobal_store_dwordx3 v2, v[4:6], s[4:5]\n\ts_waitcnt vmcnt(0)\n"
                );
                kernels.push(AssemblyKernel {
                    name: name.clone(),
                    body,
                    arguments: vec![("out", 8)],
                    group_segment: 0,
                    private_segment: 0,
                });
                cases.push((name, write, offset, size, value));
            }
        }
    }
    for target in every_target() {
        let code_object = kernels_from_assembly(target, &kernels);
        let mut device = Device::new(code_object, format!("hwreg forms for {target}")).unwrap();
        for (kernel, write, offset, size, value) in &cases {
            let out = device.allocate("out", &[0u8; 12]);
            device
                .launch(kernel, Launch::linear(1, 64), &[out.to_le_bytes().to_vec()])
                .unwrap_or_else(|e| panic!("{target}: {write}: {e}"));
            let got: Vec<u32> = (0..3).map(|k| device.memory.read_u32(out + 4 * k).unwrap()).collect();
            let mask = ((1u32 << size) - 1) << offset;
            let after = (got[0] & !mask) | ((value << offset) & mask);
            assert_eq!(got[1], after, "{target}:\n{write}MODE {:#x} before", got[0]);
            assert_eq!(got[2], (after & mask) >> offset, "{target}:\n{write}the field read back");
        }
    }
}

/// A deterministic stream of 32-bit values (xorshift) for operands.
fn operands(seed: u32, count: usize) -> Vec<u32> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

/// A bit field of a `bits`-wide value: `width` bits from `offset`; the
/// signed forms shift the value arithmetically and sign-extend the field
/// (a field running past the value's top is the value's sign).
fn bfe(value: u64, offset: u32, width: u32, bits: u32, signed: bool) -> u64 {
    if width == 0 {
        return 0;
    }
    let mask = |x: u64| if bits == 64 { x } else { x & 0xffff_ffff };
    if !signed {
        let shifted = value >> offset;
        return mask(if width >= 64 { shifted } else { shifted & ((1u64 << width) - 1) });
    }
    let as_signed = if bits == 64 { value as i64 } else { i64::from(value as u32 as i32) };
    if offset + width >= bits {
        return mask((as_signed >> offset) as u64);
    }
    let field = (as_signed >> offset) as u64 & ((1u64 << width) - 1);
    mask(if field >> (width - 1) & 1 == 1 { field | !((1u64 << width) - 1) } else { field })
}

/// A VALU operation on each lane's four operand dwords (w0..w3: the first
/// is mostly a shift amount or offset past its field's width), and the
/// result (one or two dwords) the ISA gives.
type LaneModel = fn([u32; 4]) -> u64;

fn valu_forms() -> Vec<(&'static str, LaneModel)> {
    vec![
        ("v_lshlrev_b32 v20, v10, v11", |w| u64::from(w[1] << (w[0] & 31))),
        ("v_lshrrev_b32 v20, v10, v11", |w| u64::from(w[1] >> (w[0] & 31))),
        ("v_ashrrev_i32 v20, v10, v11", |w| u64::from(((w[1] as i32) >> (w[0] & 31)) as u32)),
        ("v_lshlrev_b64 v[20:21], v10, v[12:13]", |w| (u64::from(w[2]) | u64::from(w[3]) << 32) << (w[0] & 63)),
        ("v_lshrrev_b64 v[20:21], v10, v[12:13]", |w| (u64::from(w[2]) | u64::from(w[3]) << 32) >> (w[0] & 63)),
        ("v_ashrrev_i64 v[20:21], v10, v[12:13]", |w| {
            ((u64::from(w[2]) | u64::from(w[3]) << 32) as i64 >> (w[0] & 63)) as u64
        }),
        ("v_bfe_u32 v20, v11, v10, v12", |w| bfe(u64::from(w[1]), w[0] & 31, w[2] & 31, 32, false)),
        ("v_bfe_i32 v20, v11, v10, v12", |w| bfe(u64::from(w[1]), w[0] & 31, w[2] & 31, 32, true)),
        ("v_alignbit_b32 v20, v11, v12, v10", |w| {
            ((u64::from(w[1]) << 32 | u64::from(w[2])) >> (w[0] & 31)) & 0xffff_ffff
        }),
        ("v_alignbyte_b32 v20, v11, v12, v10", |w| {
            ((u64::from(w[1]) << 32 | u64::from(w[2])) >> ((w[0] & 3) * 8)) & 0xffff_ffff
        }),
        ("v_bfm_b32 v20, v10, v11", |w| u64::from((((1u64 << (w[0] & 31)) - 1) as u32) << (w[1] & 31))),
        ("v_lshl_add_u32 v20, v11, v10, v12", |w| u64::from((w[1] << (w[0] & 31)).wrapping_add(w[2]))),
        ("v_add_lshl_u32 v20, v11, v12, v10", |w| u64::from(w[1].wrapping_add(w[2]) << (w[0] & 31))),
        ("v_lshl_or_b32 v20, v11, v10, v12", |w| u64::from((w[1] << (w[0] & 31)) | w[2])),
        ("v_mad_u32_u24 v20, v11, v12, v13", |w| {
            u64::from((w[1] & 0xff_ffff).wrapping_mul(w[2] & 0xff_ffff).wrapping_add(w[3]))
        }),
        ("v_mad_i32_i24 v20, v11, v12, v13", |w| {
            let s24 = |x: u32| ((x << 8) as i32) >> 8;
            u64::from(s24(w[1]).wrapping_mul(s24(w[2])).wrapping_add(w[3] as i32) as u32)
        }),
        ("v_mul_hi_u32_u24_e32 v20, v11, v12", |w| (u64::from(w[1] & 0xff_ffff) * u64::from(w[2] & 0xff_ffff)) >> 32),
        ("v_bcnt_u32_b32 v20, v11, v12", |w| u64::from(w[1].count_ones().wrapping_add(w[2]))),
    ]
}

/// Each VALU operation with a width (shift amounts, bit fields, 24-bit
/// multiplies) on 64 lanes of operands, whose shift amounts and offsets
/// run past the field's width, is what the ISA says.
#[test]
fn vector_operand_widths_are_the_isas() {
    let mut inputs = Vec::new();
    let mut values = operands(0x1234_5678, 64 * 4).into_iter();
    for lane in 0..64u32 {
        let mut w: [u32; 4] = std::array::from_fn(|_| values.next().unwrap());
        // Lanes 0-31: small amounts 0..95 (past 32 and 64); the others
        // keep random high bits above their amounts.
        if lane < 32 {
            w[0] = lane * 3;
        }
        inputs.push(w);
    }
    let kernels: Vec<AssemblyKernel> = valu_forms()
        .iter()
        .enumerate()
        .map(|(k, (instruction, _))| AssemblyKernel {
            name: format!("valu_{k}"),
            body: format!(
                "\ts_load_dwordx4 s[4:7], s[0:1], 0x0\n\tv_lshlrev_b32_e32 v1, 4, v0\n\ts_waitcnt lgkmcnt(0)\n\
                 \tglobal_load_dwordx4 v[10:13], v1, s[4:5]\n\tv_mov_b32_e32 v20, 0\n\tv_mov_b32_e32 v21, 0\n\
                 \ts_waitcnt vmcnt(0)\n\t{instruction}\n\tv_lshlrev_b32_e32 v1, 3, v0\n\
                 \tglobal_store_dwordx2 v1, v[20:21], s[6:7]\n\ts_waitcnt vmcnt(0)\n"
            ),
            arguments: vec![("input", 8), ("out", 8)],
            group_segment: 0,
            private_segment: 0,
        })
        .collect();
    let input_bytes: Vec<u8> = inputs.iter().flat_map(|w| w.iter().flat_map(|d| d.to_le_bytes())).collect();
    for target in every_target() {
        let code_object = kernels_from_assembly(target, &kernels);
        let mut device = Device::new(code_object, format!("valu forms for {target}")).unwrap();
        for (k, (instruction, model)) in valu_forms().iter().enumerate() {
            let input = device.allocate("input", &input_bytes);
            let out = device.allocate("out", &[0u8; 64 * 8]);
            let args = [input.to_le_bytes().to_vec(), out.to_le_bytes().to_vec()];
            device.launch(&format!("valu_{k}"), Launch::linear(1, 64), &args).unwrap_or_else(|e| panic!("{e}"));
            for (lane, w) in inputs.iter().enumerate() {
                let got = device.memory.read_u64(out + 8 * lane as u64).unwrap();
                let want = model(*w);
                assert_eq!(
                    got, want,
                    "{target}: `{instruction}` lane {lane}: operands {w:08x?}: {got:#x}, not {want:#x}"
                );
            }
        }
    }
}

/// A SALU operation with a width, its two operands (the second a shift
/// amount, offset or bit-field control, past its field's width in some
/// cases; 64-bit first operands in s[10:11]) and the result the ISA gives.
type ScalarModel = fn(u64, u32) -> u64;

fn salu_forms() -> Vec<(&'static str, bool, ScalarModel)> {
    vec![
        ("s_lshl_b32 s20, s10, s12", false, |a, b| u64::from((a as u32) << (b & 31))),
        ("s_lshr_b32 s20, s10, s12", false, |a, b| u64::from((a as u32) >> (b & 31))),
        ("s_ashr_i32 s20, s10, s12", false, |a, b| u64::from(((a as i32) >> (b & 31)) as u32)),
        ("s_lshl_b64 s[20:21], s[10:11], s12", true, |a, b| a << (b & 63)),
        ("s_lshr_b64 s[20:21], s[10:11], s12", true, |a, b| a >> (b & 63)),
        ("s_ashr_i64 s[20:21], s[10:11], s12", true, |a, b| ((a as i64) >> (b & 63)) as u64),
        ("s_bfe_u32 s20, s10, s12", false, |a, b| bfe(a & 0xffff_ffff, b & 31, (b >> 16) & 0x7f, 32, false)),
        ("s_bfe_i32 s20, s10, s12", false, |a, b| bfe(a & 0xffff_ffff, b & 31, (b >> 16) & 0x7f, 32, true)),
        ("s_bfe_u64 s[20:21], s[10:11], s12", true, |a, b| bfe(a, b & 63, (b >> 16) & 0x7f, 64, false)),
        ("s_bfe_i64 s[20:21], s[10:11], s12", true, |a, b| bfe(a, b & 63, (b >> 16) & 0x7f, 64, true)),
        ("s_bfm_b32 s20, s10, s12", false, |a, b| u64::from((((1u64 << (a & 31)) - 1) as u32) << (b & 31))),
        ("s_lshl1_add_u32 s20, s10, s12", false, |a, b| u64::from(((a as u32) << 1).wrapping_add(b))),
        ("s_lshl4_add_u32 s20, s10, s12", false, |a, b| u64::from(((a as u32) << 4).wrapping_add(b))),
    ]
}

/// Each SALU operation with a width on operand pairs whose amounts and
/// bit-field controls run past their fields (widths up to the operand's,
/// offsets with garbage above them) is what the ISA says.
#[test]
fn scalar_operand_widths_are_the_isas() {
    let values = operands(0x9e37_79b9, 48 * 3);
    let cases: Vec<(u64, u32)> = (0..48)
        .map(|k| {
            let a = u64::from(values[3 * k]) | u64::from(values[3 * k + 1]) << 32;
            // Offsets 0..47 with high garbage; bit-field widths 0..=32 in
            // bits 22:16 (0..=64 for the 64-bit forms, clamped below).
            let width = (k as u32 * 7) % 33;
            let b = (k as u32 + (values[3 * k + 2] & 0xffe0_0000 & !0x007f_0000)) | width << 16;
            (a, b)
        })
        .collect();
    let kernels: Vec<AssemblyKernel> = salu_forms()
        .iter()
        .enumerate()
        .map(|(k, (instruction, _, _))| {
            let mut body =
                String::from("\ts_load_dwordx2 s[4:5], s[0:1], 0x0\n\tv_mov_b32_e32 v1, 0\n\ts_waitcnt lgkmcnt(0)\n");
            for (c, (a, b)) in cases.iter().enumerate() {
                body += &format!(
                    "\ts_mov_b32 s10, 0x{:x}\n\ts_mov_b32 s11, 0x{:x}\n\ts_mov_b32 s12, 0x{b:x}\n\ts_mov_b32 s21, 0\n\
                     \t{instruction}\n\tv_mov_b32_e32 v2, s20\n\tv_mov_b32_e32 v3, s21\n\
                     \tglobal_store_dwordx2 v1, v[2:3], s[4:5] offset:{}\n",
                    *a as u32,
                    (a >> 32) as u32,
                    8 * c
                );
            }
            body += "\ts_waitcnt vmcnt(0)\n";
            AssemblyKernel {
                name: format!("salu_{k}"),
                body,
                arguments: vec![("out", 8)],
                group_segment: 0,
                private_segment: 0,
            }
        })
        .collect();
    for target in every_target() {
        let code_object = kernels_from_assembly(target, &kernels);
        let mut device = Device::new(code_object, format!("salu forms for {target}")).unwrap();
        for (k, (instruction, wide, model)) in salu_forms().iter().enumerate() {
            let out = device.allocate("out", &vec![0u8; 8 * cases.len()]);
            device.launch(&format!("salu_{k}"), Launch::linear(1, 64), &[out.to_le_bytes().to_vec()]).unwrap();
            for (c, &(a, b)) in cases.iter().enumerate() {
                let a = if *wide { a } else { a & 0xffff_ffff };
                let got = device.memory.read_u64(out + 8 * c as u64).unwrap();
                let want = model(a, b);
                assert_eq!(got, want, "{target}: `{instruction}` with {a:#x}, {b:#x}: {got:#x}, not {want:#x}");
            }
        }
    }
}

/// Bytes of the memory the addressing forms read and write, and where
/// their base points: its middle, so that negative offsets stay inside.
const MEMORY_BYTES: usize = 0x10000;
const BASE_OFFSET: u64 = 0x8000;

/// A memory addressing form: its name, the instructions that load into
/// v20 (or s20) from `memory + BASE_OFFSET` with lane `l`'s offset VGPR v2
/// = 4 * l (and v[4:5] the 64-bit address `memory + BASE_OFFSET + 4 * l`,
/// s[6:7] the base, s8 a byte offset of 16), and the byte offset from the
/// base each lane reads.
/// The byte offset from the base a lane reads.
type LaneOffset = Box<dyn Fn(i64) -> i64>;

fn memory_forms() -> Vec<(String, String, LaneOffset)> {
    let mut forms: Vec<(String, String, LaneOffset)> = Vec::new();
    // GLOBAL: a 13-bit signed instruction offset, on a 64-bit VGPR address
    // or an SGPR base plus a zero-extended 32-bit VGPR offset.
    for offset in [-4096i64, -4, 0, 4092] {
        forms.push((
            format!("global vaddr offset {offset}"),
            format!("global_load_dword v20, v[4:5], off offset:{offset}"),
            Box::new(move |lane| 4 * lane + offset),
        ));
        forms.push((
            format!("global saddr offset {offset}"),
            format!("global_load_dword v20, v2, s[6:7] offset:{offset}"),
            Box::new(move |lane| 4 * lane + offset),
        ));
    }
    // SMEM: an immediate byte offset (signed on GFX9, 21 bits) or an SGPR.
    for offset in [-0x8000i64, -4, 0, 0x7ffc] {
        let immediate = if offset < 0 { format!("-0x{:x}", -offset) } else { format!("0x{offset:x}") };
        forms.push((
            format!("smem offset {offset}"),
            format!("s_load_dword s20, s[6:7], {immediate}\n\ts_waitcnt lgkmcnt(0)\n\tv_mov_b32_e32 v20, s20"),
            Box::new(move |_| offset),
        ));
    }
    forms.push((
        "smem soffset".into(),
        "s_load_dword s20, s[6:7], s8\n\ts_waitcnt lgkmcnt(0)\n\tv_mov_b32_e32 v20, s20".into(),
        Box::new(|_| 16),
    ));
    // Both (LLVM 16 and newer assemble and emit it on GFX9).
    if gpuinstr::toolchain::LLVM_MAJOR >= 17 {
        for offset in [-0x1000i64, 0x40] {
            let immediate = if offset < 0 { format!("-0x{:x}", -offset) } else { format!("0x{offset:x}") };
            forms.push((
                format!("smem soffset and offset {offset}"),
                format!(
                    "s_load_dword s20, s[6:7], s8 offset:{immediate}\n\ts_waitcnt lgkmcnt(0)\n\tv_mov_b32_e32 v20, s20"
                ),
                Box::new(move |_| 16 + offset),
            ));
        }
    }
    // MUBUF through a raw buffer resource over the memory from the base: a
    // VGPR offset (offen), an SGPR offset and a 12-bit instruction offset.
    for offset in [0i64, 4092] {
        forms.push((
            format!("buffer offen offset {offset}"),
            format!("buffer_load_dword v20, v2, s[12:15], s8 offen offset:{offset}"),
            Box::new(move |lane| 4 * lane + 16 + offset),
        ));
    }
    // D16 loads of a word's two halves ORed together, as Tensile's bf16
    // GEMMs assemble their operands: right only where each load zeroes the
    // half it does not load (SRAM ECC on, every board's default), since
    // the registers start with the other halves set.
    let halves = |low: &str, high: &str| {
        format!(
            "v_mov_b32_e32 v20, 0xffff0000\n\tv_mov_b32_e32 v22, 0xffff\n\t{low}\n\t{high}\n\t\
             s_waitcnt vmcnt(0)\n\tv_or_b32_e32 v20, v20, v22"
        )
    };
    forms.push((
        "global d16 halves".into(),
        halves("global_load_short_d16 v20, v[4:5], off", "global_load_short_d16_hi v22, v[4:5], off offset:2"),
        Box::new(|lane| 4 * lane),
    ));
    forms.push((
        "buffer d16 halves".into(),
        halves(
            "buffer_load_short_d16 v20, v2, s[12:15], s8 offen",
            "buffer_load_short_d16_hi v22, v2, s[12:15], s8 offen offset:2",
        ),
        Box::new(|lane| 4 * lane + 16),
    ));
    // MUBUF into LDS (`lds`, Tensile's DirectToLds): the dword goes to LDS
    // at M0 + the instruction offset + 4 * lane, read back from there. The
    // instruction offset counts in the memory address and the LDS address.
    for offset in [0i64, 4092] {
        forms.push((
            format!("buffer to LDS offset {offset}"),
            format!(
                "s_mov_b32 m0, 0x{LDS_M0:x}\n\tbuffer_load_dword v2, s[12:15], s8 offen offset:{offset} lds\n\t\
                 s_waitcnt vmcnt(0)\n\tv_add_u32_e32 v6, 0x{:x}, v2\n\tds_read_b32 v20, v6",
                LDS_M0 + offset as u32
            ),
            Box::new(move |lane| 4 * lane + 16 + offset),
        ));
    }
    // FLAT on a global address: a 12-bit unsigned instruction offset.
    for offset in [0i64, 4092] {
        forms.push((
            format!("flat offset {offset}"),
            format!("flat_load_dword v20, v[4:5] offset:{offset}"),
            Box::new(move |lane| 4 * lane + offset),
        ));
    }
    // Atomics returning the old value (an add of 1) address as their loads.
    for offset in [-4096i64, 0, 4092] {
        forms.push((
            format!("global atomic vaddr offset {offset}"),
            format!("v_mov_b32_e32 v30, 1\n\tglobal_atomic_add v20, v[4:5], v30, off offset:{offset} GLC"),
            Box::new(move |lane| 4 * lane + offset),
        ));
        forms.push((
            format!("global atomic saddr offset {offset}"),
            format!("v_mov_b32_e32 v30, 1\n\tglobal_atomic_add v20, v2, v30, s[6:7] offset:{offset} GLC"),
            Box::new(move |lane| 4 * lane + offset),
        ));
    }
    for offset in [0i64, 4092] {
        forms.push((
            format!("flat atomic offset {offset}"),
            format!("v_mov_b32_e32 v30, 1\n\tflat_atomic_add v20, v[4:5], v30 offset:{offset} GLC"),
            Box::new(move |lane| 4 * lane + offset),
        ));
        forms.push((
            format!("buffer atomic offen offset {offset}"),
            format!("v_mov_b32_e32 v20, 1\n\tbuffer_atomic_add v20, v2, s[12:15], s8 offen offset:{offset} GLC"),
            Box::new(move |lane| 4 * lane + 16 + offset),
        ));
    }
    // A raw buffer's range check covers the VGPR and instruction offsets,
    // never the SGPR offset (Tensile's edge tiles read zeros so): s[24:27]
    // holds 0x80 bytes from the base, and lanes past them read 0.
    forms.push((
        "buffer past its records".into(),
        "s_mov_b64 s[24:25], s[12:13]\n\ts_mov_b32 s26, 0x80\n\ts_mov_b32 s27, s15\n\t\
         buffer_load_dword v20, v2, s[24:27], s8 offen offset:4"
            .into(),
        Box::new(|lane| if 4 * lane + 4 + 4 <= 0x80 { 4 * lane + 16 + 4 } else { OUT_OF_RANGE }),
    ));
    // Into LDS, the lanes past the records write 0 (the LDS held a marker).
    forms.push((
        "buffer to LDS past its records".into(),
        format!(
            "s_mov_b64 s[24:25], s[12:13]\n\ts_mov_b32 s26, 0x80\n\ts_mov_b32 s27, s15\n\t\
             v_mov_b32_e32 v7, -1\n\tv_add_u32_e32 v6, 0x{:x}, v2\n\tds_write_b32 v6, v7\n\ts_waitcnt lgkmcnt(0)\n\t\
             s_mov_b32 m0, 0x{LDS_M0:x}\n\tbuffer_load_dword v2, s[24:27], s8 offen offset:4 lds\n\t\
             s_waitcnt vmcnt(0)\n\tds_read_b32 v20, v6",
            LDS_M0 + 4
        ),
        Box::new(|lane| if 4 * lane + 4 + 4 <= 0x80 { 4 * lane + 16 + 4 } else { OUT_OF_RANGE }),
    ));
    forms
}

/// A lane's byte offset that names no byte: the access reads 0.
const OUT_OF_RANGE: i64 = i64::MIN;

/// M0 in the buffer-to-LDS forms, and the LDS those kernels have.
const LDS_M0: u32 = 0x100;
const MEMORY_LDS_BYTES: u32 = 0x2000;

/// GFX940 and later write the cache bits `sc0`... where the others write
/// `glc` (an atomic returns the old value with either).
fn glc(target: &str) -> &'static str {
    if target.starts_with("gfx94") || target == "gfx950" {
        "sc0"
    } else {
        "glc"
    }
}

/// Each memory addressing form of GLOBAL, SMEM, MUBUF (into registers and
/// into LDS) and FLAT loads and returning atomics reads where the ISA's
/// arithmetic says (sign-extended instruction offsets, a 32-bit VGPR
/// offset added to an SGPR base, SGPR offsets, a raw buffer's range check
/// without its SGPR offset) and D16 loads zero the other half of their
/// register (SRAM ECC on), on every processor.
#[test]
fn memory_addresses_are_the_isas_sums() {
    let setup = format!(
        "\ts_load_dwordx4 s[16:19], s[0:1], 0x0\n\ts_waitcnt lgkmcnt(0)\n\
         \ts_add_u32 s6, s16, 0x{BASE_OFFSET:x}\n\ts_addc_u32 s7, s17, 0\n\ts_mov_b32 s8, 16\n\
         \tv_lshlrev_b32_e32 v2, 2, v0\n\tv_mov_b32_e32 v5, s7\n\tv_add_co_u32_e32 v4, vcc, s6, v2\n\
         \tv_addc_co_u32_e32 v5, vcc, 0, v5, vcc\n\
         \ts_mov_b32 s12, s6\n\ts_and_b32 s13, s7, 0xffff\n\ts_mov_b32 s14, 0x{:x}\n\ts_mov_b32 s15, 0x00027000\n",
        MEMORY_BYTES as u64 - BASE_OFFSET
    );
    let kernels = |target: &str| -> Vec<AssemblyKernel> {
        memory_forms()
            .iter()
            .enumerate()
            .map(|(k, (_, load, _))| AssemblyKernel {
                name: format!("memory_{k}"),
                body: format!(
                    "{setup}\t{}\n\ts_waitcnt vmcnt(0) lgkmcnt(0)\n\tglobal_store_dword v2, v20, s[18:19]\n\ts_waitcnt vmcnt(0)\n",
                    load.replace("GLC", glc(target))
                ),
                arguments: vec![("memory", 8), ("out", 8)],
                group_segment: MEMORY_LDS_BYTES,
                private_segment: 0,
            })
            .collect()
    };
    let memory: Vec<u8> =
        (0..MEMORY_BYTES as u32 / 4).flat_map(|i| (i.wrapping_mul(0x0101_0101) ^ i).to_le_bytes()).collect();
    let word_at = |byte: i64| {
        if byte == OUT_OF_RANGE {
            return 0;
        }
        let at = (BASE_OFFSET as i64 + byte) as usize;
        u32::from_le_bytes(memory[at..at + 4].try_into().unwrap())
    };
    for target in every_target() {
        let code_object = kernels_from_assembly(target, &kernels(target));
        let mut device = Device::new(code_object, format!("memory forms for {target}")).unwrap();
        for (k, (name, load, offset_of)) in memory_forms().iter().enumerate() {
            let base = device.allocate("memory", &memory);
            let out = device.allocate("out", &[0u8; 64 * 4]);
            let args = [base.to_le_bytes().to_vec(), out.to_le_bytes().to_vec()];
            device
                .launch(&format!("memory_{k}"), Launch::linear(1, 64), &args)
                .unwrap_or_else(|e| panic!("{target}: {name}: {e}"));
            for lane in 0..64i64 {
                let got = device.memory.read_u32(out + 4 * lane as u64).unwrap();
                let want = word_at(offset_of(lane));
                assert_eq!(got, want, "{target}: {name} (`{load}`), lane {lane}: read {got:#x}, not {want:#x}");
            }
        }
    }
}

/// Bytes of scratch per lane and of LDS in the aperture kernels.
const PRIVATE_BYTES: u32 = 512;
const APERTURE_LDS_BYTES: u32 = 1024;

/// What lane `lane` finds at a private byte address (the fill stores it).
fn private_word(lane: i64, address: i64) -> u32 {
    ((lane as u32) << 16) | address as u32
}

/// What every lane finds at an LDS byte address.
fn lds_word(address: i64) -> u32 {
    (address as u32 / 4).wrapping_mul(0x0101_0101) ^ 0x00c0_ffee
}

/// Scratch and LDS reached by their own instructions and through FLAT's
/// apertures: a form, its instructions loading into v20 (with v6 = lane
/// `l`'s private address 0x80 + 4 * (l % 16), s9 = 0x80, v7 = the LDS
/// address 0x100 + 4 * (l % 16)), and the word lane `l` reads.
type ApertureForm = (String, String, Box<dyn Fn(i64) -> u32>);

fn aperture_forms(target: &str) -> Vec<ApertureForm> {
    let private_address = |lane: i64| 0x80 + 4 * (lane % 16);
    let mut forms: Vec<ApertureForm> = Vec::new();
    // SCRATCH: a 13-bit signed offset on a VGPR or an SGPR address.
    for offset in [-0x80i64, -4, 0, 0x7c] {
        forms.push((
            format!("scratch vaddr offset {offset}"),
            format!("scratch_load_dword v20, v6, off offset:{offset}"),
            Box::new(move |lane| private_word(lane, private_address(lane) + offset)),
        ));
        forms.push((
            format!("scratch saddr offset {offset}"),
            format!("scratch_load_dword v20, off, s9 offset:{offset}"),
            Box::new(move |lane| private_word(lane, 0x80 + offset)),
        ));
        // Both at once: GFX940's SVS mode.
        if target.starts_with("gfx94") || target == "gfx950" {
            forms.push((
                format!("scratch vaddr and saddr offset {offset}"),
                format!("s_mov_b32 s9, 0x40\n\tscratch_load_dword v20, v6, s9 offset:{offset}"),
                Box::new(move |lane| private_word(lane, private_address(lane) + 0x40 + offset)),
            ));
        }
    }
    // FLAT in the private and shared apertures: a 12-bit unsigned offset
    // on the aperture's base plus the segment address.
    for offset in [0i64, 4, 0x7c] {
        forms.push((
            format!("flat private offset {offset}"),
            format!(
                "s_mov_b64 s[20:21], src_private_base\n\tv_mov_b32_e32 v5, s21\n\tv_add_u32_e32 v4, s20, v6\n\t\
                 flat_load_dword v20, v[4:5] offset:{offset}"
            ),
            Box::new(move |lane| private_word(lane, private_address(lane) + offset)),
        ));
    }
    for offset in [0i64, 0x100, 0x2c0] {
        forms.push((
            format!("flat shared offset {offset}"),
            format!(
                "s_mov_b64 s[20:21], src_shared_base\n\tv_mov_b32_e32 v5, s21\n\tv_add_u32_e32 v4, s20, v7\n\t\
                 flat_load_dword v20, v[4:5] offset:{offset}"
            ),
            Box::new(move |lane| lds_word(0x100 + 4 * (lane % 16) + offset)),
        ));
    }
    forms
}

/// The aperture kernel for one form: each lane's private bytes
/// filled with [`private_word`]s by plain scratch stores, LDS with
/// [`lds_word`]s by DS writes, then the form, then v20 stored to `out`.
fn aperture_kernel(name: String, form: &str) -> AssemblyKernel {
    let mut body = format!(
        "\ts_load_dwordx2 s[18:19], s[0:1], 0x0\n\
         \tv_lshlrev_b32_e32 v1, 16, v0\n\tv_mov_b32_e32 v3, 0\n\ts_mov_b32 s10, {}\n",
        PRIVATE_BYTES / 4
    );
    body += &format!(
        ".Lfill_{name}:\n\tv_or_b32_e32 v2, v1, v3\n\tscratch_store_dword v3, v2, off\n\t\
         v_add_u32_e32 v3, 4, v3\n\ts_sub_u32 s10, s10, 1\n\ts_cmp_lg_u32 s10, 0\n\ts_cbranch_scc1 .Lfill_{name}\n"
    );
    for round in 0..APERTURE_LDS_BYTES / 256 {
        body += &format!(
            "\tv_add_u32_e32 v3, {}, v0\n\ts_mov_b32 s11, 0x1010101\n\tv_mul_lo_u32 v2, v3, s11\n\t\
             v_xor_b32_e32 v2, 0xc0ffee, v2\n\tv_lshlrev_b32_e32 v3, 2, v3\n\tds_write_b32 v3, v2\n",
            64 * round
        );
    }
    body += "\ts_waitcnt vmcnt(0) lgkmcnt(0)\n\
             \tv_and_b32_e32 v6, 15, v0\n\tv_lshlrev_b32_e32 v6, 2, v6\n\tv_add_u32_e32 v7, 0x100, v6\n\
             \tv_add_u32_e32 v6, 0x80, v6\n\ts_mov_b32 s9, 0x80\n";
    body += &format!(
        "\t{form}\n\ts_waitcnt vmcnt(0) lgkmcnt(0)\n\tv_lshlrev_b32_e32 v2, 2, v0\n\t\
         global_store_dword v2, v20, s[18:19]\n\ts_waitcnt vmcnt(0)\n"
    );
    AssemblyKernel {
        name,
        body,
        arguments: vec![("out", 8)],
        group_segment: APERTURE_LDS_BYTES,
        private_segment: PRIVATE_BYTES,
    }
}

/// Scratch through SCRATCH instructions and FLAT's private aperture, and
/// LDS through FLAT's shared aperture, read what the instruction's offset
/// arithmetic names (negative scratch offsets included), each lane its
/// own private bytes, on every processor.
#[test]
fn scratch_and_flat_apertures_address_as_the_isa_says() {
    for target in every_target() {
        let forms = aperture_forms(target);
        let kernels: Vec<AssemblyKernel> =
            forms.iter().enumerate().map(|(k, (_, form, _))| aperture_kernel(format!("aperture_{k}"), form)).collect();
        let code_object = kernels_from_assembly(target, &kernels);
        let mut device = Device::new(code_object, format!("aperture forms for {target}")).unwrap();
        for (k, (name, form, expected)) in forms.iter().enumerate() {
            let out = device.allocate("out", &[0u8; 64 * 4]);
            device
                .launch(&format!("aperture_{k}"), Launch::linear(1, 64), &[out.to_le_bytes().to_vec()])
                .unwrap_or_else(|e| panic!("{target}: {name}: {e}"));
            for lane in 0..64i64 {
                let got = device.memory.read_u32(out + 4 * lane as u64).unwrap();
                let want = expected(lane);
                assert_eq!(got, want, "{target}: {name} (`{form}`), lane {lane}: read {got:#x}, not {want:#x}");
            }
        }
    }
}
