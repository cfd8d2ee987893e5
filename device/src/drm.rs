//! The GPU as the DRM subsystem shows it in sysfs, where ROCm SMI (and the
//! clients that ask it which board a HIP device is: hipBLASLt's benchmark)
//! finds AMD GPUs: `/sys/class/drm/card0`, a link whose target names the
//! PCI slot, and the PCI ids under its `device/`. ROCm SMI matches the slot
//! with a KFD node's `location_id` and `domain`. Device memory in use is
//! the process's own device's (each process emulates its GPU); what it
//! reads that is not here (sensors, activity, power) it reports as not
//! supported, which is true of an emulated board.

use crate::files::{LiveFile, VirtualFiles};
use crate::model::Model;
use crate::topology::{LOCATION_ID, RENDER_MINOR};

/// AMD's PCI vendor id.
const VENDOR_AMD: u32 = 0x1002;

/// The PCI bridge the emulated board sits behind, in sysfs.
pub const PCI_DEVICES: &str = "/sys/devices/pci0000:00/0000:00:01.1";

/// The PCI slot (`domain:bus:device.function`) of KFD's `location_id`
/// (`bus << 8 | device << 3 | function`) in domain 0.
pub fn pci_slot() -> String {
    let (bus, device, function) = (LOCATION_ID >> 8, (LOCATION_ID >> 3) & 0x1f, LOCATION_ID & 7);
    format!("0000:{bus:02x}:{device:02x}.{function:x}")
}

/// Adds the card, its render node and their PCI device's files.
pub fn add_files(files: &mut VirtualFiles, model: &Model) {
    let slot = pci_slot();
    let pci = format!("../..{}/{slot}/drm", PCI_DEVICES.trim_start_matches("/sys"));
    let card = "/sys/class/drm/card0";
    let render = format!("/sys/class/drm/renderD{RENDER_MINOR}");
    let hex = |value: u32| format!("0x{value:04x}\n");
    for node in [card, render.as_str()] {
        let device = format!("{node}/device");
        files.add_file(&format!("{device}/vendor"), hex(VENDOR_AMD));
        files.add_file(&format!("{device}/device"), hex(model.device_id));
        files.add_file(&format!("{device}/subsystem_vendor"), hex(VENDOR_AMD));
        files.add_file(&format!("{device}/subsystem_device"), hex(model.device_id));
        files.add_file(&format!("{device}/revision"), format!("0x{:02x}\n", model.pci_revision));
        files.add_file(
            &format!("{device}/uevent"),
            format!(
                "DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_ID={VENDOR_AMD:04X}:{id:04X}\nPCI_SUBSYS_ID={VENDOR_AMD:04X}:{id:04X}\n\
                 PCI_SLOT_NAME={slot}\nMODALIAS=pci:v00001002d0000{id:04X}sv00001002sd0000{id:04X}bc03sc80i00\n",
                id = model.device_id
            ),
        );
        // A hardware monitor with no sensor: ROCm SMI 5.x asserts there is
        // one, and reports each sensor it lacks as not supported (an
        // emulated board has no temperature, power or fan).
        files.add_file(&format!("{device}/hwmon/hwmon0/name"), "amdgpu\n");
        // (ROCm SMI 5.x throws on a monitor without the GPU voltage's label.)
        files.add_file(&format!("{device}/hwmon/hwmon0/in0_label"), "vddgfx\n");
        // ROCm SMI 5.x counts a card only where this file exists.
        files.add_file(&format!("{device}/vbios_version"), "gpuinstr-emulated\n");
        files.add_file(&format!("{device}/mem_info_vram_total"), format!("{}\n", model.memory_bytes));
        files.add_live(&format!("{device}/mem_info_vram_used"), LiveFile::DeviceMemoryInUse);
        // The board's clock levels: one, at the model's nominal clocks.
        files.add_file(&format!("{device}/pp_dpm_sclk"), format!("0: {}Mhz *\n", model.max_engine_clock_mhz));
        files.add_file(&format!("{device}/pp_dpm_mclk"), format!("0: {}Mhz *\n", model.memory_clock_mhz));
        files.add_directory(&format!("{device}/drm/card0"));
        files.add_directory(&format!("{device}/drm/renderD{RENDER_MINOR}"));
    }
    // Where the links lead: the PCI device's `drm` directory, which amd-smi
    // lists (as `card0/../`) for the card's render node.
    let physical = format!("{PCI_DEVICES}/{slot}/drm");
    files.add_directory(&format!("{physical}/card0"));
    files.add_directory(&format!("{physical}/renderD{RENDER_MINOR}"));
    files.add_directory(&physical);
    files.add_link(card, &format!("{pci}/card0"));
    files.add_link(&render, &format!("{pci}/renderD{RENDER_MINOR}"));
    files.add_directory("/sys/class/drm");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Entry;
    use crate::model::{Model, Target};

    /// What ROCm SMI's discovery reads: the card among `/sys/class/drm`'s
    /// entries, AMD's vendor id, and a link whose last slot-shaped part
    /// (ROCm SMI reads it from the end) has `bus << 8 | device << 3 |
    /// function` equal to KFD's `location_id`.
    #[test]
    fn rocm_smi_finds_the_card_at_the_kfd_nodes_slot() {
        let mut files = VirtualFiles::default();
        add_files(&mut files, &Model::new(Target::parse("gfx90a").unwrap()));
        let Some(Entry::Directory(names)) = files.get("/sys/class/drm") else { panic!("no /sys/class/drm") };
        assert!(names.iter().any(|n| n == "card0"), "{names:?}");
        assert_eq!(files.get("/sys/class/drm/card0/device/vendor"), Some(&Entry::File(b"0x1002\n".to_vec())));
        assert_eq!(files.get("/sys/class/drm/card0/device/device"), Some(&Entry::File(b"0x740f\n".to_vec())));
        let link = files.link("/sys/class/drm/card0").unwrap();
        let slot = link.split('/').rev().find(|part| part.len() == 12 && part.as_bytes()[4] == b':').unwrap();
        let (domain_bus, device_function) = slot.rsplit_once(':').unwrap();
        let bus = u32::from_str_radix(&domain_bus[5..], 16).unwrap();
        let (device, function) = device_function.split_once('.').unwrap();
        let bdf = bus << 8 | u32::from_str_radix(device, 16).unwrap() << 3 | function.parse::<u32>().unwrap();
        assert_eq!(bdf, LOCATION_ID);
        assert_eq!(files.link("/sys/class/drm/card0/device/vendor"), None, "a file, not a link");
        assert!(matches!(files.get("/sys/class/drm/card0/device/drm/renderD128"), Some(Entry::Directory(_))));
    }

    /// amd-smi finds the card's render node by listing `card0/../`: through
    /// the link, the PCI device's `drm` directory, with both nodes in it.
    #[test]
    fn the_cards_parent_through_its_link_lists_the_render_node() {
        let mut files = VirtualFiles::default();
        add_files(&mut files, &Model::new(Target::parse("gfx90a").unwrap()));
        let expected = Entry::Directory(vec!["card0".into(), format!("renderD{RENDER_MINOR}")]);
        assert_eq!(files.get("/sys/class/drm/card0/../"), Some(&expected));
        assert_eq!(files.get(&format!("{PCI_DEVICES}/{}/drm", pci_slot())), Some(&expected));
        // Not a link: `..` is the parent.
        assert!(
            matches!(files.get("/sys/class/drm/card0/device/.."), Some(Entry::Directory(n)) if n.contains(&"device".to_string()))
        );
        assert!(
            matches!(files.get("/sys/class/drm/card0/device/../../"), Some(Entry::Directory(n)) if n.contains(&"card0".to_string()))
        );
    }
}
