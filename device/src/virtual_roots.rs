//! Where the device's virtual files lie: every path `topology::add_files`
//! adds is at or under one of these. `libgpuinstr_device_preload.so`,
//! which links no LLVM and so no part of this crate, includes this file to
//! know when a process first reaches for the device (and only then loads
//! it); a test here holds the two to each other.

/// Paths at or under which the device's virtual files lie.
pub const VIRTUAL_ROOTS: [&str; 8] = [
    "/dev/kfd",
    "/dev/dri/",
    "/sys/devices/virtual/kfd/",
    "/sys/class/kfd/",
    "/sys/class/drm/",
    // The board's PCI device, where `/sys/class/drm/card0` leads.
    "/sys/devices/pci0000:00/0000:00:01.1/0000:03:00.0/",
    "/sys/module/amdgpu",
    "/proc/modules",
];

/// Whether `path` (absolute, as a program passes it: repeated slashes and
/// `.` components allowed) is at or under one of [`VIRTUAL_ROOTS`].
pub fn under_a_virtual_root(path: &[u8]) -> bool {
    if path.first() != Some(&b'/') {
        return false;
    }
    let mut normal = Vec::with_capacity(path.len());
    for component in path.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".") {
        normal.push(b'/');
        normal.extend_from_slice(component);
    }
    if path.ends_with(b"/") {
        normal.push(b'/');
    }
    VIRTUAL_ROOTS.iter().any(|root| {
        let root = root.as_bytes();
        let bare = root.strip_suffix(b"/").unwrap_or(root);
        normal.starts_with(root) || normal == bare
    })
}
