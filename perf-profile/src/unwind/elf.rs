//! The unwind tables of a 64-bit little-endian ELF file (x86_64, aarch64): `.eh_frame`,
//! `.eh_frame_hdr` and `.debug_frame` with their addresses, and the `PT_LOAD` segments that turn a
//! mapping's file offset into the file's load bias. Read once per file; only these sections are
//! kept in memory.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use crate::elf::{self, Elf, Endian, Source, PT_LOAD};

/// An unwind section larger than this is not read (libxul's `.eh_frame` is ~10 MiB).
const MAX_SECTION: u64 = 256 << 20;

/// A section's address range (as linked) and bytes.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    /// Its addresses in the file's own address space (`sh_addr`).
    pub svma: Range<u64>,
    /// Its bytes (decompressed), as read: not copied into an `Arc<[u8]>`, which would hold two
    /// copies at once of what may be most of the budget.
    pub data: Arc<Vec<u8>>,
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

/// The unwind sections of the open file `file`, their bytes together at most `max`; `None` when
/// it is not a 64-bit little-endian ELF file or cannot be read.
pub(crate) fn read(file: &File, max: u64) -> Option<UnwindSections> {
    parse(elf::of(file)?, max)
}

/// The bytes the unwind sections of the open file `file` claim, as their headers say (compressed
/// ones: their compressed size).
pub(crate) fn claimed(file: &File) -> Option<u64> {
    let sections = elf::of(file)?.sections()?;
    Some(
        sections
            .iter()
            .filter(|s| {
                matches!(
                    &s.name[..],
                    b".eh_frame" | b".eh_frame_hdr" | b".debug_frame"
                )
            })
            .fold(0, |n, s| n.saturating_add(s.size)),
    )
}

/// The unwind sections of a 64-bit little-endian ELF file, their bytes together at most `max`
/// (a section past it is left out, whatever the file claims).
pub(crate) fn parse(mut elf: Elf<impl Source>, max: u64) -> Option<UnwindSections> {
    let h = elf.header();
    if !h.is64 || h.endian != Endian::Little {
        return None;
    }
    let mut out = UnwindSections::default();
    for ph in elf.program_headers()? {
        if ph.kind == PT_LOAD {
            out.loads.push((ph.offset, ph.vaddr, ph.filesz, ph.align));
        }
    }
    let mut left = max;
    for s in elf.sections()? {
        let svma = s.addr..s.addr.saturating_add(s.size);
        let mut section = || {
            let data = elf.section_data(&s, MAX_SECTION.min(left))?;
            left -= data.len() as u64;
            Some(Section {
                svma: svma.clone(),
                data: Arc::new(data),
            })
        };
        match &s.name[..] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_has_eh_frame_where_readelf_says() {
        let exe = std::env::current_exe().unwrap();
        let f = File::open(&exe).unwrap();
        let s = read(&f, u64::MAX).expect("this test binary is a 64-bit little-endian ELF file");
        assert!(s.has_tables());
        let Some(text) = crate::elf::tests::readelf(&["-W", "-S"], &exe) else {
            return;
        };
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
    fn sections_and_loads_of_a_64_bit_little_endian_file_only() {
        use crate::elf::tests::{build, reader};
        let sections: &[(&str, u32, u64, u64, &[u8])] = &[
            (".text", 1, 6, 0x1000, &[0x90; 16]),
            (".eh_frame_hdr", 1, 2, 0x2000, &[1; 8]),
            (".eh_frame", 1, 2, 0x2008, &[2; 24]),
            (".debug_frame", 1, 0, 0, &[3; 24]),
        ];
        let segments: &[(u32, &[u8], u64)] = &[(PT_LOAD, &[0; 8], 0x1000)];
        let file = build(true, Endian::Little, segments, sections);
        let s = parse(Elf::parse(&file, reader(&file)).unwrap(), u64::MAX).unwrap();
        assert_eq!(s.text, Some(0x1000..0x1010));
        assert_eq!(s.eh_frame_hdr.unwrap().svma, 0x2000..0x2008);
        let eh = s.eh_frame.unwrap();
        assert_eq!((eh.svma, &eh.data[..]), (0x2008..0x2020, &[2; 24][..]));
        // Within 30 bytes: .eh_frame_hdr (8) fits, .eh_frame (24) does not.
        let small = parse(Elf::parse(&file, reader(&file)).unwrap(), 30).unwrap();
        assert!(small.eh_frame_hdr.is_some() && small.eh_frame.is_none());
        // .eh_frame is there: .debug_frame is not kept.
        assert!(s.debug_frame.is_none());
        assert_eq!(s.loads.len(), 1);
        assert_eq!(
            (s.loads[0].1, s.loads[0].2, s.loads[0].3),
            (0x1000, 8, 0x1000)
        );
        // framehop unwinds x86_64 and aarch64: 32-bit and big-endian files are not read.
        for (is64, e) in [(false, Endian::Little), (true, Endian::Big)] {
            let file = build(is64, e, segments, sections);
            assert!(parse(Elf::parse(&file, reader(&file)).unwrap(), u64::MAX).is_none());
        }
    }

    #[test]
    fn truncated_and_foreign_files_have_none() {
        let none = |_, _| None;
        let mut head = [0u8; 64];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[32] = 0xff;
        head[54] = 56;
        head[56] = 3;
        assert!(parse(Elf::parse(&head, none).unwrap(), u64::MAX).is_none());
    }
}
