//! gpuinstr's emulated GPU as the ROCm user space sees it: the kernel
//! driver's interface (the KFD topology in sysfs, `/dev/kfd` ioctls and
//! mmaps, the render node), the one layer every ROCm release shares. The
//! front end (`device-kfd`, loaded by the `LD_PRELOAD` library of
//! `device-preload` when a process opens the device) answers the
//! process's `open`/`ioctl`/`mmap` calls from here; ROCr, its thunk, its
//! loader and HIP's runtime stay real.
//!
//! Modules: `model` (which GPU) -> `topology` (its sysfs files) ->
//! `files` (every virtual path) -> `kfd` (the ioctls and the state they
//! change).

pub mod command_processor;
pub mod drm;
pub mod files;
pub mod kfd;
pub mod loaded_image;
pub mod model;
pub mod render;
pub mod sizes;
#[cfg(test)]
mod test_memory;
pub mod topology;
pub mod virtual_roots;

pub use files::{DeviceNode, Entry, LiveFile, VirtualFiles};
pub use kfd::{Errno, Kfd, MmapTarget, ProcessMemory};
pub use model::{Model, Target};
pub use topology::Host;

/// Everything the front end serves: the files and the device behind them.
pub struct EmulatedSystem {
    pub files: VirtualFiles,
    pub kfd: Kfd,
}

impl EmulatedSystem {
    /// `device_memory`: the device memory asked for (`GPUINSTR_DEVICE_MEMORY`);
    /// the model reports at most what the host can back. `sramecc`: ECC on
    /// (`GPUINSTR_DEVICE_SRAMECC`, on unless `off`).
    pub fn new(target: Target, host: &Host, device_memory: Option<u64>, sramecc: bool) -> EmulatedSystem {
        let model = Model::new(target).with_sramecc(sramecc).backed_by(host, device_memory);
        let mut files = VirtualFiles::default();
        topology::add_files(&mut files, &model, host);
        EmulatedSystem { files, kfd: Kfd::new(model) }
    }

    /// The contents of a file entry now (`None` for directories and devices).
    pub fn contents(&self, entry: &'static Entry) -> Option<std::borrow::Cow<'static, [u8]>> {
        match entry {
            Entry::File(contents) => Some(std::borrow::Cow::Borrowed(contents)),
            Entry::Live(LiveFile::DeviceMemoryInUse) => {
                let (device, _) = self.kfd.state().memory_in_use();
                Some(std::borrow::Cow::Owned(format!("{device}\n").into_bytes()))
            }
            Entry::Directory(_) | Entry::Device(_) => None,
        }
    }
}
