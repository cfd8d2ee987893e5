//! Process memory for unit tests: `bytes` from address `base` on; any
//! other address is a fault, as unmapped memory is to the device.

use std::sync::Mutex;

use crate::kfd::{Errno, ProcessMemory};

pub struct TestMemory {
    pub base: u64,
    pub bytes: Mutex<Vec<u8>>,
}

impl TestMemory {
    pub fn new(base: u64, size: usize) -> TestMemory {
        TestMemory { base, bytes: Mutex::new(vec![0; size]) }
    }
}

impl ProcessMemory for TestMemory {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), Errno> {
        let start = address.checked_sub(self.base).ok_or(Errno::FAULT)? as usize;
        let bytes = self.bytes.lock().unwrap();
        out.copy_from_slice(bytes.get(start..start + out.len()).ok_or(Errno::FAULT)?);
        Ok(())
    }
    fn write(&self, address: u64, data: &[u8]) -> Result<(), Errno> {
        let start = address.checked_sub(self.base).ok_or(Errno::FAULT)? as usize;
        let mut bytes = self.bytes.lock().unwrap();
        bytes.get_mut(start..start + data.len()).ok_or(Errno::FAULT)?.copy_from_slice(data);
        Ok(())
    }
}
