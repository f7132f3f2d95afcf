//! The unwind tables of a 64-bit little-endian ELF file (x86_64, aarch64): `.eh_frame`,
//! `.eh_frame_hdr` and `.debug_frame` with their addresses, and the `PT_LOAD` segments that turn a
//! mapping's file offset into the file's load bias. Read once per file; only these sections are
//! kept in memory.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

const PT_LOAD: u32 = 1;
const SHF_COMPRESSED: u64 = 0x800;
const ELFCOMPRESS_ZLIB: u32 = 1;
const SHT_NOBITS: u32 = 8;
/// Header tables larger than this are not ELF files we read.
const MAX_TABLE: u64 = 1 << 20;
/// An unwind section larger than this is not read (libxul's `.eh_frame` is ~10 MiB).
const MAX_SECTION: u64 = 256 << 20;

/// A section's address range (as linked) and bytes.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    /// Its addresses in the file's own address space (`sh_addr`).
    pub svma: Range<u64>,
    /// Its bytes (decompressed).
    pub data: Arc<[u8]>,
}

/// What unwinding needs from one ELF file.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnwindSections {
    /// `PT_LOAD` segments: (file offset, virtual address, size in the file, alignment).
    pub loads: Vec<(u64, u64, u64, u64)>,
    pub eh_frame: Option<Section>,
    pub eh_frame_hdr: Option<Section>,
    pub debug_frame: Option<Section>,
    /// `.text` and `.got` addresses (DWARF CFI pointer encodings relative to them).
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
}

impl UnwindSections {
    /// Whether there is anything to unwind with.
    pub fn has_tables(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The load bias of a mapping of this file at `start` from `file_offset`: what is added to
    /// the file's addresses to get the process's.
    pub fn bias(&self, start: u64, file_offset: u64) -> Option<u64> {
        // The segment that the mapping's first byte belongs to: a mapping starts at the page
        // (the segment's alignment) that holds the segment's first byte.
        let &(offset, vaddr, _, _) = self.loads.iter().rev().find(|&&(off, _, size, align)| {
            let first = if align.is_power_of_two() {
                off & !(align - 1)
            } else {
                off
            };
            first <= file_offset && file_offset < off.saturating_add(size.max(1))
        })?;
        // The file offset `o` of the segment is at `vaddr + (o - offset)` in the file's space.
        let svma_of_start = vaddr.wrapping_add(file_offset).wrapping_sub(offset);
        Some(start.wrapping_sub(svma_of_start))
    }
}

/// The unwind sections of the file at `path`; `None` when it is not a 64-bit little-endian ELF
/// file or cannot be read.
pub(crate) fn read(path: &Path) -> Option<UnwindSections> {
    let mut f = File::open(path).ok()?;
    let mut head = [0u8; 64];
    f.read_exact(&mut head).ok()?;
    parse(&head, |off, len, max| {
        if len > max {
            return None;
        }
        f.seek(SeekFrom::Start(off)).ok()?;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        f.read_exact(&mut buf).ok()?;
        Some(buf)
    })
}

/// Parses the header `head` (the first 64 bytes), reading tables and sections through
/// `read(offset, len, max_len)`.
pub(crate) fn parse(
    head: &[u8],
    mut read: impl FnMut(u64, u64, u64) -> Option<Vec<u8>>,
) -> Option<UnwindSections> {
    // 64-bit (class 2), little-endian (data 1).
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let mut out = UnwindSections::default();
    let phoff = u64_at(head, 32)?;
    let phentsize = u64::from(u16_at(head, 54)?);
    let phnum = u64::from(u16_at(head, 56)?);
    let ph = read(phoff, phentsize.checked_mul(phnum)?, MAX_TABLE)?;
    for e in ph.chunks_exact(usize::try_from(phentsize).ok()?.max(56)) {
        if u32_at(e, 0)? == PT_LOAD {
            out.loads.push((
                u64_at(e, 8)?,
                u64_at(e, 16)?,
                u64_at(e, 32)?,
                u64_at(e, 48)?,
            ));
        }
    }
    let shoff = u64_at(head, 40)?;
    let shentsize = u64::from(u16_at(head, 58)?);
    let shnum = u64::from(u16_at(head, 60)?);
    let shstrndx = usize::from(u16_at(head, 62)?);
    if shoff == 0 || shnum == 0 {
        return Some(out);
    }
    let sh = read(shoff, shentsize.checked_mul(shnum)?, MAX_TABLE)?;
    let entries: Vec<&[u8]> = sh
        .chunks_exact(usize::try_from(shentsize).ok()?.max(64))
        .collect();
    let strtab = entries.get(shstrndx)?;
    let names = read(u64_at(strtab, 24)?, u64_at(strtab, 32)?, MAX_TABLE)?;
    for e in &entries {
        let name_at = usize::try_from(u32_at(e, 0)?).ok()?;
        let name = names.get(name_at..).unwrap_or_default();
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        let (ty, flags, addr, offset, size) = (
            u32_at(e, 4)?,
            u64_at(e, 8)?,
            u64_at(e, 16)?,
            u64_at(e, 24)?,
            u64_at(e, 32)?,
        );
        let svma = addr..addr.saturating_add(size);
        let mut section = || -> Option<Section> {
            if ty == SHT_NOBITS {
                return None;
            }
            let bytes = read(offset, size, MAX_SECTION)?;
            let data = if flags & SHF_COMPRESSED != 0 {
                decompress(&bytes)?
            } else {
                bytes
            };
            Some(Section {
                svma: svma.clone(),
                data: data.into(),
            })
        };
        match name {
            b".eh_frame" => out.eh_frame = section(),
            b".eh_frame_hdr" => out.eh_frame_hdr = section(),
            b".debug_frame" => out.debug_frame = section(),
            b".text" => out.text = Some(svma),
            b".got" => out.got = Some(svma),
            _ => {}
        }
    }
    // framehop unwinds with .eh_frame when there is one: .debug_frame is then not kept.
    if out.eh_frame.is_some() {
        out.debug_frame = None;
    }
    Some(out)
}

/// A `SHF_COMPRESSED` section's bytes: an `Elf64_Chdr` (type, reserved, size, alignment), then
/// zlib data.
fn decompress(bytes: &[u8]) -> Option<Vec<u8>> {
    if u32_at(bytes, 0)? != ELFCOMPRESS_ZLIB {
        return None;
    }
    let size = u64_at(bytes, 8)?;
    if size > MAX_SECTION {
        return None;
    }
    let mut out = Vec::with_capacity(usize::try_from(size).ok()?);
    flate2::read::ZlibDecoder::new(bytes.get(24..)?)
        .take(size)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 == size).then_some(out)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_has_eh_frame_where_readelf_says() {
        let exe = std::env::current_exe().unwrap();
        let s = read(&exe).expect("this test binary is a 64-bit little-endian ELF file");
        assert!(s.has_tables());
        let Ok(out) = std::process::Command::new("readelf")
            .args(["-W", "-S"])
            .arg(&exe)
            .output()
        else {
            println!("skipped: readelf is not installed");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.contains(" .eh_frame "))
            .expect("readelf lists .eh_frame");
        // [Nr] Name Type Address Off Size ...
        let cols: Vec<&str> = line.split(']').nth(1).unwrap().split_whitespace().collect();
        let addr = u64::from_str_radix(cols[2], 16).unwrap();
        let size = u64::from_str_radix(cols[4], 16).unwrap();
        let eh = s.eh_frame.unwrap();
        assert_eq!(eh.svma, addr..addr + size);
        assert_eq!(eh.data.len() as u64, size);
    }

    #[test]
    fn load_bias_of_a_mapping() {
        let s = UnwindSections {
            // A PIE: text at file offset 0x1000, linked at 0x1000.
            loads: vec![(0, 0, 0x800, 0x1000), (0x1000, 0x1000, 0x5000, 0x1000)],
            ..UnwindSections::default()
        };
        assert_eq!(s.bias(0x5555_0000_1000, 0x1000), Some(0x5555_0000_0000));
        // A non-PIE executable linked at 0x400000, text segment at offset 0x1000.
        let s = UnwindSections {
            loads: vec![
                (0, 0x40_0000, 0x800, 0x1000),
                (0x1234, 0x40_1234, 0x5000, 0x1000),
            ],
            ..UnwindSections::default()
        };
        // Its text starts mid-page: the mapping starts at the page.
        assert_eq!(s.bias(0x40_1000, 0x1000), Some(0));
        assert_eq!(s.bias(0x40_0000, 0), Some(0));
        assert_eq!(UnwindSections::default().bias(0x1000, 0), None);
    }

    #[test]
    fn truncated_and_foreign_files_have_none() {
        assert!(parse(b"\x7fELF", |_, _, _| None).is_none());
        assert!(parse(&[0u8; 64], |_, _, _| None).is_none());
        let mut head = [0u8; 64];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[32] = 0xff;
        head[54] = 56;
        head[56] = 3;
        assert!(parse(&head, |_, _, _| None).is_none());
        assert!(decompress(&[0u8; 8]).is_none());
    }
}
