//! The GNU build id of an ELF file (`NT_GNU_BUILD_ID` in a `PT_NOTE` segment), read from the file
//! when the kernel's MMAP2 record does not carry it (before Linux 5.12, or a mapping that predates
//! the capture).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

const PT_NOTE: u32 = 4;
const NT_GNU_BUILD_ID: u32 = 3;
/// Program headers and notes larger than this are not ELF files we read.
const MAX_TABLE: u64 = 1 << 20;

/// The build id of the ELF file at `path`; `None` when it is not an ELF file or has none.
pub fn read(path: &Path) -> Option<Vec<u8>> {
    let mut f = File::open(path).ok()?;
    let mut ident = [0u8; 64];
    f.read_exact(&mut ident).ok()?;
    parse(&ident, |off, len| {
        if len > MAX_TABLE {
            return None;
        }
        f.seek(SeekFrom::Start(off)).ok()?;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        f.read_exact(&mut buf).ok()?;
        Some(buf)
    })
}

/// Reads the header `head` (the file's first 64 bytes) and, through `read(offset, len)`, the
/// program headers and note segments.
pub(crate) fn parse(
    head: &[u8],
    mut read: impl FnMut(u64, u64) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    if head.get(..4)? != b"\x7fELF" {
        return None;
    }
    let is64 = match head.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let le = match head.get(5)? {
        1 => true,
        2 => false,
        _ => return None,
    };
    let field = Field { le };
    let (phoff, phentsize, phnum) = if is64 {
        (
            field.u64(head, 32)?,
            field.u16(head, 54)?,
            field.u16(head, 56)?,
        )
    } else {
        (
            u64::from(field.u32(head, 28)?),
            field.u16(head, 42)?,
            field.u16(head, 44)?,
        )
    };
    let table = read(phoff, u64::from(phentsize) * u64::from(phnum))?;
    for i in 0..usize::from(phnum) {
        let ph = table.get(i * usize::from(phentsize)..(i + 1) * usize::from(phentsize))?;
        if field.u32(ph, 0)? != PT_NOTE {
            continue;
        }
        let (offset, size) = if is64 {
            (field.u64(ph, 8)?, field.u64(ph, 32)?)
        } else {
            (u64::from(field.u32(ph, 4)?), u64::from(field.u32(ph, 16)?))
        };
        let Some(notes) = read(offset, size) else {
            continue;
        };
        if let Some(id) = find_note(&notes, field) {
            return Some(id);
        }
    }
    None
}

/// The build id among the notes of one segment (4-byte aligned name and descriptor).
fn find_note(mut notes: &[u8], field: Field) -> Option<Vec<u8>> {
    let align = |n: usize| n.checked_add(3).map(|n| n & !3);
    while notes.len() >= 12 {
        let namesz = usize::try_from(field.u32(notes, 0)?).ok()?;
        let descsz = usize::try_from(field.u32(notes, 4)?).ok()?;
        let ty = field.u32(notes, 8)?;
        let name_end = 12usize.checked_add(align(namesz)?)?;
        let desc_end = name_end.checked_add(align(descsz)?)?;
        let name = notes.get(12..12 + namesz)?;
        if ty == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return notes.get(name_end..name_end + descsz).map(<[u8]>::to_vec);
        }
        notes = notes.get(desc_end..)?;
    }
    None
}

#[derive(Clone, Copy)]
struct Field {
    le: bool,
}

impl Field {
    fn bytes<const N: usize>(self, b: &[u8], at: usize) -> Option<[u8; N]> {
        b.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let v = self.bytes(b, at)?;
        Some(if self.le {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        })
    }
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let v = self.bytes(b, at)?;
        Some(if self.le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        })
    }
    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let v = self.bytes(b, at)?;
        Some(if self.le {
            u64::from_le_bytes(v)
        } else {
            u64::from_be_bytes(v)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_has_the_build_id_readelf_shows() {
        // Rust's linker passes --build-id on Linux by default; where it did not, there is nothing to compare.
        let exe = std::env::current_exe().unwrap();
        let ours = read(&exe);
        let Ok(out) = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&exe)
            .output()
        else {
            println!("skipped: readelf is not installed");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .map(str::to_owned);
        let hex = ours.map(|id| id.iter().map(|b| format!("{b:02x}")).collect::<String>());
        assert_eq!(hex, theirs);
    }

    #[test]
    fn truncated_and_foreign_files_have_none() {
        assert_eq!(parse(b"\x7fELF", |_, _| None), None);
        assert_eq!(parse(&[0u8; 64], |_, _| None), None);
        // A 64-bit header whose program headers claim to lie past the end.
        let mut head = [0u8; 64];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[32] = 0xff;
        head[54] = 56;
        head[56] = 3;
        assert_eq!(parse(&head, |_, _| None), None);
    }
}
