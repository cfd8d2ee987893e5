//! Matrix fused multiply-add (MFMA, gfx908/gfx90a/gfx940+): D = A*B + C
//! on matrices whose elements are spread over the lanes and registers of
//! the whole wave.
//!
//! Where each element lives comes from AMD's matrix instruction calculator
//! (github.com/ROCm/amd_matrix_instruction_calculator, its gfx9 register
//! and lane formulas, which the CDNA1-3 ISA guides' tables agree with),
//! restated here for an instruction of shape M x N x K with `blocks`
//! independent blocks:
//!
//! - A (M x K per block) and B (K x N): every lane holds `per_lane` =
//!   K*M*blocks/64 consecutive k-elements of one row of A (column of B),
//!   packed from the low bits of its source register(s). Lanes walk the
//!   rows (columns) first, then the blocks, then the next `per_lane`
//!   k-elements: A[i][k] of block b is in lane
//!   `i + M * (b + blocks * (k / per_lane))`, slot `k % per_lane`.
//! - C and D: a 32-bit result is kept in groups of 4 rows x N columns (one
//!   register per row of the group, one lane per column); the 64 lanes of
//!   a register hold 64/N such groups, of the same block (the next rows)
//!   or, for a 4x4 shape, of the next blocks; then the next 4 registers.
//!   Each block whose M*N elements fill whole registers starts M*N/64
//!   registers after the one before. A 64-bit result is the same with
//!   groups of 1 row in register pairs.
//!
//! The same function places gfx940's fp8/bf8 (8 per lane, A and B of
//! their own formats) and xf32 forms and gfx950's double-k f16, bf16 and
//! i8 forms (4-register A and B), as the CDNA3 calculator and the CDNA4
//! ISA guide's tables give them.
//!
//! MFMA works on the whole wave: it reads and writes all 64 lanes whatever
//! EXEC holds (the matrix is a wave-wide operand). The broadcast controls
//! (cbsz, abid, blgp) are not modelled: a non-zero value stops the run,
//! except blgp on the f64 forms of gfx940+, which negates A (bit 0), B
//! (bit 1) and C (bit 2). gfx940's sparse forms (SMFMAC) expand their A
//! from its stored halves and index (`smfmac`) and multiply the same way.
//! gfx950's F8F6F4 forms, scaled or not, read their operands by format
//! (`f8f6f4`). gfx950's own sparse forms have no semantics (they stop
//! there), nor has an MFMA with AGPR C/D on gfx940+ under LLVM 15 (see
//! `mfma`).
//!
//! Arithmetic: float products with f32 results are each exact in f64; the
//! K products of one element and its C are summed in f64 in k order and
//! rounded once to f32 (the hardware's internal order and rounding are not
//! documented; inputs whose sums are exact give the same result in any
//! model). fp8/bf8 elements are read in the processor's formats
//! (`fp8.rs`); xf32 elements are truncated to TF32 (10 mantissa bits) first,
//! as a bit-exact model of MI300X's MFMA (microsoft/MMA-Sim) does. 8-bit
//! integers multiply and accumulate in i32, wrapping. f64 accumulates with
//! a fused multiply-add per product, in k order, from C.

use super::fp8::{e8m0, Fp8Format, NarrowFormat};
use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::modifiers::{OP_SEL_0, OP_SEL_1};
use crate::operands::Operand;
use crate::program::Inst;
use crate::wave::LANES;

/// The element type of A or B (which fixes the type of C and D).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    F32,
    /// f32 inputs the hardware reads as TF32 (gfx940-gfx942's xf32).
    Xf32,
    F16,
    Bf16,
    I8,
    /// The processor's fp8 (FNUZ E4M3 on gfx94x, OCP E4M3 on gfx950).
    Fp8,
    /// The processor's bf8 (FNUZ E5M2 on gfx94x, OCP E5M2 on gfx950).
    Bf8,
    F64,
}

impl Element {
    fn bits(self) -> usize {
        match self {
            Element::F32 | Element::Xf32 => 32,
            Element::F16 | Element::Bf16 => 16,
            Element::I8 | Element::Fp8 | Element::Bf8 => 8,
            Element::F64 => 64,
        }
    }

    /// Bits of a C/D element.
    fn result_bits(self) -> usize {
        if self == Element::F64 {
            64
        } else {
            32
        }
    }
}

/// An MFMA instruction's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub blocks: usize,
    /// A's element type (and the size of B's, which may differ in format).
    pub element: Element,
    /// B's element type.
    pub b_element: Element,
}

impl Shape {
    const fn new(m: usize, n: usize, k: usize, blocks: usize, element: Element) -> Self {
        Shape { m, n, k, blocks, element, b_element: element }
    }

    /// A shape whose A and B are 8-bit floats of their own formats.
    const fn mixed(m: usize, k: usize, a: Element, b: Element) -> Self {
        Shape { m, n: m, k, blocks: 1, element: a, b_element: b }
    }

    /// k-elements of A (and B) each lane holds.
    pub fn per_lane(&self) -> usize {
        self.k * self.m * self.blocks / LANES
    }

    /// Dwords of the A (and B) source.
    pub fn source_dwords(&self) -> usize {
        (self.per_lane() * self.element.bits()).div_ceil(32)
    }

    /// C/D elements per lane (registers, or register pairs for f64).
    pub fn results_per_lane(&self) -> usize {
        self.m * self.n * self.blocks / LANES
    }

    /// Dwords of the C and D operands.
    pub fn result_dwords(&self) -> usize {
        self.results_per_lane() * self.element.result_bits() / 32
    }

    /// (lane, slot) of A[i][k] in block `block`; with `outer` = j, of
    /// B[k][j] (the shapes here are square, M = N). The slot counts
    /// elements from the low bits of the source.
    pub fn input_place(&self, outer: usize, k: usize, block: usize) -> (usize, usize) {
        let per_lane = self.per_lane();
        (outer + self.m * (block + self.blocks * (k / per_lane)), k % per_lane)
    }

    /// (lane, result register) of D[i][j] (and C[i][j]) in block `block`;
    /// for f64 the register counts register pairs.
    pub fn output_place(&self, i: usize, j: usize, block: usize) -> (usize, usize) {
        let (m, n) = (self.m, self.n);
        let group_rows = if self.element.result_bits() == 64 { 1 } else { 4 };
        // Row groups side by side in one register, and of those how many
        // are whole blocks (4x4 shapes) rather than more rows of one.
        let groups_per_register = LANES / n;
        let blocks_per_register = (LANES * group_rows / (m * n)).max(1);
        let register = block * (m * n / LANES) + i / (group_rows * groups_per_register) * group_rows + i % group_rows;
        let lane =
            (block % blocks_per_register) * n + (i / group_rows) % groups_per_register * blocks_per_register * n + j;
        (lane, register)
    }
}

/// The shape of an MFMA pseudo opcode (`V_MFMA_F32_32X32X8F16_vgprcd_e64`).
pub fn shape(name: &str) -> Option<Shape> {
    use Element::*;
    let base = base_name(name);
    let base = base.strip_suffix("_vgprcd").unwrap_or(base);
    let shape = match base.strip_prefix("V_MFMA_")? {
        "F32_32X32X1F32" => Shape::new(32, 32, 1, 2, F32),
        "F32_32X32X2F32" => Shape::new(32, 32, 2, 1, F32),
        "F32_16X16X1F32" => Shape::new(16, 16, 1, 4, F32),
        "F32_16X16X4F32" => Shape::new(16, 16, 4, 1, F32),
        "F32_4X4X1F32" => Shape::new(4, 4, 1, 16, F32),
        "F32_32X32X4F16" => Shape::new(32, 32, 4, 2, F16),
        "F32_32X32X8F16" => Shape::new(32, 32, 8, 1, F16),
        "F32_16X16X4F16" => Shape::new(16, 16, 4, 4, F16),
        "F32_16X16X16F16" => Shape::new(16, 16, 16, 1, F16),
        "F32_4X4X4F16" => Shape::new(4, 4, 4, 16, F16),
        // gfx908's bf16 forms: two elements per lane.
        "F32_32X32X2BF16" => Shape::new(32, 32, 2, 2, Bf16),
        "F32_32X32X4BF16" => Shape::new(32, 32, 4, 1, Bf16),
        "F32_16X16X2BF16" => Shape::new(16, 16, 2, 4, Bf16),
        "F32_16X16X8BF16" => Shape::new(16, 16, 8, 1, Bf16),
        "F32_4X4X2BF16" => Shape::new(4, 4, 2, 16, Bf16),
        // gfx90a's: four elements per lane, as f16.
        "F32_32X32X4BF16_1K" => Shape::new(32, 32, 4, 2, Bf16),
        "F32_32X32X8BF16_1K" => Shape::new(32, 32, 8, 1, Bf16),
        "F32_16X16X4BF16_1K" => Shape::new(16, 16, 4, 4, Bf16),
        "F32_16X16X16BF16_1K" => Shape::new(16, 16, 16, 1, Bf16),
        "F32_4X4X4BF16_1K" => Shape::new(4, 4, 4, 16, Bf16),
        "I32_32X32X4I8" => Shape::new(32, 32, 4, 2, I8),
        "I32_32X32X8I8" => Shape::new(32, 32, 8, 1, I8),
        "I32_16X16X4I8" => Shape::new(16, 16, 4, 4, I8),
        "I32_16X16X16I8" => Shape::new(16, 16, 16, 1, I8),
        "I32_4X4X4I8" => Shape::new(4, 4, 4, 16, I8),
        // gfx940: eight elements per lane.
        "I32_32X32X16I8" => Shape::new(32, 32, 16, 1, I8),
        "I32_16X16X32I8" => Shape::new(16, 16, 32, 1, I8),
        "F64_16X16X4F64" => Shape::new(16, 16, 4, 1, F64),
        "F64_4X4X4F64" => Shape::new(4, 4, 4, 4, F64),
        // gfx940-gfx942.
        "F32_16X16X8XF32" => Shape::new(16, 16, 8, 1, Xf32),
        "F32_32X32X4XF32" => Shape::new(32, 32, 4, 1, Xf32),
        // gfx940+: A's format, then B's.
        "F32_16X16X32_FP8_FP8" => Shape::mixed(16, 32, Fp8, Fp8),
        "F32_16X16X32_FP8_BF8" => Shape::mixed(16, 32, Fp8, Bf8),
        "F32_16X16X32_BF8_FP8" => Shape::mixed(16, 32, Bf8, Fp8),
        "F32_16X16X32_BF8_BF8" => Shape::mixed(16, 32, Bf8, Bf8),
        "F32_32X32X16_FP8_FP8" => Shape::mixed(32, 16, Fp8, Fp8),
        "F32_32X32X16_FP8_BF8" => Shape::mixed(32, 16, Fp8, Bf8),
        "F32_32X32X16_BF8_FP8" => Shape::mixed(32, 16, Bf8, Fp8),
        "F32_32X32X16_BF8_BF8" => Shape::mixed(32, 16, Bf8, Bf8),
        // gfx950: twice the k of gfx940's, 4-register A and B.
        "F32_16X16X32_F16" => Shape::new(16, 16, 32, 1, F16),
        "F32_32X32X16_F16" => Shape::new(32, 32, 16, 1, F16),
        "F32_16X16X32_BF16" => Shape::new(16, 16, 32, 1, Bf16),
        "F32_32X32X16_BF16" => Shape::new(32, 32, 16, 1, Bf16),
        "I32_16X16X64_I8" => Shape::new(16, 16, 64, 1, I8),
        "I32_32X32X32_I8" => Shape::new(32, 32, 32, 1, I8),
        _ => return None,
    };
    Some(shape)
}

pub fn handler(name: &str) -> Option<Handler> {
    if sparse_shape(name).is_some() {
        return Some(smfmac);
    }
    if f8f6f4_shape(name).is_some() {
        return Some(f8f6f4);
    }
    shape(name).map(|_| mfma as Handler)
}

/// Every lane's A or B elements, as raw bits (slot order).
fn read_source(c: &Context<'_>, operand: &Operand, shape: &Shape) -> Vec<Vec<u64>> {
    (0..LANES)
        .map(|lane| lane_elements(c, operand, lane, shape.source_dwords(), shape.element.bits(), shape.per_lane()))
        .collect()
}

/// `count` elements of `bits` each (8 to 64) packed from the low bits of a
/// lane's `dwords` registers (up to 8: gfx950's sources reach 256 bits).
fn lane_elements(
    c: &Context<'_>,
    operand: &Operand,
    lane: usize,
    dwords: usize,
    bits: usize,
    count: usize,
) -> Vec<u64> {
    let words: Vec<u64> = (0..dwords).map(|d| u64::from(c.wave.lane32_at(operand, lane, d))).collect();
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    (0..count)
        .map(|slot| {
            let (word, shift) = (slot * bits / 32, slot * bits % 32);
            let pair = words[word] | words.get(word + 1).map_or(0, |high| high << 32);
            (pair >> shift) & mask
        })
        .collect()
}

/// An A or B element's value (integers as i64, exact); 8-bit floats in
/// the processor's formats (`fp8`, `bf8`).
fn value(element: Element, bits: u64, fp8: Fp8Format, bf8: Fp8Format) -> f64 {
    match element {
        Element::F32 => f64::from(f32::from_bits(bits as u32)),
        // TF32: the low 13 mantissa bits dropped (truncated).
        Element::Xf32 => f64::from(f32::from_bits(bits as u32 & !0x1fff)),
        Element::F16 => half::f16::from_bits(bits as u16).to_f64(),
        Element::Bf16 => half::bf16::from_bits(bits as u16).to_f64(),
        Element::I8 => f64::from(bits as u8 as i8),
        Element::Fp8 => f64::from(fp8.decode(bits as u8)),
        Element::Bf8 => f64::from(bf8.decode(bits as u8)),
        Element::F64 => f64::from_bits(bits),
    }
}

/// C[register] in a lane, as raw bits (a constant C is every element).
fn accumulator(c: &Context<'_>, operand: &Operand, wide: bool, lane: usize, register: usize) -> u64 {
    match (*operand, wide) {
        (Operand::Constant(v), true) => v as u64,
        (Operand::Constant(v), false) => u64::from(v as u32),
        (_, true) => {
            u64::from(c.wave.lane32_at(operand, lane, 2 * register))
                | u64::from(c.wave.lane32_at(operand, lane, 2 * register + 1)) << 32
        }
        (_, false) => u64::from(c.wave.lane32_at(operand, lane, register)),
    }
}

/// Whether a register operand has the size the shape needs (constants fit).
fn sized(operand: &Operand, dwords: usize) -> bool {
    match *operand {
        Operand::Vector { dwords: n, .. } | Operand::Accum { dwords: n, .. } => usize::from(n) == dwords,
        _ => true,
    }
}

/// The processor's (fp8, bf8) formats, when the shape reads either.
fn eight_bit_formats(c: &Context<'_>, i: &Inst, shape: &Shape) -> Result<(Fp8Format, Fp8Format), Fault> {
    let eight_bit_float = |e: Element| matches!(e, Element::Fp8 | Element::Bf8);
    if !eight_bit_float(shape.element) && !eight_bit_float(shape.b_element) {
        // Not read.
        return Ok((Fp8Format::E4m3, Fp8Format::E5m2));
    }
    match (Fp8Format::of(c.machine.processor, false), Fp8Format::of(c.machine.processor, true)) {
        (Some(fp8), Some(bf8)) => Ok((fp8, bf8)),
        _ => Err(Fault::UnimplementedCase(format!("{} on {}", i.name, c.machine.processor.name))),
    }
}

fn gfx940_on(c: &Context<'_>) -> bool {
    let processor = c.machine.processor.name;
    processor.starts_with("gfx94") || processor.starts_with("gfx95")
}

fn mfma(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let shape = shape(&i.name).ok_or(Fault::Unimplemented)?;
    let processor = c.machine.processor.name;
    // cbsz, abid, blgp (and any source modifier) change which elements
    // are read: not modelled; except that on gfx940+ the f64 forms' blgp
    // negates A (bit 0), B (bit 1) and C (bit 2).
    let f64_negation = gfx940_on(c) && shape.element == Element::F64;
    let blgp = if f64_negation { i.imm(2) } else { 0 };
    if i.imm(0) != 0 || i.imm(1) != 0 || (!f64_negation && i.imm(2) != 0) || i.imms.len() > 3 {
        return Err(super::unsupported_modifier("MFMA cbsz/abid/blgp"));
    }
    if i.srcs.iter().any(|s| s.mods != 0) {
        return Err(super::unsupported_modifier("MFMA source"));
    }
    let ([a, b, acc], [d]) = (i.srcs.as_slice(), i.defs.as_slice()) else {
        return Err(Fault::UnimplementedCase("an MFMA with other operands".into()));
    };
    if !sized(d, shape.result_dwords())
        || !sized(&acc.operand, shape.result_dwords())
        || !sized(&a.operand, shape.source_dwords())
        || !sized(&b.operand, shape.source_dwords())
    {
        return Err(Fault::UnimplementedCase(format!("{} with operands of other sizes", i.name)));
    }
    // LLVM 15 decodes gfx940's MFMAs under their gfx908 names (f32, f16,
    // 8-bit 4-element) with AGPR C/D whatever the encoding's acc_cd bit
    // says (v[..] code disassembles as a[..]; LLVM 17 decodes them right):
    // there an AGPR C/D may really be VGPRs, so it stops rather than
    // compute in the wrong file.
    if gpuinstr::toolchain::LLVM_MAJOR < 17 && gfx940_on(c) && matches!(d, Operand::Accum { .. }) {
        return Err(Fault::UnimplementedCase(format!(
            "{} with AGPR C/D on {processor} (LLVM's decoder may have taken VGPRs for AGPRs)",
            i.name
        )));
    }
    let formats = eight_bit_formats(c, i, &shape)?;
    let (va, vb) = (read_source(c, &a.operand, &shape), read_source(c, &b.operand, &shape));
    multiply(c, &shape, formats, blgp, (&va, &vb), &acc.operand, d);
    Ok(())
}

/// D = A*B + C for every block, A and B given per lane in slot order;
/// `blgp` negates the f64 forms' A, B and C (bits 0-2).
fn multiply(
    c: &mut Context<'_>,
    shape: &Shape,
    (fp8, bf8): (Fp8Format, Fp8Format),
    blgp: i64,
    (va, vb): (&[Vec<u64>], &[Vec<u64>]),
    acc: &Operand,
    d: &Operand,
) {
    let negate = |value: u64, bit: i64| if blgp >> bit & 1 == 1 { value ^ (1 << 63) } else { value };
    let element = shape.element;
    let wide = element.result_bits() == 64;
    let a_at = |row: usize, k: usize, block: usize| {
        let (lane, slot) = shape.input_place(row, k, block);
        va[lane][slot]
    };
    let b_at = |k: usize, column: usize, block: usize| {
        let (lane, slot) = shape.input_place(column, k, block);
        vb[lane][slot]
    };
    let mut results = vec![vec![0u64; shape.results_per_lane()]; LANES];
    for block in 0..shape.blocks {
        for row in 0..shape.m {
            for column in 0..shape.n {
                let (lane, register) = shape.output_place(row, column, block);
                let c_bits = accumulator(c, acc, wide, lane, register);
                let products = (0..shape.k).map(|k| (a_at(row, k, block), b_at(k, column, block)));
                results[lane][register] = match element {
                    Element::I8 => {
                        let sum = products.fold(c_bits as u32 as i32, |sum, (x, y)| {
                            sum.wrapping_add(i32::from(x as u8 as i8) * i32::from(y as u8 as i8))
                        });
                        u64::from(sum as u32)
                    }
                    Element::F64 => {
                        let sum = products.fold(f64::from_bits(negate(c_bits, 2)), |sum, (x, y)| {
                            f64::from_bits(negate(x, 0)).mul_add(f64::from_bits(negate(y, 1)), sum)
                        });
                        sum.to_bits()
                    }
                    _ => {
                        let c_value = f64::from(f32::from_bits(c_bits as u32));
                        let sum: f64 = products
                            .map(|(x, y)| value(element, x, fp8, bf8) * value(shape.b_element, y, fp8, bf8))
                            .sum();
                        u64::from(((sum + c_value) as f32).to_bits())
                    }
                };
            }
        }
    }
    for (lane, values) in results.iter().enumerate() {
        for (register, bits) in values.iter().enumerate() {
            if wide {
                c.wave.write_lane32_at(d, lane, 2 * register, *bits as u32);
                c.wave.write_lane32_at(d, lane, 2 * register + 1, (*bits >> 32) as u32);
            } else {
                c.wave.write_lane32_at(d, lane, register, *bits as u32);
            }
        }
    }
}

/// An F8F6F4 operand's format (cbsz for A, blgp for B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MxFormat {
    Fp8,
    Bf8,
    Narrow(NarrowFormat),
}

impl MxFormat {
    fn of(selector: i64) -> Option<Self> {
        Some(match selector {
            0 => MxFormat::Fp8,
            1 => MxFormat::Bf8,
            2 => MxFormat::Narrow(NarrowFormat::E2m3),
            3 => MxFormat::Narrow(NarrowFormat::E3m2),
            4 => MxFormat::Narrow(NarrowFormat::E2m1),
            _ => return None,
        })
    }

    /// Registers of the operand: 32 elements per lane, 8, 6 or 4 bits each.
    fn dwords(self) -> usize {
        match self {
            MxFormat::Fp8 | MxFormat::Bf8 => 8,
            MxFormat::Narrow(format) => format.bits() as usize,
        }
    }

    fn value(self, code: u8) -> f64 {
        f64::from(match self {
            MxFormat::Fp8 => Fp8Format::E4m3.decode(code),
            MxFormat::Bf8 => Fp8Format::E5m2.decode(code),
            MxFormat::Narrow(format) => format.decode(code),
        })
    }
}

/// gfx950's `V_MFMA_[SCALE_]F32_{16X16X128,32X32X64}_F8F6F4`: M and K.
fn f8f6f4_shape(name: &str) -> Option<(usize, usize, bool)> {
    let base = base_name(name);
    let (scaled, rest) = match base.strip_prefix("V_MFMA_SCALE_F32_") {
        Some(rest) => (true, rest),
        None => (false, base.strip_prefix("V_MFMA_F32_")?),
    };
    if rest.starts_with("16X16X128_F8F6F4") {
        Some((16, 128, scaled))
    } else if rest.starts_with("32X32X64_F8F6F4") {
        Some((32, 64, scaled))
    } else {
        None
    }
}

/// Where element k of an F8F6F4 operand's row (or column) `outer` lives:
/// (lane, bit offset in the lane's registers). Each lane holds 32 k; 6- and
/// 4-bit elements are packed densely from the low bits (lane
/// `outer + M*(k/32)`), while the 8-register 8-bit operands are two halves
/// of 16 k per lane, registers 0-3 for k < K/2 and 4-7 for the rest (the
/// CDNA4 guide's FP8 tables; composable_kernel's hardware probe agrees).
fn f8f6f4_place(m: usize, k_total: usize, format: MxFormat, outer: usize, k: usize) -> (usize, usize) {
    match format {
        MxFormat::Fp8 | MxFormat::Bf8 => {
            let (half, k) = (k / (k_total / 2), k % (k_total / 2));
            (outer + m * (k / 16), 8 * (16 * half + k % 16))
        }
        MxFormat::Narrow(narrow) => (outer + m * (k / 32), narrow.bits() as usize * (k % 32)),
    }
}

/// F8F6F4 MFMA (gfx950): cbsz is A's format and blgp B's (0 fp8, 1 bf8,
/// 2 fp6, 3 bf6, 4 fp4; OCP formats), with no broadcast. The scaled form
/// multiplies each product by A's and B's E8M0 scales: the scale of row i
/// (column j) and k-block k/32 is in lane `i + M*(k/32)` of the scale
/// source, the byte op_sel (bit 0) and op_sel_hi (bit 1) pick.
fn f8f6f4(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let (m, k_total, scaled) = f8f6f4_shape(&i.name).ok_or(Fault::Unimplemented)?;
    let unsupported = |what: &str| Fault::UnimplementedCase(format!("{}: {what}", i.name));
    let (a_format, b_format) = match (MxFormat::of(i.imm(0)), MxFormat::of(i.imm(1))) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(unsupported("an undefined format (cbsz/blgp above 4)")),
    };
    if i.srcs.iter().any(|s| s.mods != 0) || i.imms.len() != if scaled { 4 } else { 2 } {
        return Err(unsupported("source modifiers or other controls"));
    }
    let ([a, b, acc, scales @ ..], [d]) = (i.srcs.as_slice(), i.defs.as_slice()) else {
        return Err(unsupported("other operands"));
    };
    let shape = Shape::new(m, m, k_total, 1, Element::F32);
    if !sized(d, shape.result_dwords())
        || !sized(&acc.operand, shape.result_dwords())
        || !sized(&a.operand, a_format.dwords())
        || !sized(&b.operand, b_format.dwords())
        || scales.len() != if scaled { 2 } else { 0 }
    {
        return Err(unsupported("operands of other sizes"));
    }
    // Every lane's elements, as values.
    let read = |operand: &Operand, format: MxFormat| -> Vec<Vec<f64>> {
        let bits = match format {
            MxFormat::Narrow(narrow) => narrow.bits() as usize,
            _ => 8,
        };
        let raw: Vec<Vec<u32>> =
            (0..LANES).map(|lane| (0..format.dwords()).map(|d| c.wave.lane32_at(operand, lane, d)).collect()).collect();
        let mut values = vec![vec![0.0; k_total]; m];
        for (outer, row) in values.iter_mut().enumerate() {
            for (k, value) in row.iter_mut().enumerate() {
                let (lane, bit) = f8f6f4_place(m, k_total, format, outer, k);
                let word = u64::from(raw[lane][bit / 32]) | u64::from(*raw[lane].get(bit / 32 + 1).unwrap_or(&0)) << 32;
                *value = format.value((word >> (bit % 32)) as u8 & ((1u16 << bits) - 1) as u8);
            }
        }
        values
    };
    let (va, vb) = (read(&a.operand, a_format), read(&b.operand, b_format));
    // Scales per (row or column, k-block), 1 when not scaled.
    let blocks = k_total / 32;
    let scale = |which: usize| -> Vec<Vec<f64>> {
        let Some(source) = scales.get(which) else {
            return vec![vec![1.0; blocks]; m];
        };
        let modifiers = i.imm(2 + which);
        let byte = u32::from(modifiers & OP_SEL_0 as i64 != 0) | u32::from(modifiers & OP_SEL_1 as i64 != 0) << 1;
        (0..m)
            .map(|outer| {
                (0..blocks)
                    .map(|block| e8m0((c.wave.lane32(&source.operand, outer + m * block) >> (8 * byte)) as u8))
                    .collect()
            })
            .collect()
    };
    let (scale_a, scale_b) = (scale(0), scale(1));
    let mut results = vec![vec![0u32; shape.results_per_lane()]; LANES];
    for row in 0..m {
        for column in 0..m {
            let (lane, register) = shape.output_place(row, column, 0);
            let c_value = f64::from(f32::from_bits(accumulator(c, &acc.operand, false, lane, register) as u32));
            let sum: f64 =
                (0..k_total).map(|k| va[row][k] * vb[column][k] * scale_a[row][k / 32] * scale_b[column][k / 32]).sum();
            results[lane][register] = ((sum + c_value) as f32).to_bits();
        }
    }
    for (lane, values) in results.iter().enumerate() {
        for (register, bits) in values.iter().enumerate() {
            c.wave.write_lane32_at(d, lane, register, *bits);
        }
    }
    Ok(())
}

/// The dense shape a sparse MFMA (SMFMAC) computes, and whether its
/// sources are in split halves (gfx950's own forms):
/// `V_SMFMAC_F32_16X16X32_F16_e64` is a 16x16x32 f16 product whose A holds
/// 2 of every 4 k.
pub fn sparse_shape(name: &str) -> Option<(Shape, bool)> {
    use Element::*;
    let base = base_name(name);
    let base = base.strip_suffix("_vgprcd").unwrap_or(base);
    let eight_bit = |m: usize, k: usize, pair: &str| {
        let (a, b) = pair.split_once('_')?;
        let format = |f: &str| match f {
            "FP8" => Some(Fp8),
            "BF8" => Some(Bf8),
            _ => None,
        };
        Some(Shape::mixed(m, k, format(a)?, format(b)?))
    };
    let rest = base.strip_prefix("V_SMFMAC_")?;
    Some(match rest {
        "F32_16X16X32_F16" => (Shape::new(16, 16, 32, 1, F16), false),
        "F32_32X32X16_F16" => (Shape::new(32, 32, 16, 1, F16), false),
        "F32_16X16X32_BF16" => (Shape::new(16, 16, 32, 1, Bf16), false),
        "F32_32X32X16_BF16" => (Shape::new(32, 32, 16, 1, Bf16), false),
        "I32_16X16X64_I8" => (Shape::new(16, 16, 64, 1, I8), false),
        "I32_32X32X32_I8" => (Shape::new(32, 32, 32, 1, I8), false),
        "F32_16X16X64_F16" => (Shape::new(16, 16, 64, 1, F16), true),
        "F32_32X32X32_F16" => (Shape::new(32, 32, 32, 1, F16), true),
        "F32_16X16X64_BF16" => (Shape::new(16, 16, 64, 1, Bf16), true),
        "F32_32X32X32_BF16" => (Shape::new(32, 32, 32, 1, Bf16), true),
        "I32_16X16X128_I8" => (Shape::new(16, 16, 128, 1, I8), true),
        "I32_32X32X64_I8" => (Shape::new(32, 32, 64, 1, I8), true),
        _ => {
            if let Some(pair) = rest.strip_prefix("F32_16X16X64_") {
                (eight_bit(16, 64, pair)?, false)
            } else if let Some(pair) = rest.strip_prefix("F32_32X32X32_") {
                (eight_bit(32, 32, pair)?, false)
            } else if let Some(pair) = rest.strip_prefix("F32_16X16X128_") {
                (eight_bit(16, 128, pair)?, true)
            } else if let Some(pair) = rest.strip_prefix("F32_32X32X64_") {
                (eight_bit(32, 64, pair)?, true)
            } else {
                return None;
            }
        }
    })
}

/// Where element k of row (or column) `outer` of a split-halves source is:
/// (lane, slot). Each half of K is laid out as the half-K product's
/// source, half 0 in the first half of the lane's slots (registers 0-3 of
/// B's 8, 0-1 of A's 4 stored), half 1 in the second (the CDNA4 guide's
/// SMFMAC tables).
fn split_place(shape: &Shape, outer: usize, k: usize) -> (usize, usize) {
    let (half_k, per_half) = (shape.k / 2, shape.per_lane() / 2);
    let (half, k) = (k / half_k, k % half_k);
    (outer + shape.m * (k / per_half), per_half * half + k % per_half)
}

/// `values` (per lane, in split-halves slot order) in the ordinary layout
/// of `shape`'s sources.
fn from_split(shape: &Shape, values: &[Vec<u64>]) -> Vec<Vec<u64>> {
    let mut ordinary = vec![vec![0u64; shape.per_lane()]; LANES];
    for outer in 0..shape.m {
        for k in 0..shape.k {
            let (lane, slot) = split_place(shape, outer, k);
            let (to_lane, to_slot) = shape.input_place(outer, k, 0);
            ordinary[to_lane][to_slot] = values[lane][slot];
        }
    }
    ordinary
}

/// A sparse lane's dense k-elements (slot order): its `stored` values are 2
/// per group of 4 k, and each group's 4-bit index (bits 1:0 the position of
/// the first stored value, bits 3:2 of the second, first < second) places
/// them; the other two are zero. None: an index with the positions out of
/// order (the hardware's result is undefined).
pub fn expand_sparse(stored: &[u64], index: u32) -> Option<Vec<u64>> {
    let mut dense = vec![0u64; 2 * stored.len()];
    for (group, pair) in stored.chunks(2).enumerate() {
        let nibble = index >> (4 * group) & 0xf;
        let (first, second) = ((nibble & 3) as usize, (nibble >> 2) as usize);
        if first >= second {
            return None;
        }
        dense[4 * group + first] = pair[0];
        dense[4 * group + second] = pair[1];
    }
    Some(dense)
}

/// SMFMAC: D = A*B + D with A 4:2 structured-sparse. Its operands are D
/// (also the accumulator), A (the stored halves), B (dense) and an index
/// VGPR per lane; the index set a lane reads is abid's when cbsz is 0 (16-
/// bit forms: 4 sets of 8 bits; 8-bit forms: 2 of 16), else set 0 (the
/// CDNA3 calculator and the CDNA4 guide, section 7.5). gfx950's own forms
/// (4-register A, 8-register B, twice the k) hold each half of K as the
/// half-K form would, one after the other (`split_place`); their 16-bit
/// forms have 2 index sets of 16 bits, their 8-bit forms one of 32.
fn smfmac(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let (shape, split) = sparse_shape(&i.name).ok_or(Fault::Unimplemented)?;
    if i.srcs.iter().any(|s| s.mods != 0) || i.imms.len() > 2 {
        return Err(super::unsupported_modifier("SMFMAC source"));
    }
    let [d] = i.defs.as_slice() else {
        return Err(Fault::UnimplementedCase("an SMFMAC with other operands".into()));
    };
    // A, B, then the accumulator (tied to D) and the index, in either order.
    let (a, b, index) = match i.srcs.as_slice() {
        [a, b, x, y] if x.operand == *d => (a, b, y),
        [a, b, x, y] if y.operand == *d => (a, b, x),
        _ => return Err(Fault::UnimplementedCase("an SMFMAC with other operands".into())),
    };
    let dense_dwords = shape.source_dwords();
    if !sized(d, shape.result_dwords())
        || !sized(&a.operand, dense_dwords / 2)
        || !sized(&b.operand, dense_dwords)
        || !sized(&index.operand, 1)
    {
        return Err(Fault::UnimplementedCase(format!("{} with operands of other sizes", i.name)));
    }
    let formats = eight_bit_formats(c, i, &shape)?;
    let per_lane = shape.per_lane();
    // Index sets: per_lane bits each (4 bits per group of 4 k).
    let sets = 32 / per_lane;
    let set = if i.imm(0) == 0 { i.imm(1) as usize & (sets - 1) } else { 0 };
    let bits = shape.element.bits();
    let mut va = Vec::with_capacity(LANES);
    for lane in 0..LANES {
        let stored = lane_elements(c, &a.operand, lane, dense_dwords / 2, bits, per_lane / 2);
        let index_bits = c.wave.lane32(&index.operand, lane) >> (set * per_lane);
        va.push(expand_sparse(&stored, index_bits).ok_or_else(|| {
            Fault::UnimplementedCase(format!(
                "{}: lane {lane}'s sparsity index {index_bits:#x} is out of order (undefined)",
                i.name
            ))
        })?);
    }
    let vb = read_source(c, &b.operand, &shape);
    let (va, vb) = if split { (from_split(&shape, &va), from_split(&shape, &vb)) } else { (va, vb) };
    multiply(c, &shape, formats, 0, (&va, &vb), d, d);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Shape {
        shape(name).unwrap_or_else(|| panic!("{name}"))
    }

    #[test]
    fn names_give_shapes_and_operand_sizes() {
        let s = named("V_MFMA_F32_32X32X1F32_e64");
        assert_eq!((s.m, s.k, s.blocks, s.source_dwords(), s.result_dwords()), (32, 1, 2, 1, 32));
        let s = named("V_MFMA_F32_32X32X8F16_vgprcd_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (4, 2, 16));
        let s = named("V_MFMA_F32_16X16X2BF16_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (2, 1, 16));
        let s = named("V_MFMA_I32_16X16X16I8_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (4, 1, 4));
        let s = named("V_MFMA_I32_32X32X16I8_vgprcd_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (8, 2, 16));
        let s = named("V_MFMA_F64_16X16X4F64_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (1, 2, 8));
        let s = named("V_MFMA_F64_4X4X4F64_vgprcd_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (1, 2, 2));
        let s = named("V_MFMA_F32_16X16X8XF32_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (2, 2, 4));
        let s = named("V_MFMA_F32_16X16X32_BF8_FP8_vgprcd_e64");
        assert_eq!((s.element, s.b_element), (Element::Bf8, Element::Fp8));
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (8, 2, 4));
        let s = named("V_MFMA_F32_32X32X16_BF16_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (8, 4, 16));
        let s = named("V_MFMA_I32_16X16X64_I8_e64");
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (16, 4, 4));
        assert_eq!(shape("V_MFMA_F32_16X16X128_F8F6F4_f8_f8_e64"), None);
        assert_eq!(shape("V_SMFMAC_F32_16X16X32_F16_e64"), None);
        assert_eq!(shape("V_ACCVGPR_READ_B32_e64"), None);
    }

    #[test]
    fn sparse_names_and_indexes() {
        let (s, _) = sparse_shape("V_SMFMAC_F32_16X16X32_F16_e64").unwrap();
        assert_eq!((s.per_lane(), s.source_dwords(), s.result_dwords()), (8, 4, 4));
        let (s, _) = sparse_shape("V_SMFMAC_F32_32X32X32_BF8_FP8_e64").unwrap();
        assert_eq!((s.element, s.b_element, s.per_lane(), s.source_dwords()), (Element::Bf8, Element::Fp8, 16, 4));
        // gfx950's own forms: twice the k, each half laid out as the half-K form.
        let (s, split) = sparse_shape("V_SMFMAC_F32_16X16X64_F16_e64").unwrap();
        assert_eq!((s.k, s.per_lane(), s.source_dwords(), split), (64, 16, 8, true));
        let (s, split) = sparse_shape("V_SMFMAC_F32_32X32X64_BF8_FP8_e64").unwrap();
        assert_eq!((s.k, s.per_lane(), split), (64, 32, true));
        assert_eq!(split_place(&s, 3, 0), (3, 0));
        assert_eq!(split_place(&s, 3, 31), (35, 15), "half 0 as the 32x32x32 form");
        assert_eq!(split_place(&s, 3, 32), (3, 16), "half 1 after it");
        assert_eq!(split_place(&s, 3, 63), (35, 31));
        // Group 0 keeps positions 1 and 3, group 1 positions 0 and 2.
        assert_eq!(expand_sparse(&[10, 11, 20, 21], 0x8d), Some(vec![0, 10, 0, 11, 20, 0, 21, 0]));
        // Positions out of order: undefined.
        assert_eq!(expand_sparse(&[10, 11], 0x1), None);
        assert_eq!(expand_sparse(&[10, 11], 0x5), None);
    }

    #[test]
    fn four_by_four_f32_layout() {
        // 16 blocks of 4x4x1: A[i][0] of block b in lane 4b+i, B likewise;
        // D[i][j] of block b in register i of lane 4b+j.
        let s = named("V_MFMA_F32_4X4X1F32_e64");
        assert_eq!(s.input_place(2, 0, 0), (2, 0));
        assert_eq!(s.input_place(3, 0, 15), (63, 0));
        assert_eq!(s.output_place(0, 0, 0), (0, 0));
        assert_eq!(s.output_place(2, 1, 0), (1, 2));
        assert_eq!(s.output_place(3, 2, 5), (22, 3));
    }

    #[test]
    fn thirty_two_by_thirty_two_f16_layout() {
        // A[i][k]: lane i + 32*(k/4), half k%4 of the register pair.
        let s = named("V_MFMA_F32_32X32X8F16_e64");
        assert_eq!(s.input_place(5, 0, 0), (5, 0));
        assert_eq!(s.input_place(5, 3, 0), (5, 3));
        assert_eq!(s.input_place(5, 4, 0), (37, 0));
        assert_eq!(s.input_place(31, 7, 0), (63, 3));
        // D[i][j]: rows in groups of 4 registers, the second 4 rows of each
        // 8 in lanes 32-63: lane j + 32*((i/4)%2), register 4*(i/8) + i%4.
        assert_eq!(s.output_place(0, 0, 0), (0, 0));
        assert_eq!(s.output_place(3, 7, 0), (7, 3));
        assert_eq!(s.output_place(4, 7, 0), (39, 0));
        assert_eq!(s.output_place(8, 0, 0), (0, 4));
        assert_eq!(s.output_place(31, 31, 0), (63, 15));
    }

    #[test]
    fn multi_block_and_f64_layouts() {
        // 32x32x1, 2 blocks: block 1's A in lanes 32-63, its D 16 registers on.
        let s = named("V_MFMA_F32_32X32X1F32_e64");
        assert_eq!(s.input_place(7, 0, 1), (39, 0));
        assert_eq!(s.output_place(9, 3, 1), (3, 21));
        // 16x16x1, 4 blocks: D[i][j] of block b in lane j + 16*(i/4), register 4b + i%4.
        let s = named("V_MFMA_F32_16X16X1F32_e64");
        assert_eq!(s.output_place(6, 2, 3), (18, 14));
        // 16x16x4 f64: D[i][j] in lane j + 16*(i%4), register pair i/4.
        let s = named("V_MFMA_F64_16X16X4F64_e64");
        assert_eq!(s.input_place(3, 2, 0), (35, 0));
        assert_eq!(s.output_place(5, 2, 0), (18, 1));
        // 4x4x4 f64, 4 blocks: A[i][k] of block b in lane i + 4b + 16k;
        // D[i][j] in lane j + 4b + 16i, one register pair.
        let s = named("V_MFMA_F64_4X4X4F64_e64");
        assert_eq!(s.input_place(1, 2, 3), (45, 0));
        assert_eq!(s.output_place(2, 1, 3), (45, 0));
    }

    #[test]
    fn every_layout_is_a_bijection() {
        let names = [
            "F32_32X32X1F32",
            "F32_32X32X2F32",
            "F32_16X16X1F32",
            "F32_16X16X4F32",
            "F32_4X4X1F32",
            "F32_32X32X4F16",
            "F32_32X32X8F16",
            "F32_16X16X4F16",
            "F32_16X16X16F16",
            "F32_4X4X4F16",
            "F32_32X32X2BF16",
            "F32_32X32X4BF16",
            "F32_16X16X2BF16",
            "F32_16X16X8BF16",
            "F32_4X4X2BF16",
            "F32_32X32X4BF16_1K",
            "F32_32X32X8BF16_1K",
            "F32_16X16X4BF16_1K",
            "F32_16X16X16BF16_1K",
            "F32_4X4X4BF16_1K",
            "I32_32X32X4I8",
            "I32_32X32X8I8",
            "I32_16X16X4I8",
            "I32_16X16X16I8",
            "I32_4X4X4I8",
            "I32_32X32X16I8",
            "I32_16X16X32I8",
            "F64_16X16X4F64",
            "F64_4X4X4F64",
            "F32_16X16X8XF32",
            "F32_32X32X4XF32",
            "F32_16X16X32_FP8_BF8",
            "F32_32X32X16_BF8_FP8",
            "F32_16X16X32_F16",
            "F32_32X32X16_BF16",
            "I32_16X16X64_I8",
            "I32_32X32X32_I8",
        ];
        for name in names {
            let s = named(&format!("V_MFMA_{name}_e64"));
            let mut inputs = vec![false; LANES * s.per_lane()];
            let mut outputs = vec![false; LANES * s.results_per_lane()];
            for b in 0..s.blocks {
                for i in 0..s.m {
                    for k in 0..s.k {
                        let (lane, slot) = s.input_place(i, k, b);
                        assert!(slot < s.per_lane() && !inputs[lane * s.per_lane() + slot], "{name} A");
                        inputs[lane * s.per_lane() + slot] = true;
                    }
                    for j in 0..s.n {
                        let (lane, register) = s.output_place(i, j, b);
                        let at = lane * s.results_per_lane() + register;
                        assert!(lane < LANES && register < s.results_per_lane() && !outputs[at], "{name} D");
                        outputs[at] = true;
                    }
                }
            }
            assert!(inputs.iter().all(|x| *x) && outputs.iter().all(|x| *x), "{name}");
        }
    }
}
