//! The GNU build id of an ELF file (`NT_GNU_BUILD_ID` in a `PT_NOTE` segment), read from the file
//! when the kernel's MMAP2 record does not carry it (before Linux 5.12, or a mapping that predates
//! the capture).

use std::fs::File;

use crate::elf::{self, Elf, Source, MAX_TABLE, PT_NOTE};

const NT_GNU_BUILD_ID: u32 = 3;

/// The build id of the ELF file at the absolute `path` as process `pid` names it, opened through
/// [`crate::untrusted::open`] (no symlink, regular files only; `None`: from the host's root);
/// `None` when it cannot be opened, is not an ELF file or has none.
pub fn read(path: &str, pid: Option<u32>) -> Option<Vec<u8>> {
    of_file(crate::untrusted::open(path, pid).ok()?.file())
}

/// The build id of the open ELF file `file`.
pub fn of_file(file: &File) -> Option<Vec<u8>> {
    find(elf::of(file)?)
}

/// The build id among the notes of `elf`'s `PT_NOTE` segments.
pub(crate) fn find(mut elf: Elf<impl Source>) -> Option<Vec<u8>> {
    let endian = elf.header().endian;
    for ph in elf.program_headers()? {
        if ph.kind != PT_NOTE {
            continue;
        }
        let Some(notes) = elf.read(ph.offset, ph.filesz, MAX_TABLE) else {
            continue;
        };
        let id = elf::notes(&notes, endian, ph.align)
            .find(|n| n.kind == NT_GNU_BUILD_ID && n.name == b"GNU\0");
        if let Some(id) = id {
            return Some(id.desc.to_vec());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_executable_has_the_build_id_readelf_shows() {
        // Rust's linker passes --build-id on Linux by default; where it did not, there is nothing to compare.
        let exe = std::env::current_exe().unwrap();
        let ours = read(exe.to_str().unwrap(), None);
        let Some(text) = crate::elf::tests::readelf(&["-n"], &exe) else {
            return;
        };
        let theirs = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .map(str::to_owned);
        let hex = ours.map(|id| id.iter().map(|b| format!("{b:02x}")).collect::<String>());
        assert_eq!(hex, theirs);
    }

    #[test]
    fn the_gnu_build_id_note_of_any_class_and_byte_order() {
        use crate::elf::tests::{build, note, reader};
        use crate::elf::{Endian, PT_LOAD};
        for is64 in [false, true] {
            for e in [Endian::Little, Endian::Big] {
                // An ABI tag, then another owner's note of the same type, then the build id.
                let notes = [
                    note(e, 1, b"GNU\0", &[0; 16]),
                    note(e, NT_GNU_BUILD_ID, b"Go\0\0", &[1; 20]),
                    note(e, NT_GNU_BUILD_ID, b"GNU\0", &[0xab, 0xcd, 0xef]),
                ]
                .concat();
                let segments: &[(u32, &[u8], u64)] =
                    &[(PT_LOAD, &[0; 8], 0x1000), (PT_NOTE, &notes, 4)];
                let file = build(is64, e, segments, &[]);
                let id = Elf::parse(&file, reader(&file)).and_then(find);
                assert_eq!(id, Some(vec![0xab, 0xcd, 0xef]), "64-bit {is64}, {e:?}");
                let without = build(is64, e, &segments[..1], &[]);
                assert_eq!(Elf::parse(&without, reader(&without)).and_then(find), None);
            }
        }
    }

    #[test]
    fn truncated_and_foreign_files_have_none() {
        let none = |_, _| None;
        assert!(Elf::parse(&[0u8; 64], none).is_none());
        // A 64-bit header whose program headers claim to lie past the end.
        let mut head = [0u8; 64];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[32] = 0xff;
        head[54] = 56;
        head[56] = 3;
        assert_eq!(Elf::parse(&head, none).and_then(find), None);
    }
}
