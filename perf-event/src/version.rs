//! The Linux version: "Since Linux X.Y" facts and the running kernel's release.

use std::fmt;

/// A Linux version `major.minor`, as used by "Since Linux X.Y" facts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    /// The major number (the `6` of 6.18).
    pub major: u32,
    /// The minor number (the `18` of 6.18).
    pub minor: u32,
}

impl KernelVersion {
    /// Builds a version.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// The running kernel's version and release string (`uname -r`), or `None` when the release
    /// string does not start with `major.minor`.
    pub fn running() -> Option<(Self, String)> {
        let uname = rustix::system::uname();
        let release = uname.release().to_string_lossy().into_owned();
        parse_release(&release).map(|v| (v, release))
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

fn parse_release(release: &str) -> Option<KernelVersion> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(KernelVersion { major, minor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases() {
        assert_eq!(
            parse_release("6.18.44-fc-v657"),
            Some(KernelVersion::new(6, 18))
        );
        assert_eq!(parse_release("5.10.0"), Some(KernelVersion::new(5, 10)));
        assert_eq!(parse_release("x"), None);
    }
}
