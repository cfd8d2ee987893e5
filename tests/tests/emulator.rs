//! The emulator (issue 7) on kernels hipcc compiled from our own sources,
//! for gfx906, gfx908, gfx90a and gfx940/gfx942: every result is compared with the same
//! computation on the CPU. Inputs are chosen so float results are exact
//! whatever order or contraction the compiler picked.

use gpuinstr_emulator::{Device, EmulatorError, Launch};
use gpuinstr_tests::{
    debian_package_file, every_target, input, object_for_every_target, run_ok, scratch, test_kernels,
};

pub(crate) const TARGETS: [&str; 2] = ["gfx908", "gfx90a"];

pub(crate) fn device(object: &std::path::Path, target: &str) -> Device {
    Device::open(object, Some(target)).unwrap_or_else(|e| panic!("{target}: {e}"))
}

pub(crate) fn bytes<T: Copy, const N: usize>(values: &[T], to_bytes: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|v| to_bytes(*v)).collect()
}

pub(crate) fn f32s(values: &[f32]) -> Vec<u8> {
    bytes(values, f32::to_le_bytes)
}

pub(crate) fn i32s(values: &[i32]) -> Vec<u8> {
    bytes(values, i32::to_le_bytes)
}

pub(crate) fn f64s(values: &[f64]) -> Vec<u8> {
    bytes(values, f64::to_le_bytes)
}

pub(crate) fn pointer(address: u64) -> Vec<u8> {
    address.to_le_bytes().to_vec()
}

pub(crate) fn read<T, const N: usize>(device: &Device, address: u64, count: usize, from: fn([u8; N]) -> T) -> Vec<T> {
    let raw = device.memory.bytes(address, count * N).unwrap();
    raw.chunks_exact(N).map(|c| from(c.try_into().unwrap())).collect()
}

pub(crate) fn read_f32(device: &Device, address: u64, count: usize) -> Vec<f32> {
    read(device, address, count, f32::from_le_bytes)
}

pub(crate) fn read_i32(device: &Device, address: u64, count: usize) -> Vec<i32> {
    read(device, address, count, i32::from_le_bytes)
}

pub(crate) fn read_u32(device: &Device, address: u64, count: usize) -> Vec<u32> {
    read(device, address, count, u32::from_le_bytes)
}

/// Every quotient bit-identical to the CPU's correctly rounded one.
fn assert_quotients<T: Copy + std::fmt::LowerExp>(
    target: &str,
    num: &[T],
    den: &[T],
    out: &[T],
    divide: fn(T, T) -> T,
    bits: fn(T) -> u64,
) {
    for ((n, d), got) in num.iter().zip(den).zip(out) {
        let want = divide(*n, *d);
        assert_eq!(bits(*got), bits(want), "{target}: {n:e} / {d:e} = {want:e}, not {got:e}");
    }
}

const ARITHMETIC: &str = "emulator/arithmetic.hip";

#[test]
fn arithmetic_kernels_compute_what_the_cpu_computes() {
    for target in every_target() {
        let mut d = device(&object_for_every_target(ARITHMETIC), target);

        // Vector add over a grid whose last workgroup is partly past N.
        let n = 1000;
        let a: Vec<f32> = (0..1024).map(|i| i as f32 * 0.25).collect();
        let b: Vec<f32> = (0..1024).map(|i| 1000.0 - i as f32).collect();
        let (pa, pb) = (d.allocate("a", &f32s(&a)), d.allocate("b", &f32s(&b)));
        let pc = d.allocate("c", &f32s(&[-1.0; 1024]));
        let args = [pointer(pc), pointer(pa), pointer(pb), i32s(&[n])];
        let report = d.launch("_Z9vectorAddPfPKfS1_i", Launch::linear(4, 256), &args).unwrap();
        let c = read_f32(&d, pc, 1024);
        for i in 0..1024 {
            let expected = if i < n as usize { a[i] + b[i] } else { -1.0 };
            assert_eq!(c[i], expected, "{target}: vectorAdd C[{i}]");
        }
        assert_eq!(report.counts.per_wave.len(), 16, "4 workgroups of 4 waves");

        // Double precision: a*v + v*v - 0.5*v.
        let x: Vec<f64> = (0..64).map(|i| f64::from(i) / 8.0 - 3.0).collect();
        let (px, po) = (d.allocate("x", &f64s(&x)), d.allocate("out", &f64s(&[0.0; 64])));
        d.launch("_Z10doubleMathPdPKdd", Launch::linear(1, 64), &[pointer(po), pointer(px), f64s(&[1.75])]).unwrap();
        let out = read(&d, po, 64, f64::from_le_bytes);
        for i in 0..64 {
            let v = x[i];
            assert_eq!(out[i], 1.75 * v + v * v - 0.5 * v, "{target}: doubleMath[{i}]");
        }

        // Integer division and remainder, signed and unsigned, both signs.
        let num: Vec<i32> = (0..64).map(|i| (i - 32) * 977 + 13).collect();
        let den: Vec<i32> = (0..64).map(|i| if i == 32 { 7 } else { (i - 32) * 3 + 1 }).collect();
        let (pn, pd) = (d.allocate("num", &i32s(&num)), d.allocate("den", &i32s(&den)));
        let (pq, pr) = (d.allocate("q", &i32s(&[0; 64])), d.allocate("r", &i32s(&[0; 64])));
        let args = [pointer(pq), pointer(pr), pointer(pn), pointer(pd)];
        d.launch("_Z15integerDivisionPiPjPKiS2_", Launch::linear(1, 64), &args).unwrap();
        let (q, r) = (read_i32(&d, pq, 64), read_u32(&d, pr, 64));
        for i in 0..64 {
            assert_eq!(q[i], num[i] / den[i], "{target}: {} / {}", num[i], den[i]);
            assert_eq!(r[i], (num[i] as u32) % (den[i] as u32), "{target}: {} % {} (unsigned)", num[i], den[i]);
        }

        // Float division is correctly rounded (the div_scale/fmas/fixup sequence).
        let num: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) * 1.37).collect();
        let den: Vec<f32> = (0..64).map(|i| 0.3 + i as f32 * 0.77).collect();
        let (pn, pd) = (d.allocate("num", &f32s(&num)), d.allocate("den", &f32s(&den)));
        let po = d.allocate("out", &f32s(&[0.0; 64]));
        d.launch("_Z13floatDivisionPfPKfS1_", Launch::linear(1, 64), &[pointer(po), pointer(pn), pointer(pd)]).unwrap();
        let out = read_f32(&d, po, 64);
        for i in 0..64 {
            assert_eq!(out[i], num[i] / den[i], "{target}: {} / {}", num[i], den[i]);
        }

        // Operands v_div_scale must scale: denormal, tiny and huge
        // denominators, quotients that overflow or are denormal, tiny
        // numerators; every result as the CPU rounds it.
        let pairs: [(f32, f32); 16] = [
            (1.0, 1e-40),
            (3.5, -7e-39),
            (1e38, 1e-5),
            (-3e38, 0.25),
            (1e-30, 1e20),
            (1e-38, 3.0),
            (2e-44, 0.7),
            (1.0, 3e38),
            (5e-39, 3e38),
            (7.0, 1.7e38),
            (1e-45, 1e-45),
            (1e-20, 1e25),
            (6e37, 1e-3),
            (-2.5e-39, -1e-39),
            (1.0, 3.0),
            (f32::MAX, f32::MIN_POSITIVE),
        ];
        let num: Vec<f32> = (0..64).map(|i| pairs[i % 16].0 * if i >= 32 { -1.0 } else { 1.0 }).collect();
        let den: Vec<f32> = (0..64).map(|i| pairs[i % 16].1).collect();
        let (pn, pd) = (d.allocate("num", &f32s(&num)), d.allocate("den", &f32s(&den)));
        let po = d.allocate("out", &f32s(&[0.0; 64]));
        d.launch("_Z13floatDivisionPfPKfS1_", Launch::linear(1, 64), &[pointer(po), pointer(pn), pointer(pd)]).unwrap();
        let out = read_f32(&d, po, 64);
        assert_quotients(target, &num, &den, &out, |n, d| n / d, |x| u64::from(x.to_bits()));
        let pairs: [(f64, f64); 12] = [
            (1.0, 1e-310),
            (1e308, 1e-5),
            (1e-300, 1e100),
            (1e-307, 3.0),
            (5e-324, 0.7),
            (1.0, 1.5e308),
            (3e-310, 1e308),
            (1e-200, 1e200),
            (-7.0, 1e-320),
            (f64::MAX, f64::MIN_POSITIVE),
            (1.0, 3.0),
            (2.0, 7.0),
        ];
        let num: Vec<f64> = (0..64).map(|i| pairs[i % 12].0).collect();
        let den: Vec<f64> = (0..64).map(|i| pairs[i % 12].1 * if i >= 32 { -1.0 } else { 1.0 }).collect();
        let (pn, pd) = (d.allocate("num", &f64s(&num)), d.allocate("den", &f64s(&den)));
        let po = d.allocate("out", &f64s(&[0.0; 64]));
        d.launch("_Z14doubleDivisionPdPKdS1_", Launch::linear(1, 64), &[pointer(po), pointer(pn), pointer(pd)])
            .unwrap();
        let out = read(&d, po, 64, f64::from_le_bytes);
        assert_quotients(target, &num, &den, &out, |n, d| n / d, f64::to_bits);

        // Conversions: float -> int truncates, unsigned -> float, float -> double.
        let input: Vec<f32> = (0..64).map(|i| i as f32 * 1.5 - 40.25).collect();
        let pin = d.allocate("in", &f32s(&input));
        let (pi, pf) = (d.allocate("int", &i32s(&[0; 64])), d.allocate("float", &f32s(&[0.0; 64])));
        let pd = d.allocate("double", &f64s(&[0.0; 64]));
        let args = [pointer(pi), pointer(pf), pointer(pd), pointer(pin)];
        d.launch("_Z11conversionsPiPfPdPKf", Launch::linear(1, 64), &args).unwrap();
        let (ints, floats, doubles) =
            (read_i32(&d, pi, 64), read_f32(&d, pf, 64), read(&d, pd, 64, f64::from_le_bytes));
        for i in 0..64 {
            assert_eq!(ints[i], input[i] as i32, "{target}: (int){}", input[i]);
            assert_eq!(floats[i], (i as u32 * 7919) as f32, "{target}: (float){}", i * 7919);
            assert_eq!(doubles[i], f64::from(input[i]) * 3.0, "{target}: (double){} * 3", input[i]);
        }

        // f16 arithmetic (VOP2, VOP3 fma) and packed f16 (VOP3P with a
        // scalar packed constant); inputs keep every result exact in f16.
        let h = |x: f64| half::f16::from_f64(x).to_bits();
        let a: Vec<u16> = (0..64).map(|i| h(f64::from(i) / 4.0)).collect();
        let b: Vec<u16> = (0..64).map(|i| h(f64::from(i % 9))).collect();
        let pairs: Vec<u32> =
            (0..64).map(|i| u32::from(h(f64::from(i % 16) / 2.0)) | (u32::from(h(f64::from(i % 5))) << 16)).collect();
        let (pa, pb) = (d.allocate("a", &bytes(&a, u16::to_le_bytes)), d.allocate("b", &bytes(&b, u16::to_le_bytes)));
        let pp = d.allocate("pairs", &bytes(&pairs, u32::to_le_bytes));
        let (po, ppo) = (d.allocate("out", &[0; 128]), d.allocate("pairs out", &[0; 256]));
        let args = [pointer(po), pointer(ppo), pointer(pa), pointer(pb), pointer(pp)];
        d.launch("_Z8halfMathP6__halfP7__half2PKS_S4_PKS1_", Launch::linear(1, 64), &args).unwrap();
        let out = read(&d, po, 64, u16::from_le_bytes);
        let pairs_out = read_u32(&d, ppo, 64);
        let f = |bits: u16| f64::from(half::f16::from_bits(bits));
        for i in 0..64 {
            let (x, y) = (f(a[i]), f(b[i]));
            assert_eq!(f(out[i]), x * y + (y - x), "{target}: halfMath[{i}]");
            let (lo, hi) = (f(pairs[i] as u16), f((pairs[i] >> 16) as u16));
            let expected = u32::from(h(lo * lo + lo * 0.5)) | (u32::from(h(hi * hi + hi * 2.0)) << 16);
            assert_eq!(pairs_out[i], expected, "{target}: packed halfMath[{i}]");
        }

        // 16-bit integer arithmetic.
        let a: Vec<u16> = (0..64).map(|i| (i * 1237 + 17) as u16).collect();
        let b: Vec<u16> = (0..64).map(|i| (65000 - i * 911) as u16).collect();
        let (pa, pb) = (d.allocate("a", &bytes(&a, u16::to_le_bytes)), d.allocate("b", &bytes(&b, u16::to_le_bytes)));
        let (po, ps) = (d.allocate("out", &[0; 128]), d.allocate("signed", &[0; 128]));
        let args = [pointer(po), pointer(ps), pointer(pa), pointer(pb)];
        d.launch("_Z9shortMathPtPsPKtS2_", Launch::linear(1, 64), &args).unwrap();
        let (out, signed) = (read(&d, po, 64, u16::from_le_bytes), read(&d, ps, 64, i16::from_le_bytes));
        for i in 0..64 {
            let (x, y) = (a[i], b[i]);
            let shifted = (x.wrapping_add(y) << (y & 7)) >> (x & 3);
            let expected = (x.wrapping_mul(y).wrapping_add(x.wrapping_sub(y))) ^ shifted;
            assert_eq!(out[i], expected, "{target}: shortMath[{i}]");
            let (s, t) = (x as i16, y as i16);
            assert_eq!(signed[i], (s.min(t) >> 2).wrapping_sub(s.max(t)), "{target}: signed shortMath[{i}]");
        }

        // Cross-lane shuffles: a butterfly sum, then a rotation.
        let values: Vec<i32> = (0..64).map(|i| i * i - 7).collect();
        let (pin, po) = (d.allocate("in", &i32s(&values)), d.allocate("out", &i32s(&[0; 64])));
        d.launch("_Z8shufflesPiPKi", Launch::linear(1, 64), &[pointer(po), pointer(pin)]).unwrap();
        let total: i32 = values.iter().sum();
        let out = read_i32(&d, po, 64);
        for i in 0..64 {
            assert_eq!(out[i], total + values[(i + 1) % 64], "{target}: shuffles lane {i}");
        }

        // Complex multiply-accumulate (packed f32 on gfx90a); halves of
        // integers keep every product and sum exact.
        let n = 8;
        let a: Vec<f32> = (0..64 * n * 2).map(|i| ((i * 7) % 11) as f32 * 0.5 - 2.5).collect();
        let x: Vec<f32> = (0..n * 2).map(|i| ((i * 5) % 9) as f32 * 0.5 - 2.0).collect();
        let (pa, px) = (d.allocate("a", &f32s(&a)), d.allocate("x", &f32s(&x)));
        let po = d.allocate("out", &f32s(&[0.0; 128]));
        let (alpha_re, alpha_im) = (-0.5f32, 1.5f32);
        let args = [pointer(po), pointer(pa), pointer(px), f32s(&[alpha_re, alpha_im]), i32s(&[n as i32])];
        d.launch("_Z10complexDotP15HIP_vector_typeIfLj2EEPKS0_S3_S0_i", Launch::linear(1, 64), &args).unwrap();
        let out = read_f32(&d, po, 128);
        for i in 0..64 {
            let (mut re, mut im) = (0f32, 0f32);
            for k in 0..n {
                let (p_re, p_im, q_re, q_im) = (a[2 * (i * n + k)], a[2 * (i * n + k) + 1], x[2 * k], x[2 * k + 1]);
                re += p_re * q_re - p_im * q_im;
                im += p_re * q_im + p_im * q_re;
            }
            let expected = [alpha_re * re - alpha_im * im, alpha_re * im + alpha_im * re];
            assert_eq!(out[2 * i..2 * i + 2], expected, "{target}: complexDot[{i}]");
        }

        // Saturating adds and subtracts (the VOP3 clamp bit on integers),
        // with operands on both sides of every bound.
        let a: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i << 28)).collect();
        let b: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(0x85eb_ca6b).rotate_left(i)).collect();
        let (pa, pb) = (d.allocate("a", &bytes(&a, u32::to_le_bytes)), d.allocate("b", &bytes(&b, u32::to_le_bytes)));
        let (po, ps) = (d.allocate("out", &[0; 512]), d.allocate("signed", &[0; 256]));
        let args = [pointer(po), pointer(ps), pointer(pa), pointer(pb)];
        d.launch("_Z14saturatingMathPjPiPKjS2_", Launch::linear(1, 64), &args).unwrap();
        let (out, signed) = (read_u32(&d, po, 128), read_i32(&d, ps, 64));
        for i in 0..64 {
            let (x, y) = (a[i], b[i]);
            assert_eq!(out[2 * i..2 * i + 2], [x.saturating_sub(y), x.saturating_add(y)], "{target}: {x} -/+ {y}");
            assert_eq!(signed[i], (x as i32).saturating_add(y as i32), "{target}: {x} + {y} signed");
        }
    }
}

const MATH_LIBRARY: &str = "emulator/math_library.hip";

#[test]
fn library_math_packed_shorts_and_bytes_compute_what_the_cpu_computes() {
    for target in every_target() {
        let mut d = device(&object_for_every_target(MATH_LIBRARY), target);

        // Double sin/cos over arguments up to 1e300: the device library
        // reduces large ones with 2/pi from v_trig_preop_f64. Within 1e-15
        // of the CPU's (both are within an ulp or two of the truth; a wrong
        // reduction is off by far more).
        let x: Vec<f64> = (0..64)
            .map(|i| {
                let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                sign * 10f64.powi((i * 5) % 300 - 3) * (1.0 + f64::from(i) / 64.0)
            })
            .collect();
        let px = d.allocate("x", &f64s(&x));
        let (ps, pc) = (d.allocate("sin", &f64s(&[0.0; 64])), d.allocate("cos", &f64s(&[0.0; 64])));
        d.launch("_Z6sinCosPdS_PKd", Launch::linear(1, 64), &[pointer(ps), pointer(pc), pointer(px)]).unwrap();
        let (sin, cos) = (read(&d, ps, 64, f64::from_le_bytes), read(&d, pc, 64, f64::from_le_bytes));
        for i in 0..64 {
            let (want_sin, want_cos) = (x[i].sin(), x[i].cos() + (x[i] * 0.5).cos());
            assert!((sin[i] - want_sin).abs() <= 1e-15, "{target}: sin({:e}) = {want_sin:e}, not {:e}", x[i], sin[i]);
            assert!((cos[i] - want_cos).abs() <= 2e-15, "{target}: cos at {:e} = {want_cos:e}, not {:e}", x[i], cos[i]);
        }

        // Packed 16-bit integers, every lane of both halves.
        let a: Vec<u16> = (0..128u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u16).collect();
        let b: Vec<u16> = (0..128u32).map(|i| (i * 40503 + 12345) as u16).collect();
        let (pa, pb) = (d.allocate("a", &bytes(&a, u16::to_le_bytes)), d.allocate("b", &bytes(&b, u16::to_le_bytes)));
        let po = d.allocate("out", &[0; 64 * 4 * 4]);
        let ps = d.allocate("signed", &[0; 64 * 2 * 4]);
        let args = [pointer(po), pointer(ps), pointer(pa), pointer(pb)];
        d.launch("_Z12packedShortsPDv2_tPDv2_sPKS_S4_", Launch::linear(1, 64), &args).unwrap();
        let (out, signed) = (read(&d, po, 64 * 8, u16::from_le_bytes), read(&d, ps, 64 * 4, i16::from_le_bytes));
        for lane in 0..64 {
            for half in 0..2 {
                let (x, y) = (a[2 * lane + half], b[2 * lane + half]);
                let at = |k: usize| out[2 * (4 * lane + k) + half];
                let what = format!("{target}: packedShorts lane {lane} half {half} ({x}, {y})");
                assert_eq!(at(0), x.wrapping_mul(y), "{what}: product");
                assert_eq!(at(1), x.wrapping_add(y).wrapping_sub(y >> (x & 7)), "{what}: sum");
                assert_eq!(at(2), x << (y & 15), "{what}: shift");
                assert_eq!(at(3), x.wrapping_mul(y).wrapping_add(x), "{what}: multiply-add");
                let (s, t) = (x as i16, y as i16);
                assert_eq!(signed[2 * (2 * lane) + half], (s.min(t) >> 2).wrapping_sub(s.max(t)), "{what}: signed");
                assert_eq!(signed[2 * (2 * lane + 1) + half], (x.max(y) - x.min(y)) as i16, "{what}: distance");
            }
        }

        // Byte vectors.
        let a: Vec<u8> = (0..256u32).map(|i| (i * 37 + 11) as u8).collect();
        let b: Vec<u8> = (0..256u32).map(|i| (i * 101 + 3) as u8).collect();
        let (pa, pb) = (d.allocate("a", &a), d.allocate("b", &b));
        let po = d.allocate("out", &[0; 64 * 8]);
        d.launch("_Z5bytesPDv4_hPKS_S2_", Launch::linear(1, 64), &[pointer(po), pointer(pa), pointer(pb)]).unwrap();
        let out = d.memory.bytes(po, 64 * 8).unwrap();
        for lane in 0..64 {
            for k in 0..4 {
                let (x, y) = (a[4 * lane + k], b[4 * lane + k]);
                assert_eq!(
                    out[8 * lane + k],
                    x.wrapping_mul(y).wrapping_add(x >> 1),
                    "{target}: bytes lane {lane}.{k}"
                );
                assert_eq!(out[8 * lane + 4 + k], x.abs_diff(y), "{target}: byte distance lane {lane}.{k}");
            }
        }
    }
}

#[test]
fn sixteen_bit_three_operand_min_max_and_median() {
    for target in every_target() {
        let mut d = device(&object_for_every_target(ARITHMETIC), target);
        // Values on both sides of the constants and of the signed range.
        let a: Vec<u16> = (0..64u32).map(|i| (i.wrapping_mul(0x9e37_79b9) >> 16) as u16).collect();
        let b: Vec<u16> = (0..64u32).map(|i| (i.wrapping_mul(0x85eb_ca6b) >> 13) as u16).collect();
        let c: Vec<u16> = (0..64u32).map(|i| (i * 1031) as u16 ^ 0x8000).collect();
        let [pa, pb, pc] = [("a", &a), ("b", &b), ("c", &c)].map(|(n, v)| d.allocate(n, &bytes(v, u16::to_le_bytes)));
        let (po, ps) = (d.allocate("out", &[0; 512]), d.allocate("signed", &[0; 512]));
        let args = [pointer(po), pointer(ps), pointer(pa), pointer(pb), pointer(pc)];
        d.launch("_Z11smallMinMaxPtPsPKtS2_S2_", Launch::linear(1, 64), &args).unwrap();
        let out = read(&d, po, 256, u16::from_le_bytes);
        let signed = read(&d, ps, 256, i16::from_le_bytes);
        for i in 0..64 {
            let (x, y, z) = (a[i], b[i], c[i]);
            let unsigned = [x.min(y).min(z), y.max(z).max(x), x.clamp(1000, 60000), x.max(y).min(z)];
            assert_eq!(out[4 * i..4 * i + 4], unsigned, "{target}: unsigned {x}, {y}, {z}");
            let (x, y, z) = (x as i16, y as i16, z as i16);
            let expected = [x.min(y).min(z), y.max(z).max(x), x.clamp(-1000, 3000), x.max(y).min(z)];
            assert_eq!(signed[4 * i..4 * i + 4], expected, "{target}: signed {x}, {y}, {z}");
        }
    }
}

#[test]
fn lds_accesses_past_the_allocation_stop_or_do_what_the_hardware_does() {
    for target in every_target() {
        let mut d = device(&object_for_every_target(ARITHMETIC), target);
        let kernel = "_Z13ldsPastTheEndPii";
        let out = d.allocate("out", &[0; 512]);
        let args = [pointer(out), i32s(&[64])];
        // By default an emulator run stops at the first such access.
        let stop = d.launch(kernel, Launch::linear(1, 128), &args).unwrap_err();
        assert!(stop.to_string().contains("is outside the workgroup's 512 bytes"), "{target}: {stop}");
        // Like the hardware: the 64 writes past the end are dropped, the 64
        // reads there give 0, and both are counted.
        d.options.lds_out_of_range = gpuinstr_emulator::LdsOutOfRange::LikeHardware;
        let report = d.launch(kernel, Launch::linear(1, 128), &args).unwrap();
        assert_eq!(report.counts.lds_out_of_range, 128, "{target}");
        assert_eq!(report.counts.lds_writes_out_of_range, 64, "{target}: the writes among them");
        let seen = read_i32(&d, out, 128);
        for t in 0..128 {
            let expected = if t < 64 { t + 1 - 100 } else { -1 };
            assert_eq!(seen[t as usize], expected, "{target}: work-item {t}");
        }
    }
}

#[test]
fn a_grid_ending_in_partial_workgroups_gives_them_their_own_shape() {
    // 100 x 3 work-items in workgroups of 64 x 2: the last workgroup of a
    // row has 36 work-items, the last row of workgroups one row (AQL grids
    // need not be whole workgroups; HIP's hipExtModuleLaunchKernel makes them).
    let (width, height, group) = (100u32, 3u32, [64u32, 2, 1]);
    for target in every_target() {
        let mut d = device(&object_for_every_target(ARITHMETIC), target);
        let out = d.allocate("out", &[0xff; 100 * 3 * 16]);
        let args = [pointer(out), i32s(&[width as i32]), i32s(&[group[0] as i32]), i32s(&[group[1] as i32])];
        let launch = Launch::of_grid([width, height, 1], group);
        assert_eq!(launch.workgroups, [2, 2, 1]);
        let report = d.launch("_Z14workgroupShapeP15HIP_vector_typeIiLj4EEiii", launch, &args).unwrap();
        // 64x2 = 2 waves, 36x2 = 72 work-items = 2 waves, 64x1 = 1 wave, 36x1 = 1 wave.
        assert_eq!(report.counts.per_wave.len(), 6, "{target}: waves");
        let seen = read_i32(&d, out, (width * height * 4) as usize);
        for y in 0..height {
            for x in 0..width {
                let at = ((y * width + x) * 4) as usize;
                let partial_width = if x >= 64 { 36 } else { 64 };
                let partial_height = if y >= 2 { 1 } else { 2 };
                let expected = [(x % 64) as i32, (y % 2) as i32, partial_width, partial_height];
                assert_eq!(seen[at..at + 4], expected, "{target}: work-item ({x}, {y})");
            }
        }
    }
}

#[test]
fn divergent_branches_and_loops() {
    for target in TARGETS {
        let mut d = device(&test_kernels("control_flow"), target);
        let n = 300;
        let input: Vec<i32> = (0..384).map(|i| i * 37 % 101 - 20).collect();
        let pin = d.allocate("in", &i32s(&input));
        let pout = d.allocate("out", &i32s(&[i32::MIN; 384]));
        let report = d
            .launch("_Z17divergentBranchesPiPKii", Launch::linear(3, 128), &[pointer(pout), pointer(pin), i32s(&[n])])
            .unwrap();
        let out = read_i32(&d, pout, 384);
        for i in 0..384 {
            let v = input[i];
            let expected = if i >= n as usize {
                i32::MIN
            } else if v & 1 != 0 {
                v * 3 + 1
            } else {
                v / 2
            };
            assert_eq!(out[i], expected, "{target}: divergentBranches[{i}] of {v}");
        }
        // Each wave ends once: s_endpgm runs as many times as there are waves.
        let endpgm: u64 = report
            .counts
            .per_address
            .iter()
            .filter(|(address, _)| d.program.text(**address).starts_with("s_endpgm"))
            .map(|(_, (waves, _))| *waves)
            .sum();
        assert_eq!(endpgm, 6, "{target}: 3 workgroups of 2 waves end");

        let input: Vec<f32> = (0..500).map(|i| (i % 23) as f32 - 11.0).collect();
        let pin = d.allocate("in", &f32s(&input));
        let pout = d.allocate("out", &f32s(&[0.0; 64]));
        let args = [pointer(pout), pointer(pin), i32s(&[500]), i32s(&[64])];
        d.launch("_Z13loopReductionPfPKfii", Launch::linear(1, 64), &args).unwrap();
        let out = read_f32(&d, pout, 64);
        for (t, value) in out.iter().enumerate() {
            let expected: f32 = (t..500).step_by(64).map(|i| input[i] * input[i]).sum();
            assert_eq!(*value, expected, "{target}: loopReduction[{t}]");
        }
    }
}

#[test]
fn lds_barriers_atomics_and_globals() {
    for target in TARGETS {
        let mut d = device(&test_kernels("memory"), target);
        // Barriers between the waves of a 256-work-item workgroup; the
        // coefficients come from constant memory through s_getpc.
        let input: Vec<f32> = (0..1024).map(|i| (i % 97) as f32).collect();
        let pin = d.allocate("in", &f32s(&input));
        let pout = d.allocate("out", &f32s(&[0.0; 4]));
        d.launch("_Z12ldsReductionPfPKf", Launch::linear(4, 256), &[pointer(pout), pointer(pin)]).unwrap();
        let out = read_f32(&d, pout, 4);
        for b in 0..4 {
            let expected: f32 = (0..256).map(|t| input[b * 256 + t] * ((t & 15) + 1) as f32).sum();
            assert_eq!(out[b], expected, "{target}: ldsReduction block {b}");
        }

        // Global atomics on a device global (found by its symbol), a max,
        // LDS atomics and a compare-and-swap.
        let n = 700;
        let values: Vec<u32> = (0..768).map(|i| (i * 2654435761u64 % 100_003) as u32).collect();
        let pv = d.allocate("values", &bytes(&values, u32::to_le_bytes));
        let pmax = d.allocate("maximum", &[0; 8]);
        let args = [pointer(pv), i32s(&[n]), pointer(pmax)];
        d.launch("_Z7atomicsPKjiPj", Launch::linear(3, 256), &args).unwrap();
        let histogram = d.symbol_address("Histogram").expect("the Histogram global");
        let counts = read_u32(&d, histogram, 64);
        for (bin, count) in counts.iter().enumerate() {
            let expected = values[..n as usize].iter().filter(|v| (**v & 63) as usize == bin).count() as u32;
            assert_eq!(*count, expected, "{target}: Histogram[{bin}]");
        }
        let maximum = read_u32(&d, pmax, 2);
        assert_eq!(maximum[0], *values[..n as usize].iter().max().unwrap(), "{target}: atomicMax");
        // Workgroups run in order, so the first one's count wins the CAS.
        assert_eq!(maximum[1], 256, "{target}: atomicCAS of the first workgroup's LDS count");
    }
}

/// Scalar atomics (inline assembly; hipcc does not emit them): 3
/// workgroups of 2 waves apply each operation once per wave, in the
/// emulator's order (workgroups in order, waves in order).
#[test]
fn scalar_atomics() {
    for target in every_target() {
        let mut d = device(&object_for_every_target("emulator/scalar_atomics.hip"), target);
        let counters = d.allocate("counters", &bytes(&[0u32, 0, 0, 0, 0, 1000, 0, 0], u32::to_le_bytes));
        let wide = d.allocate("wide", &5u64.to_le_bytes());
        let returned = d.allocate("returned", &[0; 48]);
        let args = [pointer(counters), pointer(wide), pointer(returned)];
        d.launch("_Z13scalarAtomicsPjPyS_", Launch::linear(3, 128), &args).unwrap();
        let waves = 6;
        let c = read_u32(&d, counters, 8);
        assert_eq!(c[0], waves, "{target}: s_atomic_add count");
        assert_eq!(c[1], 2, "{target}: s_atomic_umax of the workgroup ids");
        // Each workgroup's bit flipped twice (two waves).
        assert_eq!(c[2], 0, "{target}: s_atomic_xor");
        assert_eq!(c[3], 100, "{target}: s_atomic_cmpswap, the first wave wins");
        // inc wraps at the limit 2: 0 1 2 0 1 2 -> 0 after six.
        assert_eq!(c[4], 0, "{target}: s_atomic_inc through an SGPR offset");
        assert_eq!(c[5], 1000 - 3 * waves, "{target}: s_buffer_atomic_sub at resource offset 4");
        assert_eq!(c[6..], [0, 0], "{target}: nothing else written");
        let w = read(&d, wide, 1, u64::from_le_bytes)[0];
        assert_eq!(w, 5 + u64::from(waves) * 0x1_0000_0001, "{target}: s_atomic_add_x2");
        let r = read_u32(&d, returned, 12);
        for wave in 0..waves as usize {
            assert_eq!(r[2 * wave], wave as u32, "{target}: wave {wave}: value returned by s_atomic_add glc");
            let seen = if wave == 0 { 0 } else { 100 };
            assert_eq!(r[2 * wave + 1], seen, "{target}: wave {wave}: value returned by s_atomic_cmpswap glc");
        }
    }
}

#[test]
fn device_calls_scratch_and_spills() {
    for target in TARGETS {
        let mut d = device(&test_kernels("calls_and_scratch"), target);
        check_calls_scratch_and_spills(&mut d, target);
    }
    // The same kernels with scratch through SCRATCH instructions and
    // FLAT_SCRATCH (the `enable-flat-scratch` target feature) instead of MUBUF.
    let dir = scratch();
    let object = dir.path().join("flat-scratch.hsaco");
    run_ok(
        gpuinstr_tests::clang()
            .args(["-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr"])
            .arg(format!("--rocm-device-lib-path={}", gpuinstr::toolchain::rocm_device_library_dir().display()))
            .args(["--cuda-device-only", "--no-gpu-bundle-output", "-O3"])
            .args(["-Xclang", "-target-feature", "-Xclang", "+enable-flat-scratch", "-c"])
            .arg(input("kernels/calls_and_scratch.hip"))
            .arg("-o")
            .arg(&object),
    );
    let mut d = device(&object, "gfx90a");
    let text = String::from_utf8_lossy(
        &run_ok(gpuinstr::toolchain::llvm_tool("llvm-objdump").args(["-d", "--mcpu=gfx90a"]).arg(&object)).stdout,
    )
    .to_string();
    assert!(text.contains("scratch_store_dwordx4") && !text.contains("buffer_store"), "flat scratch code");
    check_calls_scratch_and_spills(&mut d, "gfx90a, flat scratch");
}

fn check_calls_scratch_and_spills(d: &mut Device, target: &str) {
    let polynomial = |x: f32, degree: i32| (0..degree).fold(0.0f32, |r, i| r * x + (i + 1) as f32);
    let data: Vec<f32> = (0..128).map(|i| (i % 40) as f32 - 9.0).collect();
    let pdata = d.allocate("data", &f32s(&data));
    d.launch("_Z19callsDeviceFunctionPfi", Launch::linear(2, 64), &[pointer(pdata), i32s(&[3])]).unwrap();
    let out = read_f32(d, pdata, 128);
    for i in 0..128 {
        let x = data[i];
        assert_eq!(out[i], polynomial(x, 3) + polynomial(x * 0.5, 4), "{target}: callsDeviceFunction[{i}]");
    }

    // A dynamically indexed private array lives in scratch.
    let indices: Vec<i32> = (0..20).map(|i| i * 13 + 5).collect();
    let (pout, pidx) = (d.allocate("out", &i32s(&[0; 128])), d.allocate("indices", &i32s(&indices)));
    d.launch("_Z12scratchArrayPiPKii", Launch::linear(1, 128), &[pointer(pout), pointer(pidx), i32s(&[20])]).unwrap();
    let out = read_i32(d, pout, 128);
    for (t, value) in out.iter().enumerate() {
        let expected: i32 = indices.iter().map(|i| (i & 63) * t as i32).sum();
        assert_eq!(*value, expected, "{target}: scratchArray[{t}]");
    }

    // Spills (to scratch, or AGPRs on gfx908) and high register pressure.
    for (kernel, count) in [("_Z14registerSpillsPfPKf", 64usize), ("_Z13manyRegistersPfPKf", 160)] {
        let input: Vec<f32> = (0..64 * count).map(|i| (i % 8) as f32).collect();
        let (pout, pin) = (d.allocate("out", &f32s(&[0.0; 64])), d.allocate("in", &f32s(&input)));
        d.launch(kernel, Launch::linear(1, 64), &[pointer(pout), pointer(pin)]).unwrap();
        let out = read_f32(d, pout, 64);
        for t in 0..64 {
            let v = &input[t * count..(t + 1) * count];
            let step = if count == 64 { 5 } else { 13 };
            let expected: f32 = (0..count).map(|i| (0..count).step_by(step).map(|j| v[i] * v[j]).sum::<f32>()).sum();
            assert_eq!(out[t], expected, "{target}: {kernel}[{t}]");
        }
    }
}

#[test]
fn what_the_emulator_cannot_run_it_names() {
    // A buffer too small: the access names its address.
    let mut d = device(&test_kernels("control_flow"), "gfx90a");
    let small = d.allocate("small", &i32s(&[1; 16]));
    let out = d.allocate("out", &i32s(&[0; 64]));
    let error = d
        .launch("_Z17divergentBranchesPiPKii", Launch::linear(1, 64), &[pointer(out), pointer(small), i32s(&[64])])
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("global_load_dword") && message.contains("outside every allocation"), "{message}");
    assert!(message.contains(&format!("{:#x}", small + 64)), "the first address past the buffer: {message}");

    // Launch mistakes.
    let error = d.launch("missing", Launch::linear(1, 64), &[]).unwrap_err();
    assert!(matches!(error, EmulatorError::NoKernel { .. }), "{error}");
    assert!(error.to_string().contains("_Z13loopReductionPfPKfii"), "lists the kernels: {error}");
    let error = d.launch("_Z17divergentBranchesPiPKii", Launch::linear(1, 64), &[pointer(out)]).unwrap_err();
    assert!(error.to_string().contains("takes 3 arguments, 1 given"), "{error}");
    let error = d
        .launch("_Z17divergentBranchesPiPKii", Launch::linear(1, 64), &[pointer(out), pointer(out), pointer(out)])
        .unwrap_err();
    assert!(error.to_string().contains("argument 2 is 4 bytes, 8 given"), "{error}");
}

/// A rocSPARSE gfx90a:xnack- code object holding `kernel`, from Debian's package.
fn rocsparse_kernel_object(kernel: &str) -> gpuinstr::stages::load::CodeObject {
    use gpuinstr::stages::load::{load_for_target, CodeObject};
    // Loading the library (111 code objects) once for every test.
    static OBJECTS: std::sync::OnceLock<Vec<CodeObject>> = std::sync::OnceLock::new();
    let objects = OBJECTS.get_or_init(|| {
        let library = debian_package_file("librocsparse0", "/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1");
        load_for_target(&library, Some("gfx90a:xnack-")).unwrap().code_objects
    });
    objects.iter().find(|o| o.kernels.iter().any(|k| k.name() == kernel)).expect("the kernel").clone()
}

/// rocSPARSE's own kernels (nobody here wrote them), from Debian's package,
/// against CPU implementations: csrmv (y = alpha A x + beta y, the general
/// kernel with its DPP wavefront reduction) on a generated matrix, and
/// gthrz (gather and zero) with a one-based index.
#[test]
fn rocsparse_kernels_compute_what_the_cpu_computes() {
    let csrmv = "_ZL21csrmvn_general_kernelILj512ELj64EiidPKdEvbT2_T4_PKT1_PKS2_PKT3_SB_S3_PS9_21rocsparse_index_base_";
    let mut d = Device::new(rocsparse_kernel_object(csrmv), "librocsparse.so.0.1".into()).unwrap();
    // A 300 x 200 matrix with 0 to 9 entries per row, pseudo-random columns.
    let (m, n) = (300usize, 200usize);
    let mut row_ptr = vec![0i32];
    let mut col_ind = Vec::new();
    let mut values = Vec::new();
    for row in 0..m {
        let entries = (row * 7) % 10;
        let mut columns: Vec<i32> = (0..entries).map(|k| ((row * 31 + k * 17) % n) as i32).collect();
        columns.sort();
        columns.dedup();
        for column in columns {
            col_ind.push(column);
            values.push(f64::from(column % 5) - 1.5 + row as f64 / 64.0);
        }
        row_ptr.push(col_ind.len() as i32);
    }
    let x: Vec<f64> = (0..n).map(|i| (i % 13) as f64 * 0.25 - 1.0).collect();
    let y: Vec<f64> = (0..m).map(|i| (i % 7) as f64).collect();
    let (alpha, beta) = (1.5f64, -0.5f64);
    let pointers = [
        d.allocate("alpha", &f64s(&[alpha])),
        d.allocate("row_ptr", &i32s(&row_ptr)),
        d.allocate("col_ind", &i32s(&col_ind)),
        d.allocate("values", &f64s(&values)),
        d.allocate("x", &f64s(&x)),
        d.allocate("beta", &f64s(&[beta])),
        d.allocate("y", &f64s(&y)),
    ];
    let mut arguments = vec![vec![0u8], i32s(&[m as i32])];
    arguments.extend(pointers.iter().map(|p| pointer(*p)));
    arguments.push(i32s(&[0]));
    // 64 work-items per row, 512 per workgroup: 8 rows per workgroup, 10 workgroups cover 80
    // rows at a time (the kernel loops over the rest).
    d.launch(csrmv, Launch::linear(10, 512), &arguments).unwrap();
    let result = read(&d, pointers[6], m, f64::from_le_bytes);
    for row in 0..m {
        let range = row_ptr[row] as usize..row_ptr[row + 1] as usize;
        let dot: f64 = range.map(|k| values[k] * x[col_ind[k] as usize]).sum();
        let expected = alpha * dot + beta * y[row];
        // The kernel sums in a different order: allow for rounding.
        assert!(
            (result[row] - expected).abs() <= 1e-12 * (1.0 + expected.abs()),
            "csrmv row {row}: {} vs {expected}",
            result[row]
        );
    }

    let gthrz = "_ZL12gthrz_kernelILj512EfEviPT0_S1_PKi21rocsparse_index_base_";
    let mut d = Device::new(rocsparse_kernel_object(gthrz), "librocsparse.so.0.1".into()).unwrap();
    let dense: Vec<f32> = (0..2000).map(|i| i as f32 * 0.5).collect();
    let indices: Vec<i32> = (0..700).map(|i| i * 2 + 1 + i % 2).collect(); // one-based
    let (py, pi) = (d.allocate("y", &f32s(&dense)), d.allocate("x_ind", &i32s(&indices)));
    let px = d.allocate("x_val", &f32s(&[-1.0; 700]));
    let arguments = [i32s(&[700]), pointer(py), pointer(px), pointer(pi), i32s(&[1])];
    d.launch(gthrz, Launch::linear(2, 512), &arguments).unwrap();
    let (gathered, zeroed) = (read_f32(&d, px, 700), read_f32(&d, py, 2000));
    let mut expected = dense.clone();
    for (k, index) in indices.iter().enumerate() {
        assert_eq!(gathered[k], dense[*index as usize - 1], "gthrz x_val[{k}]");
        expected[*index as usize - 1] = 0.0;
    }
    assert_eq!(zeroed, expected, "gthrz zeroes what it gathered");
}

/// More rocSPARSE kernels against the CPU: csr2coo (a 16-lane subwave per
/// row), roti (a Givens rotation of a sparse and a dense vector, scalars by
/// value) and doti (a grid-stride dot product reduced in LDS per block of
/// 256, then across the 256 blocks by a second kernel). Values are small
/// integers and halves, so every float result is exact whatever the order.
#[test]
fn rocsparse_conversion_and_level1_kernels() {
    let csr2coo = "_ZL14csr2coo_kernelILj512ELj16EiiEvT2_PKT1_PS0_21rocsparse_index_base_";
    let mut d = Device::new(rocsparse_kernel_object(csr2coo), "librocsparse.so.0.1".into()).unwrap();
    let m = 700usize;
    let mut row_ptr = vec![1i32]; // one-based
    for row in 0..m {
        row_ptr.push(row_ptr[row] + (row * 13 % 37) as i32);
    }
    let nnz = (row_ptr[m] - 1) as usize;
    let (pr, pc) = (d.allocate("row_ptr", &i32s(&row_ptr)), d.allocate("coo_row", &i32s(&vec![-1; nnz])));
    d.launch(csr2coo, Launch::linear(22, 512), &[i32s(&[m as i32]), pointer(pr), pointer(pc), i32s(&[1])]).unwrap();
    let expected: Vec<i32> = (0..m)
        .flat_map(|row| std::iter::repeat_n(row as i32 + 1, (row_ptr[row + 1] - row_ptr[row]) as usize))
        .collect();
    assert_eq!(read_i32(&d, pc, nnz), expected, "csr2coo");

    let roti = "_ZL11roti_kernelILj512EiffEvT0_PT1_PKS0_S2_T2_S5_21rocsparse_index_base_";
    let mut d = Device::new(rocsparse_kernel_object(roti), "librocsparse.so.0.1".into()).unwrap();
    let nnz = 900usize;
    let x: Vec<f32> = (0..nnz).map(|i| (i % 17) as f32 - 8.0).collect();
    let indices: Vec<i32> = (0..nnz as i32).map(|i| i * 2 + i % 2).collect(); // zero-based
    let y: Vec<f32> = (0..2 * nnz).map(|i| (i % 11) as f32).collect();
    let (px, pi, py) = (d.allocate("x", &f32s(&x)), d.allocate("x_ind", &i32s(&indices)), d.allocate("y", &f32s(&y)));
    let (c, s) = (0.5f32, 2.0f32);
    let args = [i32s(&[nnz as i32]), pointer(px), pointer(pi), pointer(py), f32s(&[c]), f32s(&[s]), i32s(&[0])];
    d.launch(roti, Launch::linear(2, 512), &args).unwrap();
    let (mut want_x, mut want_y) = (x.clone(), y.clone());
    for (k, index) in indices.iter().enumerate() {
        let (xv, yv) = (x[k], y[*index as usize]);
        want_x[k] = c * xv + s * yv;
        want_y[*index as usize] = c * yv - s * xv;
    }
    assert_eq!(read_f32(&d, px, nnz), want_x, "roti x");
    assert_eq!(read_f32(&d, py, 2 * nnz), want_y, "roti y");

    let part1 = "_ZL17doti_kernel_part1ILj256EidEvT0_PKT1_PKS0_S3_PS1_21rocsparse_index_base_";
    let part2 = "_ZL17doti_kernel_part2ILj256EdEvPT0_S1_";
    let mut d = Device::new(rocsparse_kernel_object(part1), "librocsparse.so.0.1".into()).unwrap();
    let nnz = 70_000usize; // more than one pass of the 256 x 256 grid
    let x: Vec<f64> = (0..nnz).map(|i| (i % 7) as f64 - 3.0).collect();
    let indices: Vec<i32> = (0..nnz as i32).map(|i| (i * 3) % 90_001).collect();
    let y: Vec<f64> = (0..90_001).map(|i| ((i % 5) as f64) * 0.5).collect();
    let (px, pi, py) = (d.allocate("x", &f64s(&x)), d.allocate("x_ind", &i32s(&indices)), d.allocate("y", &f64s(&y)));
    let workspace = d.allocate("workspace", &f64s(&[f64::NAN; 256]));
    let args = [i32s(&[nnz as i32]), pointer(px), pointer(pi), pointer(py), pointer(workspace), i32s(&[0])];
    d.launch(part1, Launch::linear(256, 256), &args).unwrap();
    let partial = read(&d, workspace, 256, f64::from_le_bytes);
    for (block, got) in partial.iter().enumerate() {
        let want: f64 = (block * 256..nnz)
            .step_by(256 * 256)
            .flat_map(|start| start..(start + 256).min(nnz))
            .map(|k| x[k] * y[indices[k] as usize])
            .sum();
        assert_eq!(*got, want, "doti part 1, block {block}");
    }
    let result = d.allocate("result", &f64s(&[f64::NAN]));
    d.launch(part2, Launch::linear(1, 256), &[pointer(workspace), pointer(result)]).unwrap();
    let dot: f64 = (0..nnz).map(|k| x[k] * y[indices[k] as usize]).sum();
    assert_eq!(read(&d, result, 1, f64::from_le_bytes)[0], dot, "doti");
}

/// One MFMA kernel of tests/inputs/emulator/matrix.hip: its instruction's
/// shape, element type and the processors that have it.
struct MfmaKernel {
    name: &'static str,
    m: usize,
    k: usize,
    blocks: usize,
    element: &'static str,
    targets: &'static [&'static str],
}

const MFMA_ALL: &[&str] = &["gfx908", "gfx90a", "gfx940", "gfx950"];
const MFMA_BEFORE_GFX940: &[&str] = &["gfx908", "gfx90a"];
const MFMA_GFX90A_ON: &[&str] = &["gfx90a", "gfx940", "gfx950"];
const MFMA_GFX940_ON: &[&str] = &["gfx940", "gfx950"];

#[rustfmt::skip]
const MFMA_KERNELS: [MfmaKernel; 46] = [
    MfmaKernel { name: "f32_32x32x1f32", m: 32, k: 1, blocks: 2, element: "f32", targets: MFMA_ALL },
    MfmaKernel { name: "f32_32x32x2f32", m: 32, k: 2, blocks: 1, element: "f32", targets: MFMA_ALL },
    MfmaKernel { name: "f32_16x16x1f32", m: 16, k: 1, blocks: 4, element: "f32", targets: MFMA_ALL },
    MfmaKernel { name: "f32_16x16x4f32", m: 16, k: 4, blocks: 1, element: "f32", targets: MFMA_ALL },
    MfmaKernel { name: "f32_4x4x1f32", m: 4, k: 1, blocks: 16, element: "f32", targets: MFMA_ALL },
    MfmaKernel { name: "f32_32x32x4f16", m: 32, k: 4, blocks: 2, element: "f16", targets: MFMA_ALL },
    MfmaKernel { name: "f32_32x32x8f16", m: 32, k: 8, blocks: 1, element: "f16", targets: MFMA_ALL },
    MfmaKernel { name: "f32_16x16x4f16", m: 16, k: 4, blocks: 4, element: "f16", targets: MFMA_ALL },
    MfmaKernel { name: "f32_16x16x16f16", m: 16, k: 16, blocks: 1, element: "f16", targets: MFMA_ALL },
    MfmaKernel { name: "f32_4x4x4f16", m: 4, k: 4, blocks: 16, element: "f16", targets: MFMA_ALL },
    MfmaKernel { name: "f32_32x32x2bf16", m: 32, k: 2, blocks: 2, element: "bf16", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "f32_32x32x4bf16", m: 32, k: 4, blocks: 1, element: "bf16", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "f32_16x16x2bf16", m: 16, k: 2, blocks: 4, element: "bf16", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "f32_16x16x8bf16", m: 16, k: 8, blocks: 1, element: "bf16", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "f32_4x4x2bf16", m: 4, k: 2, blocks: 16, element: "bf16", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "f32_32x32x4bf16_1k", m: 32, k: 4, blocks: 2, element: "bf16", targets: MFMA_GFX90A_ON },
    MfmaKernel { name: "f32_32x32x8bf16_1k", m: 32, k: 8, blocks: 1, element: "bf16", targets: MFMA_GFX90A_ON },
    MfmaKernel { name: "f32_16x16x4bf16_1k", m: 16, k: 4, blocks: 4, element: "bf16", targets: MFMA_GFX90A_ON },
    MfmaKernel { name: "f32_16x16x16bf16_1k", m: 16, k: 16, blocks: 1, element: "bf16", targets: MFMA_GFX90A_ON },
    MfmaKernel { name: "f32_4x4x4bf16_1k", m: 4, k: 4, blocks: 16, element: "bf16", targets: MFMA_GFX90A_ON },
    MfmaKernel { name: "i32_32x32x4i8", m: 32, k: 4, blocks: 2, element: "i8", targets: MFMA_ALL },
    MfmaKernel { name: "i32_32x32x8i8", m: 32, k: 8, blocks: 1, element: "i8", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "i32_16x16x4i8", m: 16, k: 4, blocks: 4, element: "i8", targets: MFMA_ALL },
    MfmaKernel { name: "i32_16x16x16i8", m: 16, k: 16, blocks: 1, element: "i8", targets: MFMA_BEFORE_GFX940 },
    MfmaKernel { name: "i32_4x4x4i8", m: 4, k: 4, blocks: 16, element: "i8", targets: MFMA_ALL },
    MfmaKernel { name: "i32_32x32x16i8", m: 32, k: 16, blocks: 1, element: "i8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "i32_16x16x32i8", m: 16, k: 32, blocks: 1, element: "i8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f64_16x16x4f64", m: 16, k: 4, blocks: 1, element: "f64", targets: MFMA_GFX90A_ON },
    MfmaKernel { name: "f64_4x4x4f64", m: 4, k: 4, blocks: 4, element: "f64", targets: MFMA_GFX90A_ON },
    // blgp 5 on gfx940+: D = (-A)*B + (-C).
    MfmaKernel { name: "f64_16x16x4f64_neg", m: 16, k: 4, blocks: 1, element: "f64", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_16x16x8xf32", m: 16, k: 8, blocks: 1, element: "xf32", targets: &["gfx940"] },
    MfmaKernel { name: "f32_32x32x4xf32", m: 32, k: 4, blocks: 1, element: "xf32", targets: &["gfx940"] },
    MfmaKernel { name: "f32_16x16x32_fp8_fp8", m: 16, k: 32, blocks: 1, element: "fp8_fp8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_16x16x32_fp8_bf8", m: 16, k: 32, blocks: 1, element: "fp8_bf8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_16x16x32_bf8_fp8", m: 16, k: 32, blocks: 1, element: "bf8_fp8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_16x16x32_bf8_bf8", m: 16, k: 32, blocks: 1, element: "bf8_bf8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_32x32x16_fp8_fp8", m: 32, k: 16, blocks: 1, element: "fp8_fp8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_32x32x16_fp8_bf8", m: 32, k: 16, blocks: 1, element: "fp8_bf8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_32x32x16_bf8_fp8", m: 32, k: 16, blocks: 1, element: "bf8_fp8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_32x32x16_bf8_bf8", m: 32, k: 16, blocks: 1, element: "bf8_bf8", targets: MFMA_GFX940_ON },
    MfmaKernel { name: "f32_16x16x32_f16", m: 16, k: 32, blocks: 1, element: "f16", targets: &["gfx950"] },
    MfmaKernel { name: "f32_32x32x16_f16", m: 32, k: 16, blocks: 1, element: "f16", targets: &["gfx950"] },
    MfmaKernel { name: "f32_16x16x32_bf16", m: 16, k: 32, blocks: 1, element: "bf16", targets: &["gfx950"] },
    MfmaKernel { name: "f32_32x32x16_bf16", m: 32, k: 16, blocks: 1, element: "bf16", targets: &["gfx950"] },
    MfmaKernel { name: "i32_16x16x64_i8", m: 16, k: 64, blocks: 1, element: "i8", targets: &["gfx950"] },
    MfmaKernel { name: "i32_32x32x32_i8", m: 32, k: 32, blocks: 1, element: "i8", targets: &["gfx950"] },
];

/// A small integer (|v| <= 16) as an 8-bit float: `mantissa_bits` of
/// mantissa and `bias`; FNUZ formats have no negative zero.
fn small_integer_as_8_bit_float(v: i64, mantissa_bits: u32, bias: i64) -> u8 {
    small_integer_as_float(v, mantissa_bits, bias, 8)
}

/// A small integer as a float of `bits` bits (sign in the top one).
fn small_integer_as_float(v: i64, mantissa_bits: u32, bias: i64, bits: u32) -> u8 {
    if v == 0 {
        return 0;
    }
    let magnitude = v.unsigned_abs();
    let power = 63 - magnitude.leading_zeros();
    let fraction = ((magnitude - (1 << power)) << mantissa_bits) >> power;
    let code = (((i64::from(power) + bias) as u64) << mantissa_bits | fraction) as u8;
    if v < 0 {
        code | 1 << (bits - 1)
    } else {
        code
    }
}

/// Every MFMA form HIP reaches through `__builtin_amdgcn_mfma_*` computes
/// D = A*B + C as a CPU matmul does, with A, B and C small integers (every
/// result exact). Where each lane finds its elements is AMD's matrix
/// instruction calculator's layout, restated here apart from the emulator's.
#[test]
fn mfma_computes_what_a_cpu_matmul_computes() {
    let mi300 = gpuinstr_tests::mi300();
    let mut architectures = vec![format!("--offload-arch={mi300}")];
    if gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        architectures.push("--offload-arch=gfx950".into());
    }
    let architectures: Vec<&str> = architectures.iter().map(String::as_str).collect();
    let object = gpuinstr_tests::hip_object_with("emulator/matrix.hip", &architectures);
    // LLVM 15 decodes gfx940's MFMAs with VGPR C/D as AGPR ones: the
    // emulator refuses them there rather than compute in the wrong file.
    if gpuinstr::toolchain::LLVM_MAJOR < 17 {
        let mut d = device(&object, mi300);
        let (c, a) = (d.allocate("c", &f32s(&[0.0; 256])), d.allocate("a", &f32s(&[1.0; 64])));
        let out = d.allocate("out", &f32s(&[0.0; 256]));
        let error = d
            .launch("f32_4x4x1f32", Launch::linear(1, 64), &[pointer(out), pointer(a), pointer(a), pointer(c)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("LLVM's decoder may have taken VGPRs for AGPRs"), "{error}");
    }
    let mut targets = vec!["gfx908", "gfx90a"];
    if gpuinstr::toolchain::LLVM_MAJOR >= 17 {
        targets.push(mi300);
    }
    if gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        targets.push("gfx950");
    }
    for target in targets {
        let mut d = device(&object, target);
        // The table names MI300 as gfx940, whichever one this toolchain builds.
        let as_listed = if target == mi300 { "gfx940" } else { target };
        for kernel in MFMA_KERNELS.iter().filter(|k| k.targets.contains(&as_listed)) {
            let (m, k, blocks) = (kernel.m, kernel.k, kernel.blocks);
            let bits = match kernel.element {
                "f32" | "xf32" => 32,
                "f16" | "bf16" => 16,
                "f64" => 64,
                _ => 8,
            };
            // 8-bit floats: gfx94x's FNUZ formats (E4M3 bias 8, E5M2 bias
            // 16), gfx950's OCP ones (bias 7, 15); A's format, then B's.
            let ocp = target == "gfx950";
            let (a_format, b_format) = kernel.element.split_once('_').unwrap_or(("", ""));
            let eight_bit = |format: &str, v: i64| match format {
                "fp8" => small_integer_as_8_bit_float(v, 3, if ocp { 7 } else { 8 }),
                _ => small_integer_as_8_bit_float(v, 2, if ocp { 15 } else { 16 }),
            };
            let negated = kernel.name.ends_with("_neg");
            let per_lane = k * m * blocks / 64;
            let source_bytes = (per_lane * bits).div_ceil(32) * 4;
            let wide = kernel.element == "f64";
            let results = m * m * blocks / 64;
            // Small integers, negative too: A[b][i][k], B[b][k][j], C[b][i][j].
            let a = |b: usize, i: usize, kk: usize| ((i * 3 + kk * 5 + b * 7) % 9) as i64 - 4;
            let bm = |b: usize, kk: usize, j: usize| ((kk * 2 + j * 7 + b * 3) % 7) as i64 - 3;
            let c = |b: usize, i: usize, j: usize| ((i * 5 + j * 3 + b) % 11) as i64 - 5;
            let encode = |v: i64, format: &str| -> u64 {
                match kernel.element {
                    "f32" | "xf32" => u64::from((v as f32).to_bits()),
                    "f16" => u64::from(half::f16::from_f32(v as f32).to_bits()),
                    "bf16" => u64::from(half::bf16::from_f32(v as f32).to_bits()),
                    "i8" => u64::from(v as i8 as u8),
                    "f64" => (v as f64).to_bits(),
                    _ => u64::from(eight_bit(format, v)),
                }
            };
            // Lane `outer + m * (b + blocks * (k / per_lane))`, element k % per_lane.
            let mut pa = vec![0u8; 64 * source_bytes];
            let mut pb = vec![0u8; 64 * source_bytes];
            for b in 0..blocks {
                for outer in 0..m {
                    for kk in 0..k {
                        let lane = outer + m * (b + blocks * (kk / per_lane));
                        let bit = lane * source_bytes * 8 + (kk % per_lane) * bits;
                        for (buffer, value, format) in
                            [(&mut pa, a(b, outer, kk), a_format), (&mut pb, bm(b, kk, outer), b_format)]
                        {
                            let raw = encode(value, format);
                            for n in 0..bits / 8 {
                                buffer[bit / 8 + n] = (raw >> (8 * n)) as u8;
                            }
                        }
                    }
                }
            }
            // D[i][j] of block b: rows in groups of 4 (1 for f64) registers
            // by N lanes, 64/N groups a register, blocks of 4x4 side by side.
            let place = |i: usize, j: usize, b: usize| {
                let rows = if wide { 1 } else { 4 };
                let groups = 64 / m;
                let blocks_per_register = (64 * rows / (m * m)).max(1);
                let register = b * (m * m / 64) + i / (rows * groups) * rows + i % rows;
                let lane = (b % blocks_per_register) * m + (i / rows) % groups * blocks_per_register * m + j;
                lane * results + register
            };
            let mut pc = vec![0i64; 64 * results];
            let mut expected = vec![0i64; 64 * results];
            for b in 0..blocks {
                for i in 0..m {
                    for j in 0..m {
                        pc[place(i, j, b)] = c(b, i, j);
                        let product = (0..k).map(|kk| a(b, i, kk) * bm(b, kk, j)).sum::<i64>();
                        expected[place(i, j, b)] = if negated { -c(b, i, j) - product } else { c(b, i, j) + product };
                    }
                }
            }
            let c_bytes: Vec<u8> = if wide {
                pc.iter().flat_map(|v| (*v as f64).to_le_bytes()).collect()
            } else if kernel.element == "i8" {
                pc.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect()
            } else {
                pc.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect()
            };
            let out = d.allocate("out", &vec![0xff; c_bytes.len()]);
            let (a_at, b_at, c_at) = (d.allocate("a", &pa), d.allocate("b", &pb), d.allocate("c", &c_bytes));
            let args = [pointer(out), pointer(a_at), pointer(b_at), pointer(c_at)];
            d.launch(kernel.name, Launch::linear(1, 64), &args)
                .unwrap_or_else(|e| panic!("{target} {}: {e}", kernel.name));
            let got: Vec<f64> = if wide {
                read(&d, out, 64 * results, f64::from_le_bytes)
            } else if kernel.element == "i8" {
                read_i32(&d, out, 64 * results).iter().map(|v| f64::from(*v)).collect()
            } else {
                read_f32(&d, out, 64 * results).iter().map(|v| f64::from(*v)).collect()
            };
            let expected: Vec<f64> = expected.iter().map(|v| *v as f64).collect();
            assert_eq!(got, expected, "{target} {}", kernel.name);
        }
    }

    // A loop of MFMAs accumulating in AGPRs (gfx908) or VGPRs (gfx90a):
    // four steps of a 4x4x1 outer product of ones.
    for target in TARGETS {
        let mut d = device(&test_kernels("matrix_cores"), target);
        let (pa, pout) = (d.allocate("a", &f32s(&[1.0; 256])), d.allocate("out", &f32s(&[0.0; 256])));
        let args = [pointer(pout), pointer(pa), pointer(pa), i32s(&[4])];
        d.launch("_Z9mfmaSmallPfPKfS1_i", Launch::linear(1, 64), &args).unwrap();
        assert_eq!(read_f32(&d, pout, 256), vec![4.0; 256], "{target}: mfmaSmall");
    }
}

/// An 8-bit float encoding's value, from the format's definition:
/// `mantissa_bits`, `bias`; FNUZ formats have 0x80 as their only NaN and no
/// infinity, OCP E4M3 has NaN at S.1111.111 and OCP E5M2 is IEEE-like.
fn eight_bit_float_value(code: u8, mantissa_bits: u32, bias: i32, fnuz: bool) -> f32 {
    let exponent_bits = 7 - mantissa_bits;
    let exponent = i32::from(code & 0x7f) >> mantissa_bits;
    let mantissa = f64::from(code & ((1 << mantissa_bits) - 1));
    let top = (1 << exponent_bits) - 1;
    let scale = f64::from(1u32 << mantissa_bits);
    let nan = if fnuz { code == 0x80 } else { mantissa_bits == 3 && exponent == top && mantissa == 7.0 };
    let magnitude = if nan {
        f64::NAN
    } else if !fnuz && mantissa_bits == 2 && exponent == top {
        if mantissa == 0.0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else if exponent == 0 {
        mantissa / scale * 2f64.powi(1 - bias)
    } else {
        (1.0 + mantissa / scale) * 2f64.powi(exponent - bias)
    };
    (if code & 0x80 != 0 { -magnitude } else { magnitude }) as f32
}

/// The fp8/bf8 conversions HIP's 8-bit float types use, on MI300 (FNUZ
/// formats) and with LLVM 21 on gfx950 (OCP formats): every encoding
/// decodes to its value (each byte and word select), and f32 values encode
/// to the expected nearest-even codes (worked out by hand below) into the
/// word or byte asked for, the rest of the old value kept.
#[test]
fn fp8_conversions_follow_each_processors_formats() {
    let mut targets = vec![gpuinstr_tests::mi300()];
    if gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        targets.push("gfx950");
    }
    let architectures: Vec<String> = targets.iter().map(|t| format!("--offload-arch={t}")).collect();
    let architectures: Vec<&str> = architectures.iter().map(String::as_str).collect();
    let object = gpuinstr_tests::hip_object_with("emulator/fp8.hip", &architectures);
    for target in targets {
        let ocp = target == "gfx950";
        let (fp8_bias, bf8_bias) = if ocp { (7, 15) } else { (8, 16) };
        let fp8 = |code: u8| eight_bit_float_value(code, 3, fp8_bias, !ocp);
        let bf8 = |code: u8| eight_bit_float_value(code, 2, bf8_bias, !ocp);
        let same = |got: f32, want: f32| got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        let mut d = device(&object, target);

        // All 256 encodings: lane L holds codes 4L..4L+3.
        let codes: Vec<i32> = (0..64u32).map(|l| i32::from_le_bytes([0, 1, 2, 3].map(|b| (4 * l + b) as u8))).collect();
        let input = d.allocate("in", &i32s(&codes));
        for kernel in ["fp8_decode", "fp8_decode_packed"] {
            let (out_fp8, out_bf8) = (d.allocate("fp8", &f32s(&[0.5; 256])), d.allocate("bf8", &f32s(&[0.5; 256])));
            d.launch(kernel, Launch::linear(1, 64), &[pointer(out_fp8), pointer(out_bf8), pointer(input)])
                .unwrap_or_else(|e| panic!("{target} {kernel}: {e}"));
            let (got_fp8, got_bf8) = (read_f32(&d, out_fp8, 256), read_f32(&d, out_bf8, 256));
            for code in 0..=255u8 {
                let at = usize::from(code);
                assert!(same(got_fp8[at], fp8(code)), "{target} {kernel} fp8 {code:#x}: {}", got_fp8[at]);
                assert!(same(got_bf8[at], bf8(code)), "{target} {kernel} bf8 {code:#x}: {}", got_bf8[at]);
            }
        }

        // (value, fp8 code, bf8 code) as FNUZ, then as OCP; None: a NaN.
        type Codes = [Option<u8>; 2];
        let cases: Vec<(f32, Codes, Codes)> = vec![
            (1.0, [Some(0x40), Some(0x38)], [Some(0x40), Some(0x3c)]),
            (-2.5, [Some(0xca), Some(0xc2)], [Some(0xc5), Some(0xc1)]),
            // Halfway between 1 and 1.125 (E4M3): to the even 1.0.
            (1.0625, [Some(0x40), Some(0x38)], [Some(0x40), Some(0x3c)]),
            // Halfway between 1.125 and 1.25 (E4M3): to the even 1.25;
            // E5M2's nearest is 1.25.
            (1.1875, [Some(0x42), Some(0x3a)], [Some(0x41), Some(0x3d)]),
            // FNUZ E4M3's largest; E5M2 ties 1.875*2^7 to 2^8.
            (240.0, [Some(0x7f), Some(0x77)], [Some(0x60), Some(0x5c)]),
            (0.0, [Some(0x00), Some(0x00)], [Some(0x00), Some(0x00)]),
            // FNUZ has no negative zero.
            (-0.0, [Some(0x00), Some(0x80)], [Some(0x00), Some(0x80)]),
            // 3*2^-10: an FNUZ E4M3 subnormal; OCP E4M3 ties 1.5*2^-9 to 2*2^-9.
            (3.0 / 1024.0, [Some(0x03), Some(0x02)], [Some(0x1e), Some(0x1a)]),
            (f32::NAN, [None, None], [None, None]),
        ];
        // OCP only (FNUZ overflow is undocumented: the emulator stops there):
        // the largest E4M3, past it NaN (MODE.FP16_OVFL clear), E5M2 to 2^9,
        // past E5M2's largest an infinity.
        let ocp_cases: Vec<(f32, Option<u8>, Option<u8>)> =
            vec![(448.0, Some(0x7e), Some(0x5f)), (500.0, None, Some(0x60)), (-1.0e6, None, Some(0xfc))];
        let mut values: Vec<(f32, Option<u8>, Option<u8>)> =
            cases.iter().map(|(v, f, b)| (*v, f[usize::from(ocp)], b[usize::from(ocp)])).collect();
        if ocp {
            values.extend(ocp_cases);
        }
        let lanes = values.len();
        let a: Vec<f32> = values.iter().map(|v| v.0).collect();
        // B is A of the next lane, so both bytes of a word are checked.
        let b: Vec<f32> = (0..lanes).map(|l| a[(l + 1) % lanes]).collect();
        let old: Vec<i32> = (0..lanes).map(|l| 0x5a5a_5a5a_u32.wrapping_add(l as u32) as i32).collect();
        let (pa, pb, pold) = (d.allocate("a", &f32s(&a)), d.allocate("b", &f32s(&b)), d.allocate("old", &i32s(&old)));
        let (out_fp8, out_bf8) =
            (d.allocate("fp8", &i32s(&vec![0; 2 * lanes])), d.allocate("bf8", &i32s(&vec![0; 2 * lanes])));
        d.launch(
            "fp8_encode",
            Launch::linear(1, lanes as u32),
            &[pointer(out_fp8), pointer(out_bf8), pointer(pa), pointer(pb), pointer(pold)],
        )
        .unwrap_or_else(|e| panic!("{target} fp8_encode: {e}"));
        let (got_fp8, got_bf8) = (read_u32(&d, out_fp8, 2 * lanes), read_u32(&d, out_bf8, 2 * lanes));
        let check = |got: u8, want: Option<u8>, decode: &dyn Fn(u8) -> f32, what: &str| match want {
            Some(code) => assert_eq!(got, code, "{target} {what}: {got:#x}, want {code:#x}"),
            None => assert!(decode(got).is_nan(), "{target} {what}: {got:#x} is not a NaN"),
        };
        for lane in 0..lanes {
            let next = (lane + 1) % lanes;
            let old = old[lane] as u32;
            for (got, decode, kind, pick) in [
                (&got_fp8, &fp8 as &dyn Fn(u8) -> f32, "fp8", 1usize),
                (&got_bf8, &bf8 as &dyn Fn(u8) -> f32, "bf8", 2usize),
            ] {
                let want = |v: (f32, Option<u8>, Option<u8>)| if pick == 1 { v.1 } else { v.2 };
                for (word, value) in [(0, got[2 * lane]), (1, got[2 * lane + 1])] {
                    let what = format!("{kind} of {} and {} into word {word}", a[lane], b[lane]);
                    let kept = if word == 0 { value >> 16 == old >> 16 } else { value & 0xffff == old & 0xffff };
                    assert!(kept, "{target} {what}: {value:#x} lost the other word of {old:#x}");
                    let placed = value >> (16 * word);
                    check(placed as u8, want(values[lane]), decode, &what);
                    check((placed >> 8) as u8, want(values[next]), decode, &what);
                }
            }
        }

        // Stochastic rounding: the random bits below the kept mantissa
        // decide; the byte asked for is written, the rest kept.
        let stochastic: Vec<(f32, u32, u8, u8)> = if ocp {
            vec![
                (1.0625, 0, 0x38, 0x3c),
                (1.0625, 0x8000_0000, 0x39, 0x3c),
                (-1.0625, 0xffff_ffff, 0xb9, 0xbd),
                (1.125, 0x8000_0000, 0x39, 0x3d),
                (3.0, 0xffff_ffff, 0x44, 0x42),
            ]
        } else {
            vec![
                (1.0625, 0, 0x40, 0x40),
                (1.0625, 0x8000_0000, 0x41, 0x40),
                (-1.0625, 0xffff_ffff, 0xc1, 0xc1),
                (1.125, 0x8000_0000, 0x41, 0x41),
                (3.0, 0xffff_ffff, 0x4c, 0x46),
            ]
        };
        let lanes = stochastic.len();
        let a: Vec<f32> = stochastic.iter().map(|s| s.0).collect();
        let random: Vec<i32> = stochastic.iter().map(|s| s.1 as i32).collect();
        let (pa, pr) = (d.allocate("a", &f32s(&a)), d.allocate("random", &i32s(&random)));
        let (out_fp8, out_bf8) =
            (d.allocate("fp8", &i32s(&vec![0; 4 * lanes])), d.allocate("bf8", &i32s(&vec![0; 4 * lanes])));
        d.launch(
            "fp8_encode_stochastic",
            Launch::linear(1, lanes as u32),
            &[pointer(out_fp8), pointer(out_bf8), pointer(pa), pointer(pr), pointer(pold)],
        )
        .unwrap_or_else(|e| panic!("{target} fp8_encode_stochastic: {e}"));
        let (got_fp8, got_bf8) = (read_u32(&d, out_fp8, 4 * lanes), read_u32(&d, out_bf8, 4 * lanes));
        for (lane, (value, random, want_fp8, want_bf8)) in stochastic.iter().enumerate() {
            let old = old[lane] as u32;
            for byte in 0..4 {
                for (got, want, kind) in
                    [(got_fp8[4 * lane + byte], want_fp8, "fp8"), (got_bf8[4 * lane + byte], want_bf8, "bf8")]
                {
                    let mask = 0xffu32 << (8 * byte);
                    let expected = (old & !mask) | u32::from(*want) << (8 * byte);
                    assert_eq!(got, expected, "{target} {kind} of {value} with {random:#x} into byte {byte}");
                }
            }
        }
    }
}

/// One SMFMAC kernel of tests/inputs/emulator/matrix.hip: the dense shape
/// (M = N, K), the element types (A's, then B's for 8-bit floats), the
/// index set abid picks and whether it is one of gfx950's own forms (each
/// half of K laid out as the half-K form lays it out).
struct SparseKernel {
    name: &'static str,
    m: usize,
    k: usize,
    element: &'static str,
    abid: usize,
    split: bool,
}

#[rustfmt::skip]
const SPARSE_KERNELS: [SparseKernel; 15] = [
    SparseKernel { name: "smfmac_f32_16x16x32_f16", m: 16, k: 32, element: "f16", abid: 0, split: false },
    SparseKernel { name: "smfmac_f32_16x16x32_f16_set2", m: 16, k: 32, element: "f16", abid: 2, split: false },
    SparseKernel { name: "smfmac_f32_32x32x16_f16", m: 32, k: 16, element: "f16", abid: 0, split: false },
    SparseKernel { name: "smfmac_f32_16x16x32_bf16", m: 16, k: 32, element: "bf16", abid: 0, split: false },
    SparseKernel { name: "smfmac_f32_32x32x16_bf16", m: 32, k: 16, element: "bf16", abid: 3, split: false },
    SparseKernel { name: "smfmac_i32_16x16x64_i8", m: 16, k: 64, element: "i8", abid: 0, split: false },
    SparseKernel { name: "smfmac_i32_32x32x32_i8", m: 32, k: 32, element: "i8", abid: 1, split: false },
    SparseKernel { name: "smfmac_f32_16x16x64_fp8_fp8", m: 16, k: 64, element: "fp8_fp8", abid: 0, split: false },
    SparseKernel { name: "smfmac_f32_16x16x64_bf8_fp8", m: 16, k: 64, element: "bf8_fp8", abid: 1, split: false },
    SparseKernel { name: "smfmac_f32_32x32x32_fp8_bf8", m: 32, k: 32, element: "fp8_bf8", abid: 0, split: false },
    SparseKernel { name: "smfmac_f32_32x32x32_bf8_bf8", m: 32, k: 32, element: "bf8_bf8", abid: 0, split: false },
    SparseKernel { name: "smfmac_f32_16x16x64_f16", m: 16, k: 64, element: "f16", abid: 1, split: true },
    SparseKernel { name: "smfmac_f32_32x32x32_bf16", m: 32, k: 32, element: "bf16", abid: 0, split: true },
    SparseKernel { name: "smfmac_i32_16x16x128_i8", m: 16, k: 128, element: "i8", abid: 0, split: true },
    SparseKernel { name: "smfmac_f32_32x32x64_fp8_bf8", m: 32, k: 64, element: "fp8_bf8", abid: 0, split: true },
];

/// The sparse MFMAs (SMFMAC) of gfx940+ compute D = A*B + D with A 4:2
/// structured-sparse, as a CPU matmul of the dense A does. A lane holds
/// K_L = K*M/64 dense k of a row (lane `i + M*(k / K_L)`, like B's
/// columns), stored as 2 values per group of 4 k in slot order; its index
/// word holds, per index set of K_L bits, a nibble per group: the first
/// stored value's position (bits 1:0) and the second's (3:2). The other
/// index sets hold other valid positions, so a wrong set gives a wrong D.
/// gfx950's own forms (twice the k) hold each half of K as the half-K form
/// would, half 0 in the first half of a lane's slots (the CDNA4 guide's
/// tables; no hardware-tested code was found to compare with).
#[test]
fn sparse_mfma_computes_what_a_cpu_matmul_computes() {
    let mi300 = gpuinstr_tests::mi300();
    let mut targets = vec![mi300];
    if gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        targets.push("gfx950");
    }
    let architectures: Vec<String> = targets.iter().map(|t| format!("--offload-arch={t}")).collect();
    let architectures: Vec<&str> = architectures.iter().map(String::as_str).collect();
    let object = gpuinstr_tests::hip_object_with("emulator/matrix.hip", &architectures);
    // The six ordered position pairs of a group.
    const PAIRS: [(usize, usize); 6] = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];
    for target in targets {
        let mut d = device(&object, target);
        let ocp = target == "gfx950";
        for kernel in SPARSE_KERNELS.iter().filter(|kernel| !kernel.split || target == "gfx950") {
            let (m, k) = (kernel.m, kernel.k);
            let bits = match kernel.element {
                "f16" | "bf16" => 16,
                _ => 8,
            };
            let per_lane = k * m / 64;
            let (a_format, b_format) = kernel.element.split_once('_').unwrap_or(("", ""));
            let encode = |v: i64, format: &str| -> u64 {
                match kernel.element {
                    "f16" => u64::from(half::f16::from_f32(v as f32).to_bits()),
                    "bf16" => u64::from(half::bf16::from_f32(v as f32).to_bits()),
                    "i8" => u64::from(v as i8 as u8),
                    _ if format == "fp8" => u64::from(small_integer_as_8_bit_float(v, 3, if ocp { 7 } else { 8 })),
                    _ => u64::from(small_integer_as_8_bit_float(v, 2, if ocp { 15 } else { 16 })),
                }
            };
            // Row i's group g (4 dense k) keeps the positions of pair
            // (i + g) % 6; other sets get the pair after it.
            let pair = |i: usize, g: usize, set: usize| PAIRS[(i + g + usize::from(set != kernel.abid)) % 6];
            let value = |i: usize, kk: usize| ((i * 3 + kk * 5) % 9) as i64 - 4;
            let a = |i: usize, kk: usize| {
                let (p0, p1) = pair(i, kk / 4, kernel.abid);
                if kk % 4 == p0 || kk % 4 == p1 {
                    value(i, kk)
                } else {
                    0
                }
            };
            let bm = |kk: usize, j: usize| ((kk * 2 + j * 7) % 7) as i64 - 3;
            let c = |i: usize, j: usize| ((i * 5 + j * 3) % 11) as i64 - 5;
            let a_bytes = per_lane / 2 * bits / 8;
            let b_bytes = per_lane * bits / 8;
            let (mut pa, mut pb) = (vec![0u8; 64 * a_bytes], vec![0u8; 64 * b_bytes]);
            let mut index = vec![0u32; 64];
            let put = |buffer: &mut [u8], bit: usize, raw: u64| {
                for n in 0..bits / 8 {
                    buffer[bit / 8 + n] = (raw >> (8 * n)) as u8;
                }
            };
            // Where element kk of row (A) or column (B) `outer` is: (lane, slot).
            let source_place = |outer: usize, kk: usize| {
                if kernel.split {
                    let (half, kk) = (kk / (k / 2), kk % (k / 2));
                    (outer + m * (kk / (per_lane / 2)), per_lane / 2 * half + kk % (per_lane / 2))
                } else {
                    (outer + m * (kk / per_lane), kk % per_lane)
                }
            };
            let mut element_at = vec![vec![(0, 0); per_lane]; 64];
            for outer in 0..m {
                for kk in 0..k {
                    let (lane, slot) = source_place(outer, kk);
                    put(&mut pb, lane * b_bytes * 8 + slot * bits, encode(bm(kk, outer), b_format));
                    element_at[lane][slot] = (outer, kk);
                }
            }
            // A lane's dense slots come in groups of 4 consecutive k; 2 of
            // each are stored, in slot order.
            for (lane, slots) in element_at.iter().enumerate() {
                for group in 0..per_lane / 4 {
                    let (outer, first_k) = slots[4 * group];
                    let (p0, p1) = pair(outer, first_k / 4, kernel.abid);
                    for (t, p) in [(0, p0), (1, p1)] {
                        let slot = 2 * group + t;
                        put(&mut pa, lane * a_bytes * 8 + slot * bits, encode(a(outer, first_k + p), a_format));
                    }
                    for set in 0..32 / per_lane {
                        let (q0, q1) = pair(outer, first_k / 4, set);
                        index[lane] |= ((q0 | q1 << 2) as u32) << (set * per_lane + 4 * group);
                    }
                }
            }
            let results = m * m / 64;
            let place = |i: usize, j: usize| {
                let groups = 64 / m;
                let register = i / (4 * groups) * 4 + i % 4;
                let lane = (i / 4) % groups * m + j;
                lane * results + register
            };
            let (mut pc, mut expected) = (vec![0i64; 64 * results], vec![0i64; 64 * results]);
            for i in 0..m {
                for j in 0..m {
                    pc[place(i, j)] = c(i, j);
                    expected[place(i, j)] = c(i, j) + (0..k).map(|kk| a(i, kk) * bm(kk, j)).sum::<i64>();
                }
            }
            let integer = kernel.element == "i8";
            let c_bytes: Vec<u8> = if integer {
                pc.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect()
            } else {
                pc.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect()
            };
            let out = d.allocate("out", &vec![0xff; c_bytes.len()]);
            let (a_at, b_at, c_at) = (d.allocate("a", &pa), d.allocate("b", &pb), d.allocate("c", &c_bytes));
            let index_at = d.allocate("index", &bytes(&index, u32::to_le_bytes));
            let args = [pointer(out), pointer(a_at), pointer(b_at), pointer(c_at), pointer(index_at)];
            d.launch(kernel.name, Launch::linear(1, 64), &args)
                .unwrap_or_else(|e| panic!("{target} {}: {e}", kernel.name));
            let got: Vec<f64> = if integer {
                read_i32(&d, out, 64 * results).iter().map(|v| f64::from(*v)).collect()
            } else {
                read_f32(&d, out, 64 * results).iter().map(|v| f64::from(*v)).collect()
            };
            let expected: Vec<f64> = expected.iter().map(|v| *v as f64).collect();
            assert_eq!(got, expected, "{target} {}", kernel.name);
        }
    }
}

/// One F8F6F4 kernel of tests/inputs/emulator/matrix.hip (gfx950): M (K is
/// 128 for 16, 64 for 32), A's and B's formats (cbsz, blgp) and, when
/// scaled, the scale bytes op_sel picks.
struct F8f6f4Kernel {
    name: &'static str,
    m: usize,
    formats: (usize, usize),
    scale_bytes: Option<(usize, usize)>,
}

#[rustfmt::skip]
const F8F6F4_KERNELS: [F8f6f4Kernel; 7] = [
    F8f6f4Kernel { name: "f8f6f4_16_fp8_fp8", m: 16, formats: (0, 0), scale_bytes: None },
    F8f6f4Kernel { name: "f8f6f4_16_bf8_fp4", m: 16, formats: (1, 4), scale_bytes: Some((1, 2)) },
    F8f6f4Kernel { name: "f8f6f4_16_fp6_bf6", m: 16, formats: (2, 3), scale_bytes: Some((3, 0)) },
    F8f6f4Kernel { name: "f8f6f4_16_fp4_fp4", m: 16, formats: (4, 4), scale_bytes: Some((0, 1)) },
    F8f6f4Kernel { name: "f8f6f4_16_bf6_fp8", m: 16, formats: (3, 0), scale_bytes: None },
    F8f6f4Kernel { name: "f8f6f4_32_fp8_bf6", m: 32, formats: (0, 3), scale_bytes: Some((2, 3)) },
    F8f6f4Kernel { name: "f8f6f4_32_fp4_bf8", m: 32, formats: (4, 1), scale_bytes: None },
];

/// gfx950's F8F6F4 MFMAs, scaled and not, compute what a CPU matmul of the
/// decoded elements times their E8M0 scales computes. Per the CDNA4 ISA
/// guide: each lane holds 32 k of a row (column); 4- and 6-bit elements
/// packed from the low bits, lane `i + M*(k/32)`; 8-bit ones in two halves,
/// registers 0-3 holding k < K/2 and 4-7 the rest, 16 k per lane in each;
/// the scale of row i (column j) and k-block k/32 in lane `i + M*(k/32)`,
/// in the byte op_sel picks (the other bytes hold other scales, so a wrong
/// byte fails). Only LLVM 21 knows gfx950.
#[test]
fn f8f6f4_mfma_computes_what_a_cpu_matmul_computes() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return;
    }
    let object = gpuinstr_tests::hip_object_with("emulator/matrix.hip", &["--offload-arch=gfx950"]);
    let mut d = device(&object, "gfx950");
    for kernel in &F8F6F4_KERNELS {
        let m = kernel.m;
        let k = if m == 16 { 128 } else { 64 };
        // (mantissa bits, bias, bits) of each format: OCP fp8, bf8, fp6, bf6, fp4.
        let formats = [(3, 7, 8), (2, 15, 8), (3, 1, 6), (2, 3, 6), (1, 1, 4)];
        let a = |i: usize, kk: usize| ((i * 3 + kk * 5) % 9) as i64 - 4;
        let bm = |kk: usize, j: usize| ((kk * 2 + j * 7) % 7) as i64 - 3;
        let c = |i: usize, j: usize| ((i * 5 + j * 3) % 11) as i64 - 5;
        // Scale exponents (2^-1, 2^0, 2^1) by row or column and k-block.
        let scale = |outer: usize, block: usize| ((outer + block) % 3) as i64 - 1;
        let mut operands = [vec![0u8; 64 * 32], vec![0u8; 64 * 32]];
        for (operand, format, value) in [
            (0, kernel.formats.0, &a as &dyn Fn(usize, usize) -> i64),
            (1, kernel.formats.1, &|j: usize, kk: usize| bm(kk, j)),
        ] {
            let (mantissa_bits, bias, bits) = formats[format];
            for outer in 0..m {
                for kk in 0..k {
                    let (lane, bit) = if bits == 8 {
                        let (half, within) = (kk / (k / 2), kk % (k / 2));
                        (outer + m * (within / 16), 8 * (16 * half + within % 16))
                    } else {
                        (outer + m * (kk / 32), bits as usize * (kk % 32))
                    };
                    let code = u16::from(small_integer_as_float(value(outer, kk), mantissa_bits, bias, bits));
                    let at = lane * 32 * 8 + bit;
                    let word = u16::from_le_bytes([
                        operands[operand][at / 8],
                        *operands[operand].get(at / 8 + 1).unwrap_or(&0),
                    ]);
                    let word = word | code << (at % 8);
                    operands[operand][at / 8] = word as u8;
                    if at / 8 + 1 < operands[operand].len() {
                        operands[operand][at / 8 + 1] = (word >> 8) as u8;
                    }
                }
            }
        }
        // Each lane's scale word: the picked byte the scale, the others 2^5.
        let scale_words = |picked: usize| -> Vec<i32> {
            (0..64)
                .map(|lane: usize| {
                    let code = (127 + scale(lane % m, lane / m)) as u32;
                    (0..4).map(|b| if b == picked { code } else { 132 } << (8 * b)).sum::<u32>() as i32
                })
                .collect()
        };
        let (bytes_a, bytes_b) = kernel.scale_bytes.unwrap_or((0, 0));
        let scaled = kernel.scale_bytes.is_some();
        let results = m * m / 64;
        // D[i][j]: rows in groups of 4 registers by M lanes.
        let lane = |i: usize, j: usize| (i / 4) % (64 / m) * m + j;
        let register = |i: usize| i / (4 * (64 / m)) * 4 + i % 4;
        let (mut pc, mut expected) = (vec![0f32; 64 * results], vec![0f32; 64 * results]);
        for i in 0..m {
            for j in 0..m {
                let at = lane(i, j) * results + register(i);
                pc[at] = c(i, j) as f32;
                let sum: f64 = (0..k)
                    .map(|kk| {
                        let exponent = if scaled { scale(i, kk / 32) + scale(j, kk / 32) } else { 0 };
                        (a(i, kk) * bm(kk, j)) as f64 * 2f64.powi(exponent as i32)
                    })
                    .sum();
                expected[at] = (sum + c(i, j) as f64) as f32;
            }
        }
        let out = d.allocate("out", &vec![0xff; 4 * 64 * results]);
        let (a_at, b_at, c_at) =
            (d.allocate("a", &operands[0]), d.allocate("b", &operands[1]), d.allocate("c", &f32s(&pc)));
        let (scale_a, scale_b) =
            (d.allocate("scale_a", &i32s(&scale_words(bytes_a))), d.allocate("scale_b", &i32s(&scale_words(bytes_b))));
        let args = [pointer(out), pointer(a_at), pointer(b_at), pointer(c_at), pointer(scale_a), pointer(scale_b)];
        d.launch(kernel.name, Launch::linear(1, 64), &args).unwrap_or_else(|e| panic!("gfx950 {}: {e}", kernel.name));
        assert_eq!(read_f32(&d, out, 64 * results), expected, "gfx950 {}", kernel.name);
    }
}

/// Half precision as clang compiles HIP's `_Float16` code: division (an f32
/// reciprocal, then `v_div_fixup_f16`), three-operand min/max/median,
/// fract (below 1 even where f64 would round to it), ldexp, frexp and sin
/// and cos, on every processor, against the CPU. Inputs keep every result
/// exact: divisors are powers of two (and zero), angles quarter turns.
#[test]
fn half_precision_math_computes_what_the_cpu_computes() {
    use half::f16;
    let a: Vec<f32> = (0..64)
        .map(|i| match i {
            0 | 5 => 0.0,
            1 => -0.0,
            2 => -0.000_1,
            _ => (i as f32 - 32.0) * 0.25,
        })
        .collect();
    let divisors = [1.0, 2.0, 4.0, 0.5, -2.0, -0.25, 8.0];
    let b: Vec<f32> = (0..64).map(|i| if i == 0 || i == 6 { 0.0 } else { divisors[i % divisors.len()] }).collect();
    let c: Vec<f32> = (0..64).map(|i| (i % 8) as f32 * 0.25 - 1.0).collect();
    let halves = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| f16::from_f32(*x).to_bits().to_le_bytes()).collect() };
    let round = |x: f64| f16::from_f64(x).to_f32();
    for target in every_target() {
        let mut d = device(&object_for_every_target(MATH_LIBRARY), target);
        let (pa, pb, pc) = (d.allocate("a", &halves(&a)), d.allocate("b", &halves(&b)), d.allocate("c", &halves(&c)));
        let (out, exponents) = (d.allocate("out", &[0xff; 64 * 9 * 2]), d.allocate("exponents", &[0xff; 64 * 2]));
        let args = [pointer(out), pointer(exponents), pointer(pa), pointer(pb), pointer(pc)];
        d.launch("_Z8halfMathPDF16_PsPKDF16_S2_S2_", Launch::linear(1, 64), &args)
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        let got: Vec<f32> =
            read(&d, out, 64 * 9, u16::from_le_bytes).iter().map(|h| f16::from_bits(*h).to_f32()).collect();
        let got_exponents = read(&d, exponents, 64, i16::from_le_bytes);
        for i in 0..64 {
            let (x, y, z) = (f64::from(round(f64::from(a[i]))), f64::from(b[i]), f64::from(c[i]));
            let (median, lowest, highest) = {
                let mut sorted = [x, y, z];
                sorted.sort_by(f64::total_cmp);
                (sorted[1], sorted[0], sorted[2])
            };
            let fract = if x - x.floor() >= 1.0 - 2f64.powi(-12) { 1.0 - 2f64.powi(-11) } else { x - x.floor() };
            let (mantissa, exponent) = if x == 0.0 {
                (x, 0)
            } else {
                let exponent = x.abs().log2().floor() as i32 + 1;
                (x / 2f64.powi(exponent), exponent)
            };
            let expected = [
                x / y,
                median,
                lowest,
                highest,
                fract,
                x * 2f64.powi(i as i32 - 32),
                mantissa,
                (z * std::f64::consts::TAU).sin(),
                (z * std::f64::consts::TAU).cos(),
            ];
            let names = ["div", "med3", "min3", "max3", "fract", "ldexp", "frexp_mant", "sin", "cos"];
            for (k, want) in expected.iter().enumerate() {
                let (got, want) = (got[9 * i + k], round(*want));
                let same =
                    got == want && got.is_sign_negative() == want.is_sign_negative() || (got.is_nan() && want.is_nan());
                assert!(same, "{target} {}({x}, {y}, {z}) = {got}, want {want}", names[k]);
            }
            assert_eq!(i32::from(got_exponents[i]), exponent, "{target} frexp_exp({x})");
        }
    }
}

/// What clang 21 emits on gfx950 for `__bf16` and `_Float16` conversions
/// (`v_cvt_pk_bf16_f32` for two f32 into packed bf16 halves; a shift for
/// bf16 to f32; `v_cvt_f16_f32` per half) computes what the CPU computes:
/// round to nearest even (ties at both precisions), overflow to infinity,
/// NaN stays NaN.
#[test]
fn gfx950_conversions_compute_what_the_cpu_computes() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return; // only LLVM 21 knows gfx950
    }
    let object = gpuinstr_tests::hip_object_with(MATH_LIBRARY, &["--offload-arch=gfx950"]);
    let mut d = device(&object, "gfx950");
    let bf16_bits: Vec<u16> = (0..64u32).map(|i| (i.wrapping_mul(2654435761) >> 16) as u16).collect();
    // Ties at bf16 and f16 precision, values past f16's range, NaN.
    let special = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), 1.0 + 2f32.powi(-11), 70000.0, -1e30, f32::NAN];
    let a: Vec<f32> = (0..64).map(|i| if i < special.len() { special[i] } else { (i as f32 - 20.0) * 0.3 }).collect();
    let b: Vec<f32> = a.iter().rev().copied().collect();
    let (pin, pa, pb) = (
        d.allocate("in", &bytes(&bf16_bits, u16::to_le_bytes)),
        d.allocate("a", &f32s(&a)),
        d.allocate("b", &f32s(&b)),
    );
    let (wide, bf16_pairs, half_pairs) =
        (d.allocate("wide", &[0xff; 256]), d.allocate("bf16", &[0xff; 256]), d.allocate("f16", &[0xff; 256]));
    let args = [pointer(wide), pointer(bf16_pairs), pointer(half_pairs), pointer(pin), pointer(pa), pointer(pb)];
    d.launch("_Z13wideAndNarrowPfPjS0_PKtPKfS4_", Launch::linear(1, 64), &args).unwrap();
    let (got_wide, got_bf16, got_half) =
        (read_u32(&d, wide, 64), read_u32(&d, bf16_pairs, 64), read_u32(&d, half_pairs, 64));
    let nan_or = |got: u16, want: u16, nan: bool| {
        if nan {
            got & 0x7fff > 0x7c00 || got & 0x7f80 == 0x7f80
        } else {
            got == want
        }
    };
    for i in 0..64 {
        assert_eq!(got_wide[i], u32::from(bf16_bits[i]) << 16, "bf16 {:#x} to f32", bf16_bits[i]);
        for (got, to) in [
            (got_bf16[i], (|x: f32| half::bf16::from_f32(x).to_bits()) as fn(f32) -> u16),
            (got_half[i], |x: f32| half::f16::from_f32(x).to_bits()),
        ] {
            for (half_index, x) in [(0, a[i]), (1, b[i])] {
                let part = (got >> (16 * half_index)) as u16;
                assert!(nan_or(part, to(x), x.is_nan()), "{x} into half {half_index} of {got:#x}");
            }
        }
    }
}

/// HIP's dot-product builtins (`__builtin_amdgcn_[su]dot{2,4,8}`, `fdot2`)
/// on every processor compute what the CPU computes: signed and unsigned
/// 16-, 8- and 4-bit elements summed with the accumulator, wrapping, or
/// saturating with clamp; f16 pairs summed with an f32 (clamped to [0, 1]
/// with clamp). gfx908 and newer run the accumulating VOP2 forms.
#[test]
fn dot_products_compute_what_the_cpu_computes() {
    let a: Vec<i32> = (0..64u32).map(|i| i.wrapping_mul(2654435761) as i32).collect();
    let b: Vec<i32> = (0..64u32).map(|i| (i.wrapping_mul(40503) ^ 0x9e37_79b9) as i32).collect();
    // Accumulators near both ends of the range, so clamp saturates.
    let c: Vec<i32> = (0..64)
        .map(|i| match i % 4 {
            0 => i32::MAX - 100,
            1 => i32::MIN + 100,
            2 => -5,
            _ => i * 1000,
        })
        .collect();
    let h: Vec<[f32; 2]> = (0..64).map(|i| [(i % 7) as f32 - 3.0, (i % 5) as f32 * 0.5]).collect();
    let k: Vec<[f32; 2]> = (0..64).map(|i| [(i % 3) as f32 * 0.25, 2.0 - (i % 4) as f32]).collect();
    let f: Vec<f32> = (0..64).map(|i| (i % 9) as f32 * 0.125 - 0.5).collect();
    let pairs = |v: &[[f32; 2]]| -> Vec<u8> {
        v.iter().flat_map(|p| p.iter().flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes())).collect()
    };
    // Element `k` of a word: `bits` wide, sign-extended when `signed`.
    let element = |word: i32, k: u32, bits: u32, signed: bool| -> i64 {
        let raw = i64::from((word as u32 >> (k * bits)) & ((1u32 << bits) - 1));
        if signed && raw >= 1 << (bits - 1) {
            raw - (1 << bits)
        } else {
            raw
        }
    };
    for target in every_target() {
        let mut d = device(&object_for_every_target(MATH_LIBRARY), target);
        let (pa, pb, pc) = (d.allocate("a", &i32s(&a)), d.allocate("b", &i32s(&b)), d.allocate("c", &i32s(&c)));
        let (ph, pk, pf) = (d.allocate("h", &pairs(&h)), d.allocate("k", &pairs(&k)), d.allocate("f", &f32s(&f)));
        let (out, float_out) = (d.allocate("out", &[0xff; 64 * 8 * 4]), d.allocate("float_out", &[0xff; 64 * 2 * 4]));
        let args = [
            pointer(out),
            pointer(float_out),
            pointer(pa),
            pointer(pb),
            pointer(pc),
            pointer(ph),
            pointer(pk),
            pointer(pf),
        ];
        d.launch("_Z4dotsPiPfPKiS2_S2_PKDv2_DF16_S5_PKf", Launch::linear(1, 64), &args)
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        let (got, got_float) = (read_i32(&d, out, 64 * 8), read_f32(&d, float_out, 64 * 2));
        for i in 0..64 {
            let dot = |count: u32, bits: u32, signed: bool| -> i64 {
                let start = if signed { i64::from(c[i]) } else { i64::from(c[i] as u32) };
                start + (0..count).map(|e| element(a[i], e, bits, signed) * element(b[i], e, bits, signed)).sum::<i64>()
            };
            let expected = [
                dot(4, 8, true) as i32,
                dot(4, 8, false) as u32 as i32,
                dot(8, 4, true) as i32,
                dot(8, 4, false) as u32 as i32,
                dot(2, 16, true) as i32,
                dot(2, 16, false) as u32 as i32,
                dot(4, 8, true).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
                dot(4, 8, false).clamp(0, i64::from(u32::MAX)) as u32 as i32,
            ];
            let names = ["sdot4", "udot4", "sdot8", "udot8", "sdot2", "udot2", "sdot4 clamp", "udot4 clamp"];
            for (n, want) in expected.iter().enumerate() {
                assert_eq!(got[8 * i + n], *want, "{target} {}({:#x}, {:#x}, {})", names[n], a[i], b[i], c[i]);
            }
            let sum =
                f64::from(h[i][0]) * f64::from(k[i][0]) + f64::from(h[i][1]) * f64::from(k[i][1]) + f64::from(f[i]);
            assert_eq!(got_float[2 * i], sum as f32, "{target} fdot2 lane {i}");
            assert_eq!(got_float[2 * i + 1], (sum as f32).clamp(0.0, 1.0), "{target} fdot2 clamp lane {i}");
        }
    }
}

/// gfx950's bf16 dot products (`v_dot2c_f32_bf16`, and `v_dot2_f32_bf16`
/// with clamp to [0, 1]) sum exact products with the accumulator; its LFSR
/// step (`v_prng_b32`) shifts left and folds the top bit into taps 0xc5.
#[test]
fn gfx950_bf16_dots_and_the_lfsr_compute_what_the_cpu_computes() {
    use half::bf16;
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return; // LLVM 21 is the first of ours that knows gfx950
    }
    let pair = |low: f32, high: f32| {
        u32::from(bf16::from_f32(low).to_bits()) | u32::from(bf16::from_f32(high).to_bits()) << 16
    };
    let a: Vec<i32> = (0..64)
        .map(|i| if i == 0 { i32::MIN } else { pair((i % 7) as f32 - 3.0, (i % 5) as f32 * 0.25) as i32 })
        .collect();
    let b: Vec<i32> = (0..64).map(|i| pair((i % 3) as f32 * 0.5, 2.0 - (i % 4) as f32) as i32).collect();
    let f: Vec<f32> = (0..64).map(|i| (i % 9) as f32 * 0.125 - 0.5).collect();
    let mut d = device(&object_for_every_target(MATH_LIBRARY), "gfx950");
    let (pa, pb, pf) = (d.allocate("a", &i32s(&a)), d.allocate("b", &i32s(&b)), d.allocate("f", &f32s(&f)));
    let (dots, random) = (d.allocate("dots", &[0xff; 64 * 2 * 4]), d.allocate("random", &[0xff; 64 * 4]));
    let args = [pointer(dots), pointer(random), pointer(pa), pointer(pb), pointer(pf)];
    d.launch("_Z12gfx950ExtrasPfPjPKjS2_PKf", Launch::linear(1, 64), &args).unwrap_or_else(|e| panic!("{e}"));
    let (got_dots, got_random) = (read_f32(&d, dots, 64 * 2), read_u32(&d, random, 64));
    for i in 0..64 {
        let element = |word: i32, k: u32| f64::from(bf16::from_bits((word as u32 >> (16 * k)) as u16).to_f32());
        let sum = (element(a[i], 0) * element(b[i], 0) + element(a[i], 1) * element(b[i], 1) + f64::from(f[i])) as f32;
        assert_eq!(got_dots[2 * i], sum, "lane {i}: dot");
        assert_eq!(got_dots[2 * i + 1], sum.clamp(0.0, 1.0), "lane {i}: dot with clamp");
        let x = a[i] as u32;
        let step = (x << 1) ^ if x >> 31 == 1 { 0xc5 } else { 0 };
        assert_eq!(got_random[i], step, "lane {i}: prng of {x:#x}");
    }
}

/// What plain source becomes on MI300 and MI350, on every processor: a
/// literal folded into an fma (`v_fmaak_f32`/`v_fmamk_f32` on gfx940+;
/// single rounding), IEEE minimum and maximum of three (gfx950's
/// `v_minimum3_f32`/`v_maximum3_f32`: NaN wins, -0 below +0; clang 20 and
/// newer) and packed bf16 atomic adds (`global_atomic_pk_add_bf16` on
/// gfx940+; HIP 6 and newer, which come with LLVM 21 here). The bf16 sums
/// are exact in any order the lanes add.
#[test]
fn folded_forms_compute_what_the_cpu_computes() {
    use half::bf16;
    let a: Vec<f32> = (0..64)
        .map(|i| match i {
            0 => f32::NAN,
            1 => 0.0,
            2 => -0.0,
            3 => f32::INFINITY,
            _ => (i as f32 - 30.0) * 0.37,
        })
        .collect();
    let b: Vec<f32> = (0..64)
        .map(|i| match i {
            1 => -0.0,
            2 => 0.0,
            4 => f32::NAN,
            5 => f32::NEG_INFINITY,
            _ => 1.0 / (i as f32 + 0.5),
        })
        .collect();
    let c: Vec<f32> = (0..64)
        .map(|i| match i {
            6 => f32::NAN,
            7 | 2 => -0.0,
            _ => ((i * 7) % 11) as f32 - 5.0,
        })
        .collect();
    let pair = |i: u32| {
        let (low, high) = (bf16::from_f32((i % 3 + 1) as f32), bf16::from_f32((i % 5) as f32 * 0.5));
        u32::from(low.to_bits()) | u32::from(high.to_bits()) << 16
    };
    let pairs: Vec<i32> = (0..64).map(|i| pair(i) as i32).collect();
    let minimum = |x: f32, y: f32| match () {
        _ if x.is_nan() || y.is_nan() => f32::NAN,
        _ if x == y => f32::from_bits(x.to_bits() | y.to_bits()),
        _ => x.min(y),
    };
    let maximum = |x: f32, y: f32| match () {
        _ if x.is_nan() || y.is_nan() => f32::NAN,
        _ if x == y => f32::from_bits(x.to_bits() & y.to_bits()),
        _ => x.max(y),
    };
    let same = |x: f32, y: f32| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    let llvm = gpuinstr::toolchain::LLVM_MAJOR;
    for target in every_target() {
        let mut d = device(&object_for_every_target(MATH_LIBRARY), target);
        let (pa, pb, pc) = (d.allocate("a", &f32s(&a)), d.allocate("b", &f32s(&b)), d.allocate("c", &f32s(&c)));
        let pp = d.allocate("pairs", &i32s(&pairs));
        let (out, sums) = (d.allocate("out", &[0xff; 64 * 4 * 4]), d.allocate("sums", &[0; 4 * 4]));
        let args = [pointer(out), pointer(sums), pointer(pa), pointer(pb), pointer(pc), pointer(pp)];
        d.launch("_Z11foldedFormsPfPjPKfS2_S2_PKj", Launch::linear(1, 64), &args)
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        let got = read_f32(&d, out, 64 * 4);
        for i in 0..64 {
            let (x, y, z) = (a[i], b[i], c[i]);
            let folded = x.mul_add(y, 3.7);
            let mut expected = vec![("fmaak", folded), ("fmamk", folded.mul_add(1.3, z))];
            if llvm >= 20 {
                expected.push(("minimum3", minimum(minimum(x, y), z)));
                expected.push(("maximum3", maximum(maximum(x, y), z)));
            }
            for (k, (name, want)) in expected.into_iter().enumerate() {
                let value = got[4 * i + k];
                assert!(same(value, want), "{target}: {name}({x}, {y}, {z}) = {want:e}, not {value:e}");
            }
        }
        if llvm >= 21 {
            let got_sums = read_u32(&d, sums, 4);
            for (slot, got) in got_sums.iter().enumerate() {
                let (mut low, mut high) = (0.0f32, 0.0f32);
                for i in (slot..64).step_by(4) {
                    low += bf16::from_bits(pair(i as u32) as u16).to_f32();
                    high += bf16::from_bits((pair(i as u32) >> 16) as u16).to_f32();
                }
                let want = u32::from(bf16::from_f32(low).to_bits()) | u32::from(bf16::from_f32(high).to_bits()) << 16;
                assert_eq!(*got, want, "{target}: slot {slot}: {got:#010x}, not {want:#010x} ({low} and {high})");
            }
        }
    }
}

/// Every instruction clang emits for our emulator test sources has
/// semantics on every processor we build for (the list `--unimplemented`
/// prints is empty), not only the instructions the tests happen to reach:
/// double-precision math, packed 16- and 8-bit arithmetic, dot products,
/// atomics, the instrumentation and device test kernels, and the MFMA and
/// 8-bit float builtins where the processor has them.
#[test]
fn every_instruction_our_sources_compile_to_has_semantics() {
    let sources = [
        ARITHMETIC,
        MATH_LIBRARY,
        "emulator/scalar_atomics.hip",
        "kernels/control_flow.hip",
        "kernels/memory.hip",
        "kernels/calls_and_scratch.hip",
        "kernels/neighbours.hip",
        "device/vector_add.hip",
        "device/runtime_features.hip",
        "device/device_printf.hip",
        "device/module_kernels.hip",
        "runtime/counted.hip",
        "regressions/constant_table.hip",
    ];
    for source in sources {
        for target in every_target() {
            let mut d = device(&object_for_every_target(source), target);
            let coverage = d.program.coverage().unwrap_or_else(|e| panic!("{source} {target}: {e}"));
            let missing: Vec<&String> =
                coverage.opcodes.iter().filter(|(_, (_, ok))| !ok).map(|(name, _)| name).collect();
            assert!(missing.is_empty(), "{source} for {target}: no semantics for {missing:?}");
            assert!(coverage.instructions > 10, "{source} for {target}: {} instructions", coverage.instructions);
        }
    }
    // The matrix and 8-bit float builtins, for the processors that have them.
    let mut matrix_targets = vec![gpuinstr_tests::mi300()];
    if gpuinstr::toolchain::LLVM_MAJOR >= 21 {
        matrix_targets.push("gfx950");
    }
    let architectures: Vec<String> = matrix_targets.iter().map(|t| format!("--offload-arch={t}")).collect();
    let architectures: Vec<&str> = architectures.iter().map(String::as_str).collect();
    for source in ["emulator/matrix.hip", "emulator/fp8.hip"] {
        let object = gpuinstr_tests::hip_object_with(source, &architectures);
        for target in ["gfx908", "gfx90a"].iter().chain(&matrix_targets) {
            let mut d = device(&object, target);
            let coverage = d.program.coverage().unwrap_or_else(|e| panic!("{source} {target}: {e}"));
            let missing: Vec<&String> =
                coverage.opcodes.iter().filter(|(_, (_, ok))| !ok).map(|(name, _)| name).collect();
            assert!(missing.is_empty(), "{source} for {target}: no semantics for {missing:?}");
        }
    }
}

/// gfx950's `v_permlane16_swap_b32` and `v_permlane32_swap_b32` (HIP's
/// `__builtin_amdgcn_permlane{16,32}_swap`): the odd 16-lane rows of the
/// first operand trade places with the even rows of the second (the upper
/// 32 lanes with the lower 32), every other lane keeps its value.
#[test]
fn gfx950_lane_swaps_trade_rows_as_documented() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return; // only LLVM 21 knows gfx950
    }
    let object = gpuinstr_tests::hip_object_with(MATH_LIBRARY, &["--offload-arch=gfx950"]);
    let mut d = device(&object, "gfx950");
    let a: Vec<u32> = (0..64).map(|lane| 0xa000 + lane).collect();
    let b: Vec<u32> = (0..64).map(|lane| 0xb000 + lane).collect();
    let (pa, pb) = (d.allocate("a", &bytes(&a, u32::to_le_bytes)), d.allocate("b", &bytes(&b, u32::to_le_bytes)));
    let out = d.allocate("out", &[0xff; 64 * 4 * 4]);
    d.launch("_Z9laneSwapsPjPKjS1_", Launch::linear(1, 64), &[pointer(out), pointer(pa), pointer(pb)]).unwrap();
    let got = read_u32(&d, out, 64 * 4);
    for lane in 0..64usize {
        // The first result is the first operand after the swap; the second the second's.
        let row = lane / 16;
        let sixteen = if row % 2 == 1 { (b[lane - 16], b[lane]) } else { (a[lane], a[lane + 16]) };
        let thirty_two = if lane >= 32 { (b[lane - 32], b[lane]) } else { (a[lane], a[lane + 32]) };
        assert_eq!((got[4 * lane], got[4 * lane + 1]), sixteen, "permlane16_swap lane {lane}");
        assert_eq!((got[4 * lane + 2], got[4 * lane + 3]), thirty_two, "permlane32_swap lane {lane}");
    }
}

/// A small float's value (FP6 E2M3, BF6 E3M2, FP4 E2M1: no infinity, no
/// NaN), from the OCP MX definition; the sign is the top of `bits`.
fn small_float_value(code: u32, bits: u32, mantissa_bits: u32, bias: i32) -> f64 {
    let sign = code >> (bits - 1) & 1;
    let exponent = ((code & ((1 << (bits - 1)) - 1)) >> mantissa_bits) as i32;
    let mantissa = f64::from(code & ((1 << mantissa_bits) - 1));
    let scale = f64::from(1u32 << mantissa_bits);
    let magnitude = if exponent == 0 {
        mantissa / scale * 2f64.powi(1 - bias)
    } else {
        (1.0 + mantissa / scale) * 2f64.powi(exponent - bias)
    };
    if sign == 1 {
        -magnitude
    } else {
        magnitude
    }
}

/// The code of `value` in a format whose non-negative codes are
/// `0..=largest` (values by `decode`): the nearest, ties to the even code,
/// or toward zero (`truncate`); past the largest, the largest.
fn nearest_code(value: f64, largest: u32, sign_bit: u32, decode: &dyn Fn(u32) -> f64, truncate: bool) -> u32 {
    let magnitude = value.abs();
    let mut best = 0;
    for code in 1..=largest {
        let (here, there) = (decode(code), decode(best));
        let better = if truncate {
            here <= magnitude && here > there
        } else {
            let (d_here, d_best) = ((here - magnitude).abs(), (there - magnitude).abs());
            d_here < d_best || (d_here == d_best && code & 1 == 0)
        };
        if better {
            best = code;
        }
    }
    if value.is_sign_negative() {
        best | 1 << sign_bit
    } else {
        best
    }
}

/// gfx950's scaled conversions (`v_cvt_scalef32_*`, what clang 21's MX
/// builtins become; CK, Triton and aiter use them for MXFP4 and MXFP8):
/// widening FP8, BF8, FP4 and FP6 codes into f32, f16 and bf16 and
/// narrowing values into them, with each lane's scale (only its exponent
/// counts: the sign and mantissa some lanes carry change nothing), the byte
/// and word selects (the rest of the destination kept), round to nearest
/// even, FP4's saturation, and stochastic rounding with a zero seed (which
/// truncates), against the formats' definitions.
#[test]
fn gfx950_scaled_conversions_follow_the_mx_formats() {
    if gpuinstr::toolchain::LLVM_MAJOR < 21 {
        return; // gfx950 needs LLVM 21
    }
    let object = gpuinstr_tests::hip_object_with("emulator/scaled.hip", &["--offload-arch=gfx950"]);
    let mut d = device(&object, "gfx950");
    // Each lane's scale: 2^k for k in -5..=7 (every widened value stays a
    // normal f16), with a sign and mantissa on every third lane.
    let k = |lane: usize| (lane % 13) as i32 - 5;
    let scales: Vec<f32> =
        (0..64).map(|l| if l % 3 == 0 { -1.75 * 2f32.powi(k(l)) } else { 2f32.powi(k(l)) }).collect();
    let fp8 = |code: u32| f64::from(eight_bit_float_value(code as u8, 3, 7, false));
    let bf8 = |code: u32| f64::from(eight_bit_float_value(code as u8, 2, 15, false));
    let fp4 = |code: u32| small_float_value(code, 4, 1, 1);
    let fp6 = |code: u32| small_float_value(code, 6, 3, 1);
    let same_f32 =
        |got: u32, want: f64| got == (want as f32).to_bits() || (f32::from_bits(got).is_nan() && want.is_nan());
    let half_of = |word: u32, high: bool| (word >> (16 * u32::from(high))) & 0xffff;
    let same_f16 = |got: u32, want: f64| {
        let want = half::f16::from_f64(want);
        got == u32::from(want.to_bits()) || (half::f16::from_bits(got as u16).is_nan() && want.is_nan())
    };
    let same_bf16 = |got: u32, want: f64| got == u32::from(half::bf16::from_f64(want).to_bits());

    // Widening: random code words, and 32 random FP6 codes a lane.
    let mut state = 0x1234_5678u32;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let codes: Vec<u32> = (0..64).map(|_| random()).collect();
    let fp6_words: Vec<u32> = (0..64 * 6).map(|_| random()).collect();
    let as_i32 = |v: &[u32]| i32s(&v.iter().map(|w| *w as i32).collect::<Vec<_>>());
    let (out, wide32) = (d.allocate("out", &i32s(&[0; 64 * 16])), d.allocate("wide32", &f32s(&[0.0; 64 * 32])));
    let (pcodes, pfp6, pscales) = (
        d.allocate("codes", &as_i32(&codes)),
        d.allocate("fp6", &as_i32(&fp6_words)),
        d.allocate("scales", &f32s(&scales)),
    );
    d.launch(
        "scaled_widen",
        Launch::linear(1, 64),
        &[pointer(out), pointer(wide32), pointer(pcodes), pointer(pfp6), pointer(pscales)],
    )
    .unwrap_or_else(|e| panic!("scaled_widen: {e}"));
    let (got, got32) = (read_u32(&d, out, 64 * 16), read_u32(&d, wide32, 64 * 32));
    for lane in 0..64 {
        let (c, f) = (codes[lane], 2f64.powi(k(lane)));
        let o = &got[16 * lane..16 * lane + 16];
        let byte = |b: u32| c >> (8 * b) & 0xff;
        let nibble = |n: u32| c >> (4 * n) & 0xf;
        let checks = [
            ("f32_fp8 byte 0", same_f32(o[0], fp8(byte(0)) * f)),
            ("f32_fp8 byte 3", same_f32(o[1], fp8(byte(3)) * f)),
            ("f32_bf8 byte 2", same_f32(o[2], bf8(byte(2)) * f)),
            ("pk_f32_fp4 byte 1, low", same_f32(o[3], fp4(nibble(2)) * f)),
            ("pk_f32_fp4 byte 1, high", same_f32(o[4], fp4(nibble(3)) * f)),
            ("pk_f16_fp8 high word, low", same_f16(half_of(o[5], false), fp8(byte(2)) * f)),
            ("pk_f16_fp8 high word, high", same_f16(half_of(o[5], true), fp8(byte(3)) * f)),
            ("pk_bf16_fp4 byte 3, low", same_bf16(half_of(o[6], false), fp4(nibble(6)) * f)),
            ("pk_bf16_fp4 byte 3, high", same_bf16(half_of(o[6], true), fp4(nibble(7)) * f)),
            ("f16_fp8 byte 1 into the high half", same_f16(half_of(o[7], true), fp8(byte(1)) * f)),
            ("f16_fp8 keeps the low half", half_of(o[7], false) == 0x5a5a),
            ("pk_f32_bf8 low word, low", same_f32(o[8], bf8(byte(0)) * f)),
            ("pk_f32_bf8 low word, high", same_f32(o[9], bf8(byte(1)) * f)),
        ];
        for (what, ok) in checks {
            assert!(ok, "lane {lane} {what}: codes {c:#010x}, scale {}: {:08x?}", scales[lane], o);
        }
        // 192 bits: six dwords as a little-endian bit stream.
        let words = &fp6_words[6 * lane..6 * lane + 6];
        for e in 0..32 {
            let at = 6 * e;
            let (dword, shift) = (at / 32, at % 32);
            let mut code = words[dword] >> shift;
            if shift > 26 {
                code |= words[dword + 1] << (32 - shift);
            }
            let want = fp6(code & 0x3f) * f;
            assert!(same_f32(got32[32 * lane + e], want), "lane {lane} pk32_f32_fp6 element {e}: want {want}");
        }
    }

    // Narrowing: each lane's pair of values (ties, saturation, zero) times
    // its scale, so that the scaled values are these.
    let base = [1.0f32, -2.5, 1.0625, 3.7, 1.3, 100.0, -1.75, 5.0, 0.0, 2.25, -1.1875, 7.0];
    let a: Vec<f32> = (0..64).map(|l| base[l % base.len()] * 2f32.powi(k(l))).collect();
    let b: Vec<f32> = (0..64).map(|l| base[(l + 5) % base.len()] * 2f32.powi(k(l))).collect();
    let out = d.allocate("out", &i32s(&[0; 64 * 8]));
    let pfp6 = d.allocate("fp6", &i32s(&[0; 64 * 6]));
    let (pa, pb, pscales) =
        (d.allocate("a", &f32s(&a)), d.allocate("b", &f32s(&b)), d.allocate("scales", &f32s(&scales)));
    d.launch(
        "scaled_narrow",
        Launch::linear(1, 64),
        &[pointer(out), pointer(pfp6), pointer(pa), pointer(pb), pointer(pscales)],
    )
    .unwrap_or_else(|e| panic!("scaled_narrow: {e}"));
    let (got, got6) = (read_u32(&d, out, 64 * 8), read_u32(&d, pfp6, 64 * 6));
    let fp8_code = |v: f64, truncate: bool| nearest_code(v, 0x7e, 7, &fp8, truncate);
    let bf8_code = |v: f64| nearest_code(v, 0x7b, 7, &bf8, false);
    let fp4_code = |v: f64, truncate: bool| nearest_code(v, 0x7, 3, &fp4, truncate);
    let fp6_code = |v: f64| nearest_code(v, 0x1f, 5, &fp6, false);
    let put = |old: u32, value: u32, at: u32, width: u32| {
        let mask = ((1u64 << width) - 1) as u32;
        (old & !(mask << at)) | (value & mask) << at
    };
    for lane in 0..64 {
        let old = 0x5a5a_5a5au32.wrapping_add(lane as u32);
        let down = 2f64.powi(-k(lane));
        let (x, y) = (f64::from(a[lane]) * down, f64::from(b[lane]) * down);
        let (hx, hy) = (half::f16::from_f32(a[lane]).to_f64() * down, half::f16::from_f32(b[lane]).to_f64() * down);
        let (gx, gy) = (half::bf16::from_f32(a[lane]).to_f64() * down, half::bf16::from_f32(b[lane]).to_f64() * down);
        let o = &got[8 * lane..8 * lane + 8];
        let want = [
            ("pk_fp8_f32 into the high word", put(old, fp8_code(x, false) | fp8_code(y, false) << 8, 16, 16)),
            ("pk_fp4_f32 into byte 2", put(old, fp4_code(x, false) | fp4_code(y, false) << 4, 16, 8)),
            ("pk_fp4_f16 into byte 1", put(old, fp4_code(hx, false) | fp4_code(hy, false) << 4, 8, 8)),
            ("pk_bf8_bf16 into the low word", put(old, bf8_code(gx) | bf8_code(gy) << 8, 0, 16)),
            ("sr_fp8_f32 (seed 0) into byte 1", put(old, fp8_code(x, true), 8, 8)),
            ("sr_pk_fp4_f32 (seed 0) into byte 3", put(old, fp4_code(x, true) | fp4_code(y, true) << 4, 24, 8)),
        ];
        for (index, (what, want)) in want.into_iter().enumerate() {
            // clang 21 does not give sr_pk_fp4_f32 the old value to keep
            // (its destination's other bytes are whatever the register
            // held): only the byte it writes is checked.
            let kept = if index == 5 { 0xff00_0000 } else { u32::MAX };
            assert_eq!(
                o[index] & kept,
                want & kept,
                "lane {lane} {what}: a {} b {} scale {}",
                a[lane],
                b[lane],
                scales[lane]
            );
        }
        // 2xpk16: field 2p from lane l+p's a, field 2p+1 from its b.
        let mut stream = [0u32; 6];
        for p in 0..16 {
            let neighbour = (lane + p) % 64;
            for (field, value) in [(2 * p, a[neighbour]), (2 * p + 1, b[neighbour])] {
                let code = fp6_code(f64::from(value) * down);
                let at = 6 * field as u32;
                let (dword, shift) = ((at / 32) as usize, at % 32);
                stream[dword] |= code << shift;
                if shift > 26 {
                    stream[dword + 1] |= code >> (32 - shift);
                }
            }
        }
        assert_eq!(&got6[6 * lane..6 * lane + 6], &stream, "lane {lane} 2xpk16_fp6_f32");
    }
}
