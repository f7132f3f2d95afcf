//! A gzip'd `newc` cpio archive, the format the kernel unpacks as its initramfs.
//!
//! Written here rather than with `cpio`, so the `/dev/console` node needs no `mknod` (and so no root) on the
//! host, and the archive is byte-for-byte reproducible (fixed inode numbers, owners and times).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;
const S_IFLNK: u32 = 0o120000;

/// An archive being built in memory.
#[derive(Debug, Default)]
pub struct Archive {
    buf: Vec<u8>,
    next_ino: u32,
}

impl Archive {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.next_ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let fields = [
            self.next_ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.buf.len() & 3 != 0 {
            self.buf.push(0);
        }
    }

    /// A directory (mode 0755).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, S_IFDIR | 0o755, (0, 0), &[]);
    }

    /// A regular file with `mode` permission bits.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, S_IFREG | mode, (0, 0), data);
    }

    /// A character device node.
    pub fn char_dev(&mut self, name: &str, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | 0o600, (major, minor), &[]);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes());
    }

    /// Ends the archive (the `TRAILER!!!` entry) and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.next_ino = u32::MAX - 1;
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.buf
    }

    /// Ends the archive and writes it gzip'd (by the host's `gzip`) to `path`.
    pub fn write_gz(self, path: &Path) -> Result<(), String> {
        let bytes = self.finish();
        let out =
            std::fs::File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
        let mut child = Command::new("gzip")
            .args(["-6", "-n", "-c"])
            .stdin(Stdio::piped())
            .stdout(out)
            .spawn()
            .map_err(|e| format!("cannot run gzip: {e}"))?;
        let write = child
            .stdin
            .take()
            .ok_or("gzip has no stdin")?
            .write_all(&bytes);
        let status = child.wait().map_err(|e| format!("gzip: {e}"))?;
        write.map_err(|e| format!("write to gzip: {e}"))?;
        if !status.success() {
            return Err(format!("gzip failed ({status})"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut a = Archive::default();
        a.file("init", 0o755, b"abc");
        let bytes = a.finish();
        // Header: magic + 13 fields of 8 hex digits.
        assert_eq!(&bytes[..6], b"070701");
        let field = |i: usize| {
            let s = std::str::from_utf8(&bytes[6 + 8 * i..14 + 8 * i]).unwrap();
            u32::from_str_radix(s, 16).unwrap()
        };
        assert_eq!(field(1), S_IFREG | 0o755);
        assert_eq!(field(6), 3); // filesize
        assert_eq!(field(11), 5); // "init\0"
                                  // 110 + 5 = 115, padded to 116; then "abc" padded to 4.
        assert_eq!(&bytes[110..115], b"init\0");
        assert_eq!(&bytes[116..119], b"abc");
        assert_eq!(&bytes[120..126], b"070701");
        assert!(bytes.len() % 4 == 0);
        assert!(bytes.windows(10).any(|w| w == b"TRAILER!!!"));
    }
}
