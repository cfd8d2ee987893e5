//! The files the kernel driver would make visible to the process: the KFD
//! topology in sysfs, the device nodes, and the module list `rocminfo`
//! checks, the DRM card ROCm SMI finds. A front end answers `open`,
//! `fopen`, `opendir`, `stat` and `readlink` for these paths from here and
//! passes every other path through.

use std::collections::{BTreeMap, BTreeSet};

/// What a virtual path is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A read-only file with these contents.
    File(Vec<u8>),
    /// A directory with these entries (names, in order).
    Directory(Vec<String>),
    /// A character device the front end serves (ioctl, mmap).
    Device(DeviceNode),
    /// A file whose contents the front end computes when it is opened.
    Live(LiveFile),
}

/// What a live file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveFile {
    /// Device memory allocated, in bytes (`mem_info_vram_used`).
    DeviceMemoryInUse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceNode {
    /// `/dev/kfd`.
    Kfd,
    /// `/dev/dri/renderD<minor>`.
    Render { minor: u32 },
}

/// Every virtual path, absolute, without a trailing slash. Directories made
/// only to hold a virtual entry (`/sys`, `/dev`, `/proc/`) stay the host's:
/// a path is virtual when it was added, or lies under an added directory.
#[derive(Clone, Debug, Default)]
pub struct VirtualFiles {
    entries: BTreeMap<String, Entry>,
    added: BTreeSet<String>,
    /// Paths that are symbolic links in sysfs (`/sys/class/drm/card0`),
    /// to their targets; what lies under them is in `entries` by the
    /// link's path, as a process reaches it.
    links: BTreeMap<String, String>,
}

/// Links followed in resolving one path, as Linux's limit (`ELOOP`).
const MAX_LINKS_FOLLOWED: u32 = 40;

/// Where sysfs shows the KFD topology (the second is a symlink to the first
/// on a real system; ROCr releases read either).
pub const TOPOLOGY_ROOTS: [&str; 2] = ["/sys/devices/virtual/kfd/kfd/topology", "/sys/class/kfd/kfd/topology"];

impl VirtualFiles {
    /// Adds a file and every directory above it up to an existing one or `/`.
    pub fn add_file(&mut self, path: &str, contents: impl Into<Vec<u8>>) {
        self.add(path, Entry::File(contents.into()));
    }

    pub fn add_live(&mut self, path: &str, live: LiveFile) {
        self.add(path, Entry::Live(live));
    }

    pub fn add_device(&mut self, path: &str, node: DeviceNode) {
        self.add(path, Entry::Device(node));
    }

    /// A directory that is wholly virtual (the topology), or an empty one (a
    /// node without caches).
    pub fn add_directory(&mut self, path: &str) {
        let path = normalise(path);
        if self.entries.contains_key(&path) {
            self.added.insert(path);
        } else {
            self.add(&path, Entry::Directory(Vec::new()));
        }
    }

    fn add(&mut self, path: &str, entry: Entry) {
        let path = normalise(path);
        let mut child = path.clone();
        while let Some((parent, name)) = child.rsplit_once('/') {
            if parent.is_empty() {
                break;
            }
            match self.entries.entry(parent.to_string()).or_insert_with(|| Entry::Directory(Vec::new())) {
                Entry::Directory(names) => {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                }
                _ => panic!("virtual path {parent} is a file and a directory"),
            }
            child = parent.to_string();
        }
        self.added.insert(path.clone());
        self.entries.insert(path, entry);
    }

    /// The entry at `path` (`/a/b/`, `/a//b` and `/a/./b` alike; `..` after
    /// a link goes to its target's parent, as the kernel resolves it); `None`
    /// for paths the front end passes to the real file system.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        if !path.starts_with('/') {
            return None;
        }
        let path = self.resolve(path);
        let entry = self.entries.get(&path)?;
        let mut ancestor = path.as_str();
        loop {
            if self.added.contains(ancestor) {
                return Some(entry);
            }
            match ancestor.rsplit_once('/') {
                Some((parent, _)) if !parent.is_empty() => ancestor = parent,
                _ => return None,
            }
        }
    }

    /// Makes the virtual directory `path` a symbolic link to `target` (what
    /// `readlink` gives; `stat` and paths under it see the directory).
    pub fn add_link(&mut self, path: &str, target: &str) {
        self.add_directory(path);
        self.links.insert(normalise(path), target.to_string());
    }

    /// The target of the link at `path`, if it is one.
    pub fn link(&self, path: &str) -> Option<&str> {
        self.get(path)?;
        self.links.get(&normalise(path)).map(String::as_str)
    }

    /// `path` normalised, its `..` components taken: after a link, to the
    /// parent of the link's target (amd-smi lists `/sys/class/drm/card0/../`,
    /// the PCI device's `drm` directory, for the card's render node).
    fn resolve(&self, path: &str) -> String {
        self.resolve_within(path, MAX_LINKS_FOLLOWED)
    }

    fn resolve_within(&self, path: &str, links_left: u32) -> String {
        let mut parts: Vec<String> = Vec::new();
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if part != ".." {
                parts.push(part.to_string());
                continue;
            }
            let here = format!("/{}", parts.join("/"));
            if let (Some(target), Some(links_left)) = (self.links.get(&here), links_left.checked_sub(1)) {
                let parent = here.rsplit_once('/').map_or("", |(parent, _)| parent);
                let absolute = if target.starts_with('/') { target.clone() } else { format!("{parent}/{target}") };
                parts = self
                    .resolve_within(&absolute, links_left)
                    .split('/')
                    .filter(|p| !p.is_empty())
                    .map(String::from)
                    .collect();
            }
            parts.pop();
        }
        format!("/{}", parts.join("/"))
    }

    pub fn paths(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(p, e)| (p.as_str(), e))
    }
}

fn normalise(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_list_their_children_once_and_paths_normalise() {
        let mut files = VirtualFiles::default();
        files.add_file("/sys/a/b/one", "1\n");
        files.add_file("/sys/a/b/two", "2\n");
        files.add_directory("/sys/a/c");
        files.add_directory("/sys/a");
        assert_eq!(files.get("/sys/a/b"), Some(&Entry::Directory(vec!["one".into(), "two".into()])));
        assert_eq!(files.get("/sys/a"), Some(&Entry::Directory(vec!["b".into(), "c".into()])));
        assert_eq!(files.get("/sys//a/./b/one/"), Some(&Entry::File(b"1\n".to_vec())));
        assert_eq!(files.get("sys/a"), None);
        // Made only to hold /sys/a: the host's.
        assert_eq!(files.get("/sys"), None);
        files.add_file("/proc/modules", "amdgpu\n");
        assert_eq!(files.get("/proc"), None);
    }
}
