//! Splits a `.llvmbc` section into the bitcode files it holds. One tool
//! compiled with `-fgpu-rdc` gets one embedded module per translation unit,
//! which the device linker concatenates; LLVM reads only one file per buffer.
//!
//! The split walks the top-level blocks of the LLVM bitstream (each carries
//! its length in 32-bit words), so data inside a module that happens to look
//! like the bitcode magic cannot cut a file in two.

/// The bitcode magic, 'BC' 0xC0DE.
pub const BITCODE_MAGIC: &[u8] = b"BC\xc0\xde";

/// Reads `width` bits, least significant first, advancing `position` (in bits).
fn read_bits(data: &[u8], position: &mut usize, width: usize) -> Result<u64, String> {
    let mut value = 0u64;
    for i in 0..width {
        let bit = *position + i;
        let byte = *data.get(bit / 8).ok_or_else(|| format!("bitcode is truncated at byte {}", bit / 8))?;
        value |= u64::from((byte >> (bit % 8)) & 1) << i;
    }
    *position += width;
    Ok(value)
}

fn read_vbr(data: &[u8], position: &mut usize, width: usize) -> Result<u64, String> {
    let continuation = 1u64 << (width - 1);
    let mut value = 0u64;
    for shift in (0..64).step_by(width - 1) {
        let chunk = read_bits(data, position, width)?;
        value |= (chunk & (continuation - 1)) << shift;
        if chunk & continuation == 0 {
            return Ok(value);
        }
    }
    Err("a variable-width number in the bitcode is too long".into())
}

/// The bitcode files in `data`, in order.
pub fn split(data: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut files = Vec::new();
    let mut start = 0;
    while start < data.len() && data[start..].iter().any(|b| *b != 0) {
        if !data[start..].starts_with(BITCODE_MAGIC) {
            return Err(format!("no bitcode magic at byte {start}"));
        }
        let mut position = (start + BITCODE_MAGIC.len()) * 8;
        loop {
            let byte = position / 8;
            // Top-level blocks end on 32-bit boundaries: the next file, zero
            // padding or the end of the section can only start there.
            if byte >= data.len() || data[byte..].starts_with(BITCODE_MAGIC) || data[byte..].iter().all(|b| *b == 0) {
                break;
            }
            let abbreviation = read_bits(data, &mut position, 2)?;
            if abbreviation != 1 {
                return Err(format!("unexpected top-level bitcode entry {abbreviation} at byte {byte}"));
            }
            let _block_id = read_vbr(data, &mut position, 8)?;
            let _abbreviation_width = read_vbr(data, &mut position, 4)?;
            position = position.div_ceil(32) * 32;
            let words = read_bits(data, &mut position, 32)? as usize;
            position = words
                .checked_mul(32)
                .and_then(|bits| position.checked_add(bits))
                .filter(|end| *end <= data.len() * 8)
                .ok_or_else(|| format!("a bitcode block at byte {byte} runs past the end"))?;
        }
        let end = position / 8;
        files.push(&data[start..end]);
        start = end;
    }
    if files.is_empty() {
        return Err("the section is empty".into());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes bits least significant first.
    struct BitWriter {
        bytes: Vec<u8>,
        bits: usize,
    }

    impl BitWriter {
        fn new() -> Self {
            BitWriter { bytes: BITCODE_MAGIC.to_vec(), bits: 32 }
        }
        fn write(&mut self, value: u64, width: usize) {
            for i in 0..width {
                if self.bits / 8 >= self.bytes.len() {
                    self.bytes.push(0);
                }
                self.bytes[self.bits / 8] |= (((value >> i) & 1) as u8) << (self.bits % 8);
                self.bits += 1;
            }
        }
        fn align(&mut self) {
            while !self.bits.is_multiple_of(32) {
                self.write(0, 1);
            }
        }
        /// A top-level block with `words` words of body (the body here
        /// contains the magic, to show it is not mistaken for a new file).
        fn block(&mut self, id: u64, words: u32) {
            self.write(1, 2);
            self.write(id, 8);
            self.write(3, 4);
            self.align();
            self.write(u64::from(words), 32);
            for _ in 0..words {
                self.write(u64::from(u32::from_le_bytes(*b"BC\xc0\xde")), 32);
            }
        }
    }

    #[test]
    fn splits_concatenated_files() {
        let mut one = BitWriter::new();
        one.block(13, 2);
        one.block(8, 3);
        let mut two = BitWriter::new();
        two.block(8, 1);
        let mut data = one.bytes.clone();
        data.extend(&two.bytes);
        let files = split(&data).unwrap();
        assert_eq!(files, vec![&one.bytes[..], &two.bytes[..]]);
    }

    #[test]
    fn truncated_and_foreign_data_are_errors() {
        let mut one = BitWriter::new();
        one.block(8, 3);
        assert!(split(&one.bytes[..one.bytes.len() - 4]).is_err());
        assert!(split(b"not bitcode").is_err());
        assert!(split(b"").is_err());
    }
}
