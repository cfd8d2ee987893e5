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
//! MFMA works on the whole wave: it reads and writes all 64 lanes whatever
//! EXEC holds (the matrix is a wave-wide operand). The broadcast controls
//! (cbsz, abid, blgp; blgp is the negation of the f64 forms on gfx940) are
//! not modelled: a non-zero value stops the run. gfx940's xf32, fp8/bf8
//! and sparse (SMFMAC) forms have no semantics (they stop there), nor has
//! an MFMA with AGPR C/D on gfx940+ (see `mfma`).
//!
//! Arithmetic: float products with f32 results are each exact in f64; the
//! K products of one element and its C are summed in f64 in k order and
//! rounded once to f32 (the hardware's internal order and rounding are not
//! documented; inputs whose sums are exact give the same result in any
//! model). 8-bit integers multiply and accumulate in i32, wrapping. f64
//! accumulates with a fused multiply-add per product, in k order, from C.

use super::{base_name, Context, Handler};
use crate::error::Fault;
use crate::operands::Operand;
use crate::program::Inst;
use crate::wave::LANES;

/// The element type of A and B (which fixes the type of C and D).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    F32,
    F16,
    Bf16,
    I8,
    F64,
}

impl Element {
    fn bits(self) -> usize {
        match self {
            Element::F32 => 32,
            Element::F16 | Element::Bf16 => 16,
            Element::I8 => 8,
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
    pub element: Element,
}

impl Shape {
    const fn new(m: usize, n: usize, k: usize, blocks: usize, element: Element) -> Self {
        Shape { m, n, k, blocks, element }
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
        _ => return None,
    };
    Some(shape)
}

pub fn handler(name: &str) -> Option<Handler> {
    shape(name).map(|_| mfma as Handler)
}

/// Every lane's A or B elements, as raw bits (slot order).
fn read_source(c: &Context<'_>, operand: &Operand, shape: &Shape) -> Vec<Vec<u64>> {
    let bits = shape.element.bits();
    (0..LANES)
        .map(|lane| {
            let raw: u128 = (0..shape.source_dwords())
                .map(|d| u128::from(c.wave.lane32_at(operand, lane, d)) << (32 * d))
                .fold(0, |all, dword| all | dword);
            let mask = (1u128 << bits) - 1;
            (0..shape.per_lane()).map(|slot| ((raw >> (slot * bits)) & mask) as u64).collect()
        })
        .collect()
}

/// An A or B element's value (integers as i64, exact).
fn value(element: Element, bits: u64) -> f64 {
    match element {
        Element::F32 => f64::from(f32::from_bits(bits as u32)),
        Element::F16 => half::f16::from_bits(bits as u16).to_f64(),
        Element::Bf16 => half::bf16::from_bits(bits as u16).to_f64(),
        Element::I8 => f64::from(bits as u8 as i8),
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

fn mfma(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let shape = shape(&i.name).ok_or(Fault::Unimplemented)?;
    // cbsz, abid, blgp (and any source modifier) change which elements
    // are read: not modelled.
    if i.imms.iter().any(|v| *v != 0) {
        return Err(super::unsupported_modifier("MFMA cbsz/abid/blgp"));
    }
    if i.srcs.iter().any(|s| s.mods != 0) {
        return Err(super::unsupported_modifier("MFMA source"));
    }
    let ([a, b, acc], [d]) = (i.srcs.as_slice(), i.defs.as_slice()) else {
        return Err(Fault::UnimplementedCase("an MFMA with other operands".into()));
    };
    let sizes_fit = |operand: &Operand, dwords: usize| match *operand {
        Operand::Vector { dwords: n, .. } | Operand::Accum { dwords: n, .. } => usize::from(n) == dwords,
        _ => true,
    };
    if !sizes_fit(d, shape.result_dwords())
        || !sizes_fit(&acc.operand, shape.result_dwords())
        || !sizes_fit(&a.operand, shape.source_dwords())
        || !sizes_fit(&b.operand, shape.source_dwords())
    {
        return Err(Fault::UnimplementedCase(format!("{} with operands of other sizes", i.name)));
    }
    // LLVM 15 decodes gfx940's MFMAs under their gfx908 names (f32, f16,
    // 8-bit 4-element) with AGPR C/D whatever the encoding's acc_cd bit
    // says (v[..] code disassembles as a[..]; LLVM 17 decodes them right):
    // there an AGPR C/D may really be VGPRs, so it stops rather than
    // compute in the wrong file.
    let processor = c.machine.processor.name;
    let gfx940_on = processor.starts_with("gfx94") || processor.starts_with("gfx95");
    if gpuinstr::toolchain::LLVM_MAJOR < 17 && gfx940_on && matches!(d, Operand::Accum { .. }) {
        return Err(Fault::UnimplementedCase(format!(
            "{} with AGPR C/D on {processor} (LLVM's decoder may have taken VGPRs for AGPRs)",
            i.name
        )));
    }
    let (va, vb) = (read_source(c, &a.operand, &shape), read_source(c, &b.operand, &shape));
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
                let c_bits = accumulator(c, &acc.operand, wide, lane, register);
                let products = (0..shape.k).map(|k| (a_at(row, k, block), b_at(k, column, block)));
                results[lane][register] = match element {
                    Element::I8 => {
                        let sum = products.fold(c_bits as u32 as i32, |sum, (x, y)| {
                            sum.wrapping_add(i32::from(x as u8 as i8) * i32::from(y as u8 as i8))
                        });
                        u64::from(sum as u32)
                    }
                    Element::F64 => {
                        let sum = products.fold(f64::from_bits(c_bits), |sum, (x, y)| {
                            f64::from_bits(x).mul_add(f64::from_bits(y), sum)
                        });
                        sum.to_bits()
                    }
                    _ => {
                        let c_value = f64::from(f32::from_bits(c_bits as u32));
                        let sum: f64 = products.map(|(x, y)| value(element, x) * value(element, y)).sum();
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
        assert_eq!(shape("V_MFMA_F32_16X16X8XF32_e64"), None);
        assert_eq!(shape("V_MFMA_F32_16X16X32_FP8_FP8_e64"), None);
        assert_eq!(shape("V_ACCVGPR_READ_B32_e64"), None);
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
