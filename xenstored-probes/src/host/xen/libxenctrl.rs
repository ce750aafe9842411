//! Which libxenctrl to load. Its soname changes with every Xen release
//! (libxenctrl.so.4.17, .4.20, …) and Xen refuses the domctls of another
//! release's library with EACCES (the domctl interface version is compiled
//! into it), so the library matching the running hypervisor comes first;
//! the newest one installed is the fallback for a hypervisor that does not
//! say its version.

use std::path::Path;

/// Where Debian and other distributions install libxenctrl.
pub const LIBRARY_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// A Xen release, as (major, minor).
pub type Release = (u32, u32);

/// The soname of a release's libxenctrl.
pub fn soname((major, minor): Release) -> String {
    format!("libxenctrl.so.{major}.{minor}")
}

/// The Debian package that ships a release's libxenctrl.
pub fn debian_package((major, minor): Release) -> String {
    format!("libxenmisc{major}.{minor}")
}

/// The release a soname belongs to: `libxenctrl.so.4.20` → (4, 20).
pub fn release_of(soname: &str) -> Option<Release> {
    let (major, minor) = soname.strip_prefix("libxenctrl.so.")?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The running hypervisor's release, from /sys/hypervisor/version (None
/// off Xen or when the kernel lacks XEN_SYS_HYPERVISOR).
pub fn hypervisor_release(sys_hypervisor: &Path) -> Option<Release> {
    let read = |name: &str| {
        std::fs::read_to_string(sys_hypervisor.join("version").join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("major")?, read("minor")?))
}

/// The releases whose libxenctrl is in `dirs`.
pub fn installed(dirs: &[&Path]) -> Vec<Release> {
    let mut found: Vec<Release> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(|entry| release_of(entry.ok()?.file_name().to_str()?))
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// The sonames to try, in order: the hypervisor's release (dlopen finds it
/// wherever the loader looks, even when not in `installed`), then the newest
/// installed one.
pub fn candidates(hypervisor: Option<Release>, installed: &[Release]) -> Vec<String> {
    let mut out: Vec<String> = hypervisor.into_iter().map(soname).collect();
    if let Some(&newest) = installed.iter().max() {
        if Some(newest) != hypervisor {
            out.push(soname(newest));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hypervisors_release_comes_first_then_the_newest_installed() {
        assert_eq!(
            candidates(Some((4, 20)), &[(4, 17), (4, 20)]),
            ["libxenctrl.so.4.20"]
        );
        assert_eq!(
            candidates(Some((4, 20)), &[(4, 17), (4, 19)]),
            ["libxenctrl.so.4.20", "libxenctrl.so.4.19"]
        );
        assert_eq!(candidates(None, &[(4, 9), (4, 17)]), ["libxenctrl.so.4.17"]);
        assert_eq!(candidates(Some((4, 17)), &[]), ["libxenctrl.so.4.17"]);
        assert!(candidates(None, &[]).is_empty());
    }

    #[test]
    fn sonames_parse_and_other_names_do_not() {
        assert_eq!(release_of("libxenctrl.so.4.20"), Some((4, 20)));
        assert_eq!(release_of("libxenctrl.so.4.17"), Some((4, 17)));
        // the full-version file and the development link are not sonames
        assert_eq!(release_of("libxenctrl.so.4.17.0"), None);
        assert_eq!(release_of("libxenctrl.so"), None);
        assert_eq!(release_of("libxenguest.so.4.17"), None);
    }

    #[test]
    fn the_hypervisor_release_is_read_from_sysfs() {
        let dir = std::env::temp_dir().join(format!("xss-sys-hypervisor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("version")).unwrap();
        assert_eq!(hypervisor_release(&dir), None);
        std::fs::write(dir.join("version/major"), "4\n").unwrap();
        std::fs::write(dir.join("version/minor"), "20\n").unwrap();
        assert_eq!(hypervisor_release(&dir), Some((4, 20)));
        std::fs::write(dir.join("version/minor"), "x\n").unwrap();
        assert_eq!(hypervisor_release(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn installed_releases_are_found_sorted_and_once() {
        let dir = std::env::temp_dir().join(format!("xss-libdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in [
            "libxenctrl.so.4.20",
            "libxenctrl.so.4.20.0",
            "libxenctrl.so.4.17",
            "libxenctrl.so",
        ] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        assert_eq!(installed(&[&dir, &dir]), [(4, 17), (4, 20)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
