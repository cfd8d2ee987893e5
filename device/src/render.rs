//! The render node (`/dev/dri/renderD128`): the DRM ioctls libdrm's
//! `amdgpu_device_initialize` makes (the driver's version, the client's
//! authentication, `AMDGPU_INFO` queries for the device's identity), so that
//! libdrm opens the device: the thunk names the GPU from it (its marketing
//! name, from libdrm's `amdgpu.ids`), and newer ROCr releases need it.

use bytemuck::{Pod, Zeroable};

use crate::kfd::{Errno, ProcessMemory};
use crate::model::{Model, Target};
use crate::topology::MEMORY_BUS_BITS;

/// DRM's ioctl type (`'d'`) and the numbers answered.
const DRM_TYPE: u8 = b'd';
const VERSION: u8 = 0x00;
const GET_CLIENT: u8 = 0x05;
/// `DRM_COMMAND_BASE + DRM_AMDGPU_INFO`.
const AMDGPU_INFO: u8 = 0x45;
/// `AMDGPU_INFO_*` queries.
const QUERY_ACCEL_WORKING: u32 = 0x00;
const QUERY_READ_MMR_REG: u32 = 0x15;
const QUERY_DEV_INFO: u32 = 0x16;
/// `AMDGPU_FAMILY_AI` (GFX9 data-centre parts: Vega, Arcturus, Aldebaran).
const FAMILY_AI: u32 = 141;
/// The amdgpu kernel driver's interface version (Linux 6.1).
const DRIVER_VERSION: (i32, i32) = (3, 49);

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct Version {
    major: i32,
    minor: i32,
    patch: i32,
    pad: u32,
    name_length: u64,
    name: u64,
    date_length: u64,
    date: u64,
    description_length: u64,
    description: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct Client {
    index: i32,
    authenticated: i32,
    pid: u64,
    uid: u64,
    magic: u64,
    ioctl_count: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct Info {
    return_pointer: u64,
    return_size: u32,
    query: u32,
    /// The query's parameters (for READ_MMR_REG: offset, count, instance, flags).
    parameters: [u32; 4],
}

fn read<T: Pod>(args: &[u8]) -> Result<T, Errno> {
    args.get(..std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned).ok_or(Errno::INVAL)
}

fn write<T: Pod>(args: &mut [u8], value: &T) {
    let bytes = bytemuck::bytes_of(value);
    args[..bytes.len()].copy_from_slice(bytes);
}

/// Runs one ioctl on the render node.
pub fn ioctl(model: &Model, request: u64, args: &mut [u8], memory: &dyn ProcessMemory) -> Result<(), Errno> {
    let (number, kind, _) = crate::kfd::abi::request_parts(request);
    if kind != DRM_TYPE {
        return Err(Errno::NOTTY);
    }
    match number {
        VERSION => {
            let mut version: Version = read(args)?;
            version.major = DRIVER_VERSION.0;
            version.minor = DRIVER_VERSION.1;
            version.patch = 0;
            // The caller asks for the lengths first, then passes buffers.
            let string = |length: &mut u64, at: u64, text: &str| -> Result<(), Errno> {
                if at != 0 && *length > 0 {
                    let n = text.len().min(*length as usize);
                    memory.write(at, &text.as_bytes()[..n])?;
                }
                *length = text.len() as u64;
                Ok(())
            };
            string(&mut version.name_length, version.name, "amdgpu")?;
            string(&mut version.date_length, version.date, "20150101")?;
            string(&mut version.description_length, version.description, "AMD GPU")?;
            write(args, &version);
            Ok(())
        }
        GET_CLIENT => {
            let mut client: Client = read(args)?;
            if client.index != 0 {
                return Err(Errno::INVAL);
            }
            client.authenticated = 1;
            client.pid = u64::from(std::process::id());
            write(args, &client);
            Ok(())
        }
        AMDGPU_INFO => {
            let info: Info = read(args)?;
            let answer = match info.query {
                QUERY_ACCEL_WORKING => 1u32.to_le_bytes().to_vec(),
                QUERY_DEV_INFO => device_info(model),
                // Registers: the GFX9 address configuration, zero otherwise.
                QUERY_READ_MMR_REG => {
                    let count = info.parameters[1].min(64) as usize;
                    let mut words = vec![0u8; 4 * count];
                    if info.parameters[0] == 0x263e && count > 0 {
                        words[..4].copy_from_slice(&0x2a11_4042u32.to_le_bytes());
                    }
                    words
                }
                _ => return Err(Errno::INVAL),
            };
            let length = answer.len().min(info.return_size as usize);
            memory.write(info.return_pointer, &answer[..length])
        }
        _ => Err(Errno::INVAL),
    }
}

/// `AMDGPU_VRAM_TYPE_*` of each board: HBM (HBM2, HBM2e, HBM3), HBM3E on
/// the MI355X.
fn vram_type(target: Target) -> u32 {
    match target {
        Target::Gfx950 => 13,
        Target::Gfx90a | Target::Gfx908 | Target::Gfx942 => 6,
    }
}

/// `struct drm_amdgpu_info_device`, as far as libdrm and amd-smi read it.
fn device_info(model: &Model) -> Vec<u8> {
    let mut bytes = vec![0u8; 512];
    let mut put32 = |at: usize, value: u32| bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    put32(0, model.device_id);
    put32(4, 1); // chip_rev
    put32(8, 1); // external_rev
    put32(12, model.pci_revision); // pci_rev: names the board in amdgpu.ids
    put32(16, FAMILY_AI);
    put32(20, model.shader_engines);
    put32(24, 1); // shader arrays per engine
    put32(28, (crate::kfd::CLOCK_HZ / 1000) as u32); // gpu_counter_freq, kHz
    put32(48, model.compute_units());
    put32(124, 16); // num_rb_pipes
    put32(128, 1); // num_hw_gfx_contexts
    let mut put64 = |at: usize, value: u64| bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    put64(32, u64::from(model.max_engine_clock_mhz) * 1000); // kHz
    put64(40, u64::from(model.memory_clock_mhz) * 1000);
    put64(144, 0x20_0000); // virtual_address_offset
    put64(152, 1 << 47); // virtual_address_max
    let mut put32 = |at: usize, value: u32| bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    put32(160, 4096); // virtual_address_alignment
    put32(164, 2 << 20); // pte_fragment_size
    put32(168, 4096); // gart_page_size
                      // What amd-smi shows as the board's memory: its type and bus width.
    put32(176, vram_type(model.target));
    put32(180, MEMORY_BUS_BITS);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Writes to a small buffer at 0x1000.
    struct Buffer(RefCell<Vec<u8>>);
    impl ProcessMemory for Buffer {
        fn read(&self, _: u64, _: &mut [u8]) -> Result<(), Errno> {
            Err(Errno::FAULT)
        }
        fn write(&self, address: u64, data: &[u8]) -> Result<(), Errno> {
            let at = address.checked_sub(0x1000).ok_or(Errno::FAULT)? as usize;
            self.0.borrow_mut().get_mut(at..at + data.len()).ok_or(Errno::FAULT)?.copy_from_slice(data);
            Ok(())
        }
    }

    fn request(number: u8, size: usize) -> u64 {
        (3 << 30) | ((size as u64) << 16) | (u64::from(b'd') << 8) | u64::from(number)
    }

    #[test]
    fn libdrm_sees_an_amdgpu_device_that_names_its_board() {
        let model = Model::new(Target::Gfx90a);
        let memory = Buffer(RefCell::new(vec![0; 1024]));
        // DRM_IOCTL_VERSION: lengths first, then the name into a buffer.
        let mut version = Version::default();
        let mut args = bytemuck::bytes_of(&version).to_vec();
        ioctl(&model, request(VERSION, args.len()), &mut args, &memory).unwrap();
        version = bytemuck::pod_read_unaligned(&args);
        assert_eq!((version.major, version.name_length), (3, 6));
        version.name = 0x1000;
        let mut args = bytemuck::bytes_of(&version).to_vec();
        ioctl(&model, request(VERSION, args.len()), &mut args, &memory).unwrap();
        assert_eq!(&memory.0.borrow()[..6], b"amdgpu");
        // AMDGPU_INFO(DEV_INFO): the device id and PCI revision amdgpu.ids knows.
        let info = Info { return_pointer: 0x1000, return_size: 64, query: QUERY_DEV_INFO, parameters: [0; 4] };
        let mut args = bytemuck::bytes_of(&info).to_vec();
        ioctl(&model, request(AMDGPU_INFO, args.len()), &mut args, &memory).unwrap();
        let bytes = memory.0.borrow();
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((word(0), word(12), word(16)), (0x740f, 2, FAMILY_AI));
        assert_eq!(bytes[64..72], [0; 8], "nothing past return_size");
        drop(bytes);
        let unknown = Info { query: 0x7f, ..info };
        // amd-smi's memory type (HBM) and bus width.
        let whole = Info { return_size: 512, ..info };
        let mut args = bytemuck::bytes_of(&whole).to_vec();
        ioctl(&model, request(AMDGPU_INFO, args.len()), &mut args, &memory).unwrap();
        let bytes = memory.0.borrow();
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((word(176), word(180)), (6, 4096));
        drop(bytes);
        let mut args = bytemuck::bytes_of(&unknown).to_vec();
        assert_eq!(ioctl(&model, request(AMDGPU_INFO, args.len()), &mut args, &memory), Err(Errno::INVAL));
        assert_eq!(ioctl(&model, 0x4b01, &mut [0; 8], &memory), Err(Errno::NOTTY), "not DRM");
    }
}
