//! rocRAND's own generator kernels (Debian's gfx90a:xnack- code object,
//! nobody here wrote them) on the emulator, against CPU implementations of
//! the generators written from their definitions.

use crate::emulator::{pointer, read_f32, read_u32};
use gpuinstr_emulator::{Device, Launch};
use gpuinstr_tests::debian_package_file;

/// A device holding the code object of librocrand.so.1.1 that has `kernel`.
fn rocrand_device(kernel: &str) -> Device {
    let library = debian_package_file("librocrand1", "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    let object = gpuinstr::stages::load::load_for_target(&library, Some("gfx90a:xnack-"))
        .unwrap()
        .code_objects
        .into_iter()
        .find(|o| o.kernels.iter().any(|k| k.name() == kernel))
        .expect("the kernel");
    Device::new(object, "librocrand.so.1.1".into()).unwrap()
}

fn u64_argument(value: u64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// Philox4x32-10 (Salmon et al., Random123) on the CPU.
fn philox4x32_10(mut counter: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key = [key[0].wrapping_add(0x9E37_79B9), key[1].wrapping_add(0xBB67_AE85)];
        }
        let p0 = u64::from(0xD251_1F53u32) * u64::from(counter[0]);
        let p1 = u64::from(0xCD9E_8D57u32) * u64::from(counter[2]);
        counter =
            [(p1 >> 32) as u32 ^ counter[1] ^ key[0], p1 as u32, (p0 >> 32) as u32 ^ counter[3] ^ key[1], p0 as u32];
    }
    counter
}

/// The Philox engine the generate kernels take by value (48 bytes):
/// counter, result, key, substate, padding; counter 0.
fn philox_engine(key: [u32; 2]) -> Vec<u8> {
    let mut engine = vec![0u8; 48];
    engine[32..36].copy_from_slice(&key[0].to_le_bytes());
    engine[36..40].copy_from_slice(&key[1].to_le_bytes());
    engine
}

/// rocRAND's Philox generator kernel (Debian's gfx90a:xnack- code object)
/// writes the Philox4x32-10 sequence: counter 0, 1, 2, ... under the seed's
/// key, four numbers per counter, across a grid of 4 workgroups of 256.
#[test]
fn rocrand_philox_writes_the_philox4x32_10_sequence() {
    assert_eq!(
        philox4x32_10([0; 4], [0; 2]),
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        "Random123's known answer"
    );
    let kernel = "_ZN12rocrand_host6detailL15generate_kernelIj20uniform_distributionIjEEEvNS0_27philox4x32_10_device_engineEPT_mT0_";
    let mut d = rocrand_device(kernel);
    let key = [0x1234_5678u32, 0x9abc_def0];
    let engine = philox_engine(key);
    let n = 5000usize;
    let data = d.allocate("data", &vec![0; n * 4]);
    d.launch(kernel, Launch::linear(4, 256), &[engine, pointer(data), u64_argument(n as u64), vec![0]]).unwrap();
    let generated = read_u32(&d, data, n);
    let expected: Vec<u32> = (0..n.div_ceil(4) as u32).flat_map(|c| philox4x32_10([c, 0, 0, 0], key)).take(n).collect();
    assert_eq!(generated, expected);
}

/// One step of XORWOW's xorshift part (Marsaglia 2003): 160 bits.
fn xorshift(x: [u32; 5]) -> [u32; 5] {
    let t = x[0] ^ (x[0] >> 2);
    [x[1], x[2], x[3], x[4], (x[4] ^ (x[4] << 4)) ^ (t ^ (t << 1))]
}

/// A linear map of the 160-bit xorshift state over GF(2): column k is the
/// image of bit k. Powers by squaring give jumps of 2^67 steps, which
/// rocRAND takes from precomputed tables in its code object instead.
#[derive(Clone)]
struct Gf2Map(Vec<[u32; 5]>);

impl Gf2Map {
    fn step() -> Self {
        Gf2Map((0..160).map(|k| xorshift(unit(k))).collect())
    }

    fn apply(&self, x: [u32; 5]) -> [u32; 5] {
        let mut image = [0u32; 5];
        for (k, column) in self.0.iter().enumerate() {
            if x[k / 32] >> (k % 32) & 1 == 1 {
                for (word, c) in image.iter_mut().zip(column) {
                    *word ^= c;
                }
            }
        }
        image
    }

    fn squared(&self) -> Self {
        Gf2Map(self.0.iter().map(|column| self.apply(*column)).collect())
    }
}

fn unit(k: usize) -> [u32; 5] {
    let mut x = [0; 5];
    x[k / 32] = 1 << (k % 32);
    x
}

/// An XORWOW engine as rocRAND lays it out on the device (24 bytes, no
/// Box-Muller cache): the Weyl counter d, then the xorshift state.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Xorwow {
    d: u32,
    x: [u32; 5],
}

impl Xorwow {
    /// rocRAND's seeding: the seed scrambled into cuRAND's initial state
    /// (constants as the code object's init kernel has them).
    fn seeded(seed: u64) -> Self {
        let t0 = 1_228_688_033u32.wrapping_mul(seed as u32 ^ 0x2c7f_967f);
        let t1 = 2_073_658_381u32.wrapping_mul((seed >> 32) as u32 ^ 0xa036_97cb);
        Xorwow {
            d: 6_615_241u32.wrapping_add(t1).wrapping_add(t0),
            x: [
                123_456_789u32.wrapping_add(t0),
                362_436_069 ^ t0,
                521_288_629u32.wrapping_add(t1),
                88_675_123 ^ t1,
                5_783_321u32.wrapping_add(t0),
            ],
        }
    }

    fn next(&mut self) -> u32 {
        self.x = xorshift(self.x);
        self.d = self.d.wrapping_add(362_437);
        self.d.wrapping_add(self.x[4])
    }

    fn from_bytes(raw: &[u8]) -> Self {
        let word = |k: usize| u32::from_le_bytes(raw[4 * k..4 * k + 4].try_into().unwrap());
        Xorwow { d: word(0), x: [word(1), word(2), word(3), word(4), word(5)] }
    }
}

const XORWOW_INIT: &str = "_ZN12rocrand_host6detailL19init_engines_kernelEPN14rocrand_device13xorwow_engineEjyy";
const ENGINE_BYTES: usize = 24;

/// rocRAND's XORWOW: the init kernel puts engine i at subsequence i
/// (i * 2^67 steps, through the jump matrices in the code object's
/// read-only data, applied in a loop of 160 x 5 bit operations) and skips
/// `offset` numbers, one more for engines below the start engine (where the
/// previous call stopped); the generate kernels then draw from the engines
/// with a grid stride. Checked against the CPU engine jumped by GF(2) matrix
/// squaring and stepped one number at a time.
#[test]
fn rocrand_xorwow_engines_jump_and_generate() {
    let generate_u32 = "_ZN12rocrand_host6detailL15generate_kernelIj20uniform_distributionIjEEEvPN14rocrand_device13xorwow_engineEjPT_mT0_";
    let generate_f32 = "_ZN12rocrand_host6detailL15generate_kernelIf20uniform_distributionIfEEEvPN14rocrand_device13xorwow_engineEjPT_mT0_";
    let mut d = rocrand_device(XORWOW_INIT);
    let (engines, seed, offset, first) = (256usize, 0x0123_4567_89ab_cdefu64, 7u64, 100usize);
    let states = d.allocate("engines", &vec![0; engines * ENGINE_BYTES]);
    let arguments = [pointer(states), (first as u32).to_le_bytes().to_vec(), u64_argument(seed), u64_argument(offset)];
    d.launch(XORWOW_INIT, Launch::linear(2, 128), &arguments).unwrap();

    let jump = (0..67).fold(Gf2Map::step(), |map, _| map.squared());
    let seeded = Xorwow::seeded(seed);
    let mut expected = Vec::new();
    let mut x = seeded.x;
    for i in 0..engines {
        let mut engine = Xorwow { d: seeded.d, x };
        for _ in 0..offset + u64::from(i < first) {
            engine.next();
        }
        expected.push(engine);
        x = jump.apply(x);
    }
    let raw = d.memory.bytes(states, engines * ENGINE_BYTES).unwrap().to_vec();
    let initialised: Vec<Xorwow> = raw.chunks_exact(ENGINE_BYTES).map(Xorwow::from_bytes).collect();
    for (i, (got, want)) in initialised.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "engine {i} after init (subsequence {i}, offset {offset}, first engine {first})");
    }

    // Integers: thread t of the grid draws from engine (t + start) mod 256
    // and writes elements t, t + 256, ... The engines are saved back.
    let (n, start) = (5000usize, 3u32);
    let data = d.allocate("data", &vec![0; n * 4]);
    let arguments = [pointer(states), start.to_le_bytes().to_vec(), pointer(data), u64_argument(n as u64), vec![0]];
    d.launch(generate_u32, Launch::linear(2, 128), &arguments).unwrap();
    let mut engines_now = expected.clone();
    let mut want = vec![0u32; n];
    for t in 0..engines {
        let engine = &mut engines_now[(t + start as usize) % engines];
        for index in (t..n).step_by(engines) {
            want[index] = engine.next();
        }
    }
    assert_eq!(read_u32(&d, data, n), want, "generate_kernel<unsigned int>");
    let raw = d.memory.bytes(states, engines * ENGINE_BYTES).unwrap().to_vec();
    let saved: Vec<Xorwow> = raw.chunks_exact(ENGINE_BYTES).map(Xorwow::from_bytes).collect();
    assert_eq!(saved, engines_now, "engines saved after generating");

    // Floats from the same engines: u * 2^-32 + 2^-32 with one rounding, in (0, 1].
    let mut d2 = rocrand_device(generate_f32);
    let states2 = d2.allocate("engines", &raw);
    let data = d2.allocate("data", &vec![0; n * 4]);
    let arguments = [pointer(states2), 0u32.to_le_bytes().to_vec(), pointer(data), u64_argument(n as u64), vec![0]];
    d2.launch(generate_f32, Launch::linear(2, 128), &arguments).unwrap();
    let scale = 2f32.powi(-32);
    let mut want = vec![0f32; n];
    for (t, engine) in engines_now.iter_mut().enumerate() {
        for index in (t..n).step_by(engines) {
            want[index] = (engine.next() as f32).mul_add(scale, scale);
        }
    }
    let got = read_f32(&d2, data, n);
    assert!(got.iter().all(|v| *v > 0.0 && *v <= 1.0), "uniform floats in (0, 1]");
    assert_eq!(got, want, "generate_kernel<float>");
}

/// rocRAND's XORWOW normal floats: Box-Muller on pairs of numbers (logf
/// through v_log_f32, __sincosf through v_sin/v_cos_f32, sqrt), two outputs
/// per pair, mean + stddev * (sin, cos). The hardware's transcendental
/// instructions are approximations, so the comparison allows 5e-6 (the
/// emulator lands within 1.2e-6).
#[test]
fn rocrand_xorwow_normal_floats_follow_box_muller() {
    let kernel = "_ZN12rocrand_host6detailL15generate_kernelIf19normal_distributionIfEEEvPN14rocrand_device13xorwow_engineEjPT_mT0_";
    let mut d = rocrand_device(kernel);
    let engines = 256usize;
    let mut states: Vec<Xorwow> = (0..engines as u64).map(|i| Xorwow::seeded(0x5eed + i * 0x9e37_79b9)).collect();
    let raw: Vec<u8> = states.iter().flat_map(|e| std::iter::once(e.d).chain(e.x)).flat_map(u32::to_le_bytes).collect();
    let pstates = d.allocate("engines", &raw);
    let (n, mean, stddev) = (4000usize, 1.5f32, 2.0f32);
    let data = d.allocate("data", &vec![0; n * 4]);
    let distribution = [mean.to_le_bytes(), stddev.to_le_bytes()].concat();
    let arguments =
        [pointer(pstates), 0u32.to_le_bytes().to_vec(), pointer(data), u64_argument(n as u64), distribution];
    d.launch(kernel, Launch::linear(2, 128), &arguments).unwrap();

    let scale = 2f32.powi(-32);
    let scale_2pi = 1.462_918_1e-9f32; // 2^-32 * 2 pi, as rocRAND rounds it
    let mut want = vec![0f64; n];
    for (t, engine) in states.iter_mut().enumerate() {
        for pair in (t..n / 2).step_by(engines) {
            let u = (engine.next() as f32).mul_add(scale, scale);
            let v = (engine.next() as f32).mul_add(scale_2pi, scale_2pi);
            let s = (-2.0 * f64::from(u).ln()).sqrt();
            want[2 * pair] = f64::from(mean) + f64::from(stddev) * f64::from(v).sin() * s;
            want[2 * pair + 1] = f64::from(mean) + f64::from(stddev) * f64::from(v).cos() * s;
        }
    }
    let got = read_f32(&d, data, n);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((f64::from(*g) - w).abs() <= 5e-6 * (1.0 + w.abs()), "normal float {k}: {g} vs {w}");
    }
    let sample_mean = got.iter().map(|v| f64::from(*v)).sum::<f64>() / n as f64;
    assert!((sample_mean - 1.5).abs() < 0.1, "sample mean {sample_mean}");
}

/// rocRAND's Philox half-precision uniform kernel: each 32-bit number gives
/// two halves (low then high 16 bits), each (u + 1) * 2^-16 rounded to
/// f16. It reads the halves with SDWA word selects (`v_cvt_f32_u32_sdwa
/// src0_sel:WORD_1`), computes with packed f32 FMAs and packs with
/// `v_pack_b32_f16`; the last, partial vector through `v_fma_mixlo_f16`.
#[test]
fn rocrand_philox_half_uniform_reads_words_through_sdwa() {
    let kernel = "_ZN12rocrand_host6detailL15generate_kernelI6__half20uniform_distributionIS2_EEEvNS0_27philox4x32_10_device_engineEPT_mT0_";
    let mut d = rocrand_device(kernel);
    let key = [0x0bad_5eedu32, 0x1357_9bdf];
    let engine = philox_engine(key);
    // Not a multiple of the kernel's 8 halves per vector: a tail.
    let n = 5003usize;
    let data = d.allocate("data", &vec![0; n * 2]);
    d.launch(kernel, Launch::linear(4, 256), &[engine, pointer(data), u64_argument(n as u64), vec![0]]).unwrap();
    let raw = d.memory.bytes(data, n * 2).unwrap();
    let generated: Vec<u16> = raw.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    let scale = 2f32.powi(-16);
    let expected: Vec<u16> = (0..n.div_ceil(8) as u32)
        .flat_map(|c| philox4x32_10([c, 0, 0, 0], key))
        .flat_map(|v| [v & 0xffff, v >> 16])
        .map(|h| half::f16::from_f32((h as f32).mul_add(scale, scale)).to_bits())
        .take(n)
        .collect();
    assert_eq!(generated, expected);
}

const MRG_M1: u64 = 4_294_967_087;
const MRG_M2: u64 = 4_294_944_443;

/// A 3 x 3 matrix over the integers modulo `m`.
type ModMatrix = [[u64; 3]; 3];

fn mod_matrix_product(a: &ModMatrix, b: &ModMatrix, m: u64) -> ModMatrix {
    let mut c = [[0u64; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            c[i][j] =
                (0..3).map(|k| u128::from(a[i][k]) * u128::from(b[k][j]) % u128::from(m)).sum::<u128>() as u64 % m;
        }
    }
    c
}

fn mod_matrix_apply(a: &ModMatrix, s: [u64; 3], m: u64) -> [u64; 3] {
    [0, 1, 2].map(|i| ((0..3).map(|k| u128::from(a[i][k]) * u128::from(s[k])).sum::<u128>() % u128::from(m)) as u64)
}

/// MRG32k3a (L'Ecuyer 1999) as rocRAND lays it out: g1[3], g2[3].
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mrg32k3a {
    g1: [u64; 3],
    g2: [u64; 3],
}

impl Mrg32k3a {
    /// The one-step transition of each component.
    const A1: ModMatrix = [[0, 1, 0], [0, 0, 1], [MRG_M1 - 810_728, 1_403_580, 0]];
    const A2: ModMatrix = [[0, 1, 0], [0, 0, 1], [MRG_M2 - 1_370_589, 0, 527_612]];

    /// rocRAND's seeding, for seeds below 2^32 (where its mod_mul is a
    /// plain modular product).
    fn seeded(seed: u64) -> Self {
        let x = u64::from(seed as u32 ^ 0x5555_5555);
        let y = u64::from((seed >> 32) as u32 ^ 0xaaaa_aaaa);
        let m = |a: u64, m: u64| (u128::from(a) * u128::from(seed) % u128::from(m)) as u64;
        Mrg32k3a { g1: [m(x, MRG_M1), m(y, MRG_M1), m(x, MRG_M1)], g2: [m(y, MRG_M2), m(x, MRG_M2), m(y, MRG_M2)] }
    }

    /// In [1, m1].
    fn next(&mut self) -> u64 {
        self.g1 = mod_matrix_apply(&Self::A1, self.g1, MRG_M1);
        self.g2 = mod_matrix_apply(&Self::A2, self.g2, MRG_M2);
        let (p1, p2) = (self.g1[2], self.g2[2]);
        if p1 > p2 {
            p1 - p2
        } else {
            p1 + MRG_M1 - p2
        }
    }

    fn from_bytes(raw: &[u8]) -> Self {
        let word = |k: usize| u64::from(u32::from_le_bytes(raw[4 * k..4 * k + 4].try_into().unwrap()));
        Mrg32k3a { g1: [word(0), word(1), word(2)], g2: [word(3), word(4), word(5)] }
    }
}

/// rocRAND's MRG32k3a: the init kernel puts engine i at subsequence i
/// (2^76 numbers each, through the code object's precomputed matrix powers
/// with 64-bit modular arithmetic) and skips `offset` numbers (one more
/// below the start engine); the integer kernel then scales each number
/// from [1, m1] to 32 bits through a double. Checked against the CPU
/// recurrence and jumps by modular matrix squaring.
#[test]
fn rocrand_mrg32k3a_engines_jump_and_generate() {
    let init = "_ZN12rocrand_host6detailL19init_engines_kernelEPN14rocrand_device15mrg32k3a_engineEjyy";
    let generate = "_ZN12rocrand_host6detailL15generate_kernelIj24mrg_uniform_distributionIjEEEvPN14rocrand_device15mrg32k3a_engineEjPT_mT0_";
    let mut d = rocrand_device(init);
    let (engines, seed, offset, first) = (128usize, 0x9e37_79b9u64, 5u64, 40usize);
    let states = d.allocate("engines", &vec![0; engines * 24]);
    let arguments = [pointer(states), (first as u32).to_le_bytes().to_vec(), u64_argument(seed), u64_argument(offset)];
    d.launch(init, Launch::linear(2, 64), &arguments).unwrap();

    let jump1 = (0..76).fold(Mrg32k3a::A1, |a, _| mod_matrix_product(&a, &a, MRG_M1));
    let jump2 = (0..76).fold(Mrg32k3a::A2, |a, _| mod_matrix_product(&a, &a, MRG_M2));
    let mut state = Mrg32k3a::seeded(seed);
    let mut expected = Vec::new();
    for i in 0..engines {
        let mut engine = state;
        for _ in 0..offset + u64::from(i < first) {
            engine.next();
        }
        expected.push(engine);
        state =
            Mrg32k3a { g1: mod_matrix_apply(&jump1, state.g1, MRG_M1), g2: mod_matrix_apply(&jump2, state.g2, MRG_M2) };
    }
    let raw = d.memory.bytes(states, engines * 24).unwrap().to_vec();
    let got: Vec<Mrg32k3a> = raw.chunks_exact(24).map(Mrg32k3a::from_bytes).collect();
    for (i, (g, w)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, w, "engine {i} after init (subsequence {i}, offset {offset}, first engine {first})");
    }

    let n = 3000usize;
    let data = d.allocate("data", &vec![0; n * 4]);
    let arguments = [pointer(states), 0u32.to_le_bytes().to_vec(), pointer(data), u64_argument(n as u64), vec![0]];
    d.launch(generate, Launch::linear(2, 64), &arguments).unwrap();
    let mut want = vec![0u32; n];
    for (t, engine) in expected.iter_mut().enumerate() {
        for index in (t..n).step_by(engines) {
            want[index] = ((engine.next() - 1) as f64 * 1.000_000_048_661_607) as u32;
        }
    }
    assert_eq!(read_u32(&d, data, n), want, "generate_kernel<unsigned int, mrg_uniform_distribution>");
}
