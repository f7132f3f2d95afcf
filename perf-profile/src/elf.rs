//! Reading ELF files, as far as this crate needs: the file header, program headers, section
//! headers with their names, section contents (decompressing `SHF_COMPRESSED` ones), code by its
//! address, notes and symbols; 32- and 64-bit, either byte order. One reader for every use: build
//! ids ([`maps::build_id`](crate::maps::build_id)), unwind tables (`unwind::elf`) and the
//! [`doctor`](crate::doctor)'s look at a binary.
//!
//! Every offset, size and count comes from the file and is checked: a truncated, foreign or
//! malformed file gives `None`, never a panic, and no table or section is read past the limit its
//! caller gives.

use std::fs::File;
use std::io::Read;

/// `p_type` of a loadable segment.
pub(crate) const PT_LOAD: u32 = 1;
/// `p_type` of a segment of notes.
pub(crate) const PT_NOTE: u32 = 4;
/// `sh_type` of a section of program-defined bytes (code, data, `.eh_frame`).
pub(crate) const SHT_PROGBITS: u32 = 1;
/// `sh_type` of the full symbol table (`.symtab`).
pub(crate) const SHT_SYMTAB: u32 = 2;
/// `sh_type` of a section that takes no room in the file (`.bss`).
const SHT_NOBITS: u32 = 8;
/// `sh_type` of the dynamic linker's symbol table (`.dynsym`).
pub(crate) const SHT_DYNSYM: u32 = 11;
/// A symbol's type (`ELF_ST_TYPE(st_info)`) when it names a function.
pub(crate) const STT_FUNC: u8 = 2;
/// `sh_flags`: the section's bytes are compressed, after an `ElfN_Chdr`.
const SHF_COMPRESSED: u64 = 0x800;
/// `ch_type` of zlib-compressed section bytes.
const ELFCOMPRESS_ZLIB: u32 = 1;
/// Program and section header tables and the section names larger than this are not ELF files we
/// read.
pub(crate) const MAX_TABLE: u64 = 1 << 20;

/// A byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endian {
    Little,
    Big,
}

impl Endian {
    fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
        b.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    pub(crate) fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let v = Self::bytes(b, at)?;
        Some(match self {
            Self::Little => u16::from_le_bytes(v),
            Self::Big => u16::from_be_bytes(v),
        })
    }

    pub(crate) fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let v = Self::bytes(b, at)?;
        Some(match self {
            Self::Little => u32::from_le_bytes(v),
            Self::Big => u32::from_be_bytes(v),
        })
    }

    pub(crate) fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let v = Self::bytes(b, at)?;
        Some(match self {
            Self::Little => u64::from_le_bytes(v),
            Self::Big => u64::from_be_bytes(v),
        })
    }

    /// An address-sized field: 8 bytes in a 64-bit file, 4 in a 32-bit one.
    fn addr(self, is64: bool, b: &[u8], at: usize) -> Option<u64> {
        if is64 {
            self.u64(b, at)
        } else {
            self.u32(b, at).map(u64::from)
        }
    }
}

/// The ELF file header (`ElfN_Ehdr`), as far as needed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    /// `ELFCLASS64` (else 32-bit).
    pub is64: bool,
    pub endian: Endian,
    /// `e_machine`: the architecture (`EM_X86_64` 62, `EM_AARCH64` 183, ...).
    pub machine: u16,
    phoff: u64,
    phentsize: u16,
    phnum: u16,
    shoff: u64,
    shentsize: u16,
    shnum: u16,
    shstrndx: u16,
}

impl Header {
    /// The header at the start of a file (its first 64 bytes, or 52 for a 32-bit file); `None` when
    /// it is not an ELF header.
    pub(crate) fn parse(h: &[u8]) -> Option<Self> {
        if h.get(..4)? != b"\x7fELF" {
            return None;
        }
        let is64 = match h.get(4)? {
            1 => false,
            2 => true,
            _ => return None,
        };
        let endian = match h.get(5)? {
            1 => Endian::Little,
            2 => Endian::Big,
            _ => return None,
        };
        let e = endian;
        // The fields after e_entry, e_phoff and e_shoff (address-sized) are 12 bytes earlier in a
        // 32-bit header.
        let (phoff_at, shoff_at, rest) = if is64 { (32, 40, 48) } else { (28, 32, 36) };
        Some(Self {
            is64,
            endian,
            machine: e.u16(h, 18)?,
            phoff: e.addr(is64, h, phoff_at)?,
            shoff: e.addr(is64, h, shoff_at)?,
            phentsize: e.u16(h, rest + 6)?,
            phnum: e.u16(h, rest + 8)?,
            shentsize: e.u16(h, rest + 10)?,
            shnum: e.u16(h, rest + 12)?,
            shstrndx: e.u16(h, rest + 14)?,
        })
    }
}

/// A program header (`ElfN_Phdr`), as far as needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProgramHeader {
    /// `p_type`: [`PT_LOAD`], [`PT_NOTE`], ...
    pub kind: u32,
    /// `p_offset`: where the segment starts in the file.
    pub offset: u64,
    /// `p_vaddr`: its address as linked.
    pub vaddr: u64,
    /// `p_filesz`: its size in the file.
    pub filesz: u64,
    /// `p_align`.
    pub align: u64,
}

/// A section header (`ElfN_Shdr`) with its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SectionHeader {
    /// From the section name table (`.eh_frame`); empty where it cannot be read.
    pub name: Vec<u8>,
    /// `sh_type`.
    pub kind: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr`: its address as linked.
    pub addr: u64,
    /// `sh_offset`: where its bytes are in the file.
    pub offset: u64,
    /// `sh_size`: its size in the file (compressed, where it is).
    pub size: u64,
    /// `sh_link`: the index of a related section (a symbol table's string table).
    pub link: u32,
    /// `sh_entsize`: the size of each entry, for a section that is a table (symbols).
    pub entsize: u64,
}

/// Where an ELF file's bytes come from: a file on disk, or (in tests) bytes in memory.
pub(crate) trait Source {
    /// `len` bytes at `offset`; `None` where the file has no such bytes.
    fn read_at(&mut self, offset: u64, len: u64) -> Option<Vec<u8>>;
}

impl Source for &File {
    fn read_at(&mut self, offset: u64, len: u64) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        self.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    }
}

impl Source for File {
    fn read_at(&mut self, offset: u64, len: u64) -> Option<Vec<u8>> {
        (&*self).read_at(offset, len)
    }
}

impl<F: FnMut(u64, u64) -> Option<Vec<u8>>> Source for F {
    fn read_at(&mut self, offset: u64, len: u64) -> Option<Vec<u8>> {
        self(offset, len)
    }
}

/// An ELF file, its header read.
#[derive(Debug)]
pub(crate) struct Elf<S> {
    header: Header,
    source: S,
}

/// The ELF file `file` (opened through [`crate::untrusted`]); `None` when it is not ELF.
pub(crate) fn of<S: Source>(mut file: S) -> Option<Elf<S>> {
    let head = file.read_at(0, 64)?;
    Elf::parse(&head, file)
}

impl<S: Source> Elf<S> {
    /// The file whose first bytes are `head` (64, or 52 for a 32-bit file), the rest read from
    /// `source`.
    pub(crate) fn parse(head: &[u8], source: S) -> Option<Self> {
        Some(Self {
            header: Header::parse(head)?,
            source,
        })
    }

    /// Where the bytes come from (the open file).
    pub(crate) fn source(&self) -> &S {
        &self.source
    }

    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    /// `len` bytes at `offset`; `None` past `max` bytes or the file's end.
    pub(crate) fn read(&mut self, offset: u64, len: u64, max: u64) -> Option<Vec<u8>> {
        if len > max {
            return None;
        }
        self.source.read_at(offset, len)
    }

    /// The entries of a header table: `num` of `entsize` bytes at `offset`, each at least `min`.
    fn table(&mut self, offset: u64, entsize: u16, num: u16, min: usize) -> Option<Vec<Vec<u8>>> {
        let entsize = usize::from(entsize);
        if num == 0 {
            return Some(Vec::new());
        }
        if entsize < min {
            return None;
        }
        let bytes = self.read(offset, (entsize * usize::from(num)) as u64, MAX_TABLE)?;
        Some(bytes.chunks_exact(entsize).map(<[u8]>::to_vec).collect())
    }

    /// Every program header; `None` when the table cannot be read.
    pub(crate) fn program_headers(&mut self) -> Option<Vec<ProgramHeader>> {
        let Header {
            is64, endian: e, ..
        } = self.header;
        let min = if is64 { 56 } else { 32 };
        let (phoff, phentsize, phnum) =
            (self.header.phoff, self.header.phentsize, self.header.phnum);
        self.table(phoff, phentsize, phnum, min)?
            .iter()
            .map(|p| {
                Some(if is64 {
                    ProgramHeader {
                        kind: e.u32(p, 0)?,
                        offset: e.u64(p, 8)?,
                        vaddr: e.u64(p, 16)?,
                        filesz: e.u64(p, 32)?,
                        align: e.u64(p, 48)?,
                    }
                } else {
                    ProgramHeader {
                        kind: e.u32(p, 0)?,
                        offset: u64::from(e.u32(p, 4)?),
                        vaddr: u64::from(e.u32(p, 8)?),
                        filesz: u64::from(e.u32(p, 16)?),
                        align: u64::from(e.u32(p, 28)?),
                    }
                })
            })
            .collect()
    }

    /// Every section header with its name (none when the file has no section headers); `None`
    /// when the table or the names cannot be read.
    pub(crate) fn sections(&mut self) -> Option<Vec<SectionHeader>> {
        let Header {
            is64, endian: e, ..
        } = self.header;
        let min = if is64 { 64 } else { 40 };
        if self.header.shoff == 0 {
            return Some(Vec::new());
        }
        let (shoff, shentsize, shnum) =
            (self.header.shoff, self.header.shentsize, self.header.shnum);
        let mut sections = self
            .table(shoff, shentsize, shnum, min)?
            .iter()
            .map(|s| {
                // sh_flags, sh_addr, sh_offset, sh_size: address-sized, from byte 8; then
                // sh_link and sh_info (4 bytes each), sh_addralign and sh_entsize.
                let w = if is64 { 8 } else { 4 };
                let field = |i: usize| e.addr(is64, s, 8 + i * w);
                Some((
                    e.u32(s, 0)?,
                    SectionHeader {
                        name: Vec::new(),
                        kind: e.u32(s, 4)?,
                        flags: field(0)?,
                        addr: field(1)?,
                        offset: field(2)?,
                        size: field(3)?,
                        link: e.u32(s, 8 + 4 * w)?,
                        entsize: e.addr(is64, s, 16 + 5 * w)?,
                    },
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        if sections.is_empty() {
            return Some(Vec::new());
        }
        let names = sections.get(usize::from(self.header.shstrndx))?.1.clone();
        let names = self.read(names.offset, names.size, MAX_TABLE)?;
        for (at, s) in &mut sections {
            s.name = string_at(&names, *at).to_vec();
        }
        Some(sections.into_iter().map(|(_, s)| s).collect())
    }

    /// A section's bytes, decompressed; `None` for one that takes no room in the file
    /// (`SHT_NOBITS`), or that is (decompressed) larger than `max`, or cannot be read.
    pub(crate) fn section_data(&mut self, s: &SectionHeader, max: u64) -> Option<Vec<u8>> {
        if s.kind == SHT_NOBITS {
            return None;
        }
        let bytes = self.read(s.offset, s.size, max)?;
        if s.flags & SHF_COMPRESSED == 0 {
            return Some(bytes);
        }
        decompress(self.header, &bytes, max)
    }

    /// The NUL-terminated string at `at` of the string table `s`, without its NUL, read alone (a
    /// large library's `.dynstr` is MiBs, of which a profile names a few PLT entries); as
    /// [`string_at`] on the whole table: empty where `at` is past it, the table's rest where no
    /// NUL ends it. `None` where it cannot be read or is longer than `max`.
    pub(crate) fn string(&mut self, s: &SectionHeader, at: u32, max: u64) -> Option<Vec<u8>> {
        if s.kind == SHT_NOBITS || s.flags & SHF_COMPRESSED != 0 {
            let table = self.section_data(s, MAX_TABLE)?;
            return Some(string_at(&table, at).to_vec());
        }
        let at = u64::from(at);
        let Some(left) = s.size.checked_sub(at).filter(|&n| n > 0) else {
            return Some(Vec::new());
        };
        let start = s.offset.checked_add(at)?;
        // Most names are short: a first read of 256 bytes, then four times more until the NUL
        // (a name of `max` bytes and its NUL at most).
        let cap = left.min(max.saturating_add(1));
        let mut len = cap.min(256);
        loop {
            let mut bytes = self.read(start, len, cap)?;
            if let Some(end) = bytes.iter().position(|&b| b == 0) {
                bytes.truncate(end);
                return Some(bytes);
            }
            if len == cap {
                return (len == left && len <= max).then_some(bytes);
            }
            len = len.saturating_mul(4).min(cap);
        }
    }

    /// The `len` bytes at address `addr` as linked, from the section of [`SHT_PROGBITS`] (code or
    /// data, not compressed) of `sections` that holds all of them; `None` where none does.
    pub(crate) fn read_addr(
        &mut self,
        sections: &[SectionHeader],
        addr: u64,
        len: u64,
    ) -> Option<Vec<u8>> {
        let end = addr.checked_add(len)?;
        let s = sections.iter().find(|s| {
            s.kind == SHT_PROGBITS
                && s.flags & SHF_COMPRESSED == 0
                && s.addr != 0
                && s.addr <= addr
                && s.addr.checked_add(s.size).is_some_and(|e| end <= e)
        })?;
        self.read(s.offset.checked_add(addr - s.addr)?, len, len)
    }
}

/// The NUL-terminated string at `at` of a string table (`.shstrtab`, `.strtab`), without its NUL;
/// empty where `at` is past the table.
pub(crate) fn string_at(table: &[u8], at: u32) -> &[u8] {
    let s = usize::try_from(at)
        .ok()
        .and_then(|at| table.get(at..))
        .unwrap_or_default();
    &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
}

/// A symbol (`ElfN_Sym`), as far as needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Symbol<'a> {
    /// From the symbol table's string table, without the NUL; empty where it cannot be read.
    pub name: &'a [u8],
    /// Its type, `ELF_ST_TYPE(st_info)`: [`STT_FUNC`], ...
    pub kind: u8,
    /// `st_value`: for a function, its address as linked.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
}

/// The symbols of a symbol table's bytes ([`SHT_SYMTAB`] or [`SHT_DYNSYM`]), whose entries are
/// `entsize` bytes (the section's `sh_entsize`), their names in `names` (the bytes of the section
/// its `sh_link` names). A table whose entries are smaller than an `ElfN_Sym` has none; bytes after
/// the last whole entry are left.
pub(crate) fn symbols<'a>(
    table: &'a [u8],
    names: &'a [u8],
    header: &Header,
    entsize: u64,
) -> impl Iterator<Item = Symbol<'a>> + 'a {
    let Header {
        is64, endian: e, ..
    } = *header;
    let min = if is64 { 24 } else { 16 };
    let entsize = usize::try_from(entsize).ok().filter(|&n| n >= min);
    let table = if entsize.is_some() { table } else { &[] };
    // 64-bit: st_name, st_info, st_other, st_shndx, st_value, st_size; 32-bit: st_name,
    // st_value, st_size, st_info, st_other, st_shndx.
    let (info_at, value_at, size_at) = if is64 { (4, 8, 16) } else { (12, 4, 8) };
    table
        .chunks_exact(entsize.unwrap_or(min))
        .filter_map(move |s| {
            Some(Symbol {
                name: string_at(names, e.u32(s, 0)?),
                kind: s.get(info_at)? & 0xf,
                value: e.addr(is64, s, value_at)?,
                size: e.addr(is64, s, size_at)?,
            })
        })
}

/// `sh_type` of a table of relocations with addends (`.rela.plt`).
pub(crate) const SHT_RELA: u32 = 4;
/// `e_machine` of x86-64 and of AArch64.
pub(crate) const EM_X86_64: u16 = 62;
pub(crate) const EM_AARCH64: u16 = 183;
/// `ELF64_R_TYPE` of a PLT slot's relocation: x86-64's `R_X86_64_JUMP_SLOT`, AArch64's
/// `R_AARCH64_JUMP_SLOT`.
const R_X86_64_JUMP_SLOT: u32 = 7;
/// `ELF64_R_TYPE` of a GOT slot holding a symbol's address (`.rela.dyn`), which a `.plt.got`
/// entry jumps through.
const R_X86_64_GLOB_DAT: u32 = 6;
const R_AARCH64_JUMP_SLOT: u32 = 1026;
/// The size of a PLT entry on both (`.plt` after its header, and `.plt.sec`).
pub(crate) const PLT_ENTRY: u64 = 16;
/// The most bytes of `.rela.plt` read (a relocation per imported function: 24 bytes each).
const MAX_RELA_PLT: u64 = 16 << 20;

/// A PLT entry: the stub through which calls of an imported (or interposable) function go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PltEntry {
    /// Its address as linked.
    pub addr: u64,
    /// Its bytes: [`PLT_ENTRY`], or 8 in a `.plt.got` without IBT.
    pub size: u64,
    /// Where the function's name is in the string table [`Plt::strings`] names.
    pub name: u32,
}

/// The PLT entries of a file and the section (an index of the section headers) their names are in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plt {
    pub strings: usize,
    pub entries: Vec<PltEntry>,
}

impl<S: Source> Elf<S> {
    /// The PLT entries of a 64-bit x86-64 or AArch64 file with `sections` (its section headers),
    /// each named after the function its `.rela.plt` relocation binds (`R_X86_64_JUMP_SLOT`,
    /// `R_AARCH64_JUMP_SLOT`), as objdump and perf name them (`name@plt`, the caller adds the
    /// suffix). Entry `n` jumps through `.got.plt`'s slot `n + 3` (the first three are the
    /// dynamic linker's), which the relocation's `r_offset` names: the relocations' order is not
    /// the entries' (libc lists its `IRELATIVE` ones last, their entries among the others);
    /// without `.got.plt`, the `n`th relocation is entry `n`. Where entry `n` is:
    /// - x86-64 with `.plt.sec` (`-z ibtplt`, IBT's layout): entry `n` of `.plt.sec`, 16 bytes each;
    /// - x86-64 without: `.plt`'s entry `n + 1`, 16 bytes each, the first being the resolver's;
    /// - AArch64: `.plt` after its 32-byte header, 16 bytes each;
    ///
    /// and x86-64's `.plt.got` entries (see `plt_got`).
    ///
    /// Entries past their section's end, relocations of other types (`IRELATIVE`) or of no symbol
    /// are left out; `None` where the file has no such tables or they cannot be read.
    pub(crate) fn plt(&mut self, sections: &[SectionHeader]) -> Option<Plt> {
        let Header {
            is64,
            endian: e,
            machine,
            ..
        } = self.header;
        if !is64 {
            return None;
        }
        let (slot, header) = match machine {
            EM_X86_64 => (R_X86_64_JUMP_SLOT, PLT_ENTRY),
            EM_AARCH64 => (R_AARCH64_JUMP_SLOT, 32),
            _ => return None,
        };
        let named = |n: &[u8]| sections.iter().find(|s| s.name == n);
        let rela = sections
            .iter()
            .find(|s| s.name == b".rela.plt" && s.kind == SHT_RELA)?;
        let (code, first) = match named(b".plt.sec").filter(|_| machine == EM_X86_64) {
            Some(sec) => (sec, 0),
            None => (named(b".plt")?, header),
        };
        let dynsym = sections.get(usize::try_from(rela.link).ok()?)?;
        if dynsym.kind != SHT_DYNSYM && dynsym.kind != SHT_SYMTAB {
            return None;
        }
        let strings = usize::try_from(dynsym.link).ok()?;
        sections.get(strings)?;
        let relocs = self.section_data(rela, MAX_RELA_PLT)?;
        let symsize = usize::try_from(dynsym.entsize).ok().filter(|&n| n >= 24)?;
        let relsize = usize::try_from(rela.entsize).ok().filter(|&n| n >= 24)?;
        let end = code.addr.checked_add(code.size)?;
        let got = named(b".got.plt").map(|g| g.addr);
        let mut entries = Vec::new();
        for (n, r) in relocs.chunks_exact(relsize).enumerate() {
            // Elf64_Rela: r_offset, r_info (symbol << 32 | type), r_addend.
            let (Some(offset), Some(info)) = (e.u64(r, 0), e.u64(r, 8)) else {
                continue;
            };
            let n = match got {
                Some(got) => match offset
                    .checked_sub(got)
                    .filter(|d| d % 8 == 0)
                    .and_then(|d| (d / 8).checked_sub(3))
                {
                    Some(n) => n,
                    None => continue,
                },
                None => n as u64,
            };
            let Some(addr) = n
                .checked_mul(PLT_ENTRY)
                .and_then(|o| o.checked_add(first))
                .and_then(|o| o.checked_add(code.addr))
            else {
                break;
            };
            if addr.checked_add(PLT_ENTRY).is_none_or(|a| a > end) {
                continue;
            }
            // The symbol's index for now; its name's offset below.
            let Ok(sym) = u32::try_from(info >> 32) else {
                continue;
            };
            if info as u32 != slot || sym == 0 {
                continue;
            }
            entries.push(PltEntry {
                addr,
                size: PLT_ENTRY,
                name: sym,
            });
        }
        if machine == EM_X86_64 {
            self.plt_got(sections, rela.link, &mut entries);
        }
        entries.sort_unstable_by_key(|p| p.addr);
        entries.dedup_by_key(|p| p.addr);
        // Each symbol's st_name, read alone: the table (.dynsym, MiBs in a large library) is not
        // read whole for the few it names here.
        let count = dynsym.size / symsize as u64;
        let mut named = Vec::with_capacity(entries.len());
        for mut p in entries {
            let sym = u64::from(p.name);
            let at = sym
                .checked_mul(symsize as u64)
                .and_then(|o| o.checked_add(dynsym.offset));
            let name = at
                .filter(|_| sym < count)
                .and_then(|at| self.read(at, 4, 4))
                .and_then(|b| e.u32(&b, 0))
                .filter(|&n| n != 0);
            if let Some(name) = name {
                p.name = name;
                named.push(p);
            }
        }
        Some(Plt {
            strings,
            entries: named,
        })
    }
}

impl<S: Source> Elf<S> {
    /// Adds the entries of x86-64's `.plt.got` to `entries`: stubs of functions whose address the
    /// file also takes, which jump through the GOT slot a `.rela.dyn` `R_X86_64_GLOB_DAT`
    /// relocation fills (malloc and free in libpython). An entry (8 bytes, 16 with IBT's
    /// `endbr64`) is read for its `jmp *disp32(%rip)` (`ff 25`, after `endbr64` and a `bnd`
    /// prefix where there are), whose slot names it. The relocations' symbols must be those of
    /// `.rela.plt` (the table at section `dynsym`); each entry's `name` is its symbol's index.
    fn plt_got(
        &mut self,
        sections: &[SectionHeader],
        dynsym: u32,
        entries: &mut Vec<PltEntry>,
    ) -> Option<()> {
        let e = self.header.endian;
        let named = |n: &[u8]| sections.iter().find(|s| s.name == n);
        let code = named(b".plt.got")?;
        let rela = named(b".rela.dyn").filter(|r| r.kind == SHT_RELA && r.link == dynsym)?;
        let size = match code.entsize {
            8 | 16 => code.entsize,
            _ => 8,
        };
        let bytes = self.section_data(code, MAX_RELA_PLT)?;
        let relocs = self.section_data(rela, MAX_RELA_PLT)?;
        let relsize = usize::try_from(rela.entsize).ok().filter(|&n| n >= 24)?;
        // GOT slot -> the symbol's index, of the GLOB_DAT relocations.
        let mut slots: Vec<(u64, u32)> = relocs
            .chunks_exact(relsize)
            .filter_map(|r| {
                let (offset, info) = (e.u64(r, 0)?, e.u64(r, 8)?);
                if info as u32 != R_X86_64_GLOB_DAT {
                    return None;
                }
                let sym = u32::try_from(info >> 32).ok().filter(|&s| s != 0)?;
                Some((offset, sym))
            })
            .collect();
        slots.sort_unstable();
        let step = usize::try_from(size).ok()?;
        for (k, entry) in bytes.chunks_exact(step).enumerate() {
            let Some(jmp) = entry.windows(2).position(|w| w == [0xff, 0x25]) else {
                continue;
            };
            // x86-64 code is little-endian whatever the file says.
            let Some(disp) = Endian::Little.u32(entry, jmp + 2) else {
                continue;
            };
            let addr = code.addr.checked_add(k as u64 * size)?;
            let next = addr.checked_add(jmp as u64 + 6)?;
            let slot = next.wrapping_add_signed(i64::from(disp as i32));
            if let Ok(i) = slots.binary_search_by_key(&slot, |s| s.0) {
                entries.push(PltEntry {
                    addr,
                    size,
                    name: slots[i].1,
                });
            }
        }
        Some(())
    }
}

/// A `SHF_COMPRESSED` section's bytes: an `ElfN_Chdr` (type, size, alignment; 12 bytes, or 24 in
/// a 64-bit file with a reserved word after the type), then zlib data of that size.
fn decompress(h: Header, bytes: &[u8], max: u64) -> Option<Vec<u8>> {
    let e = h.endian;
    if e.u32(bytes, 0)? != ELFCOMPRESS_ZLIB {
        return None;
    }
    let (size, data_at) = if h.is64 {
        (e.u64(bytes, 8)?, 24)
    } else {
        (u64::from(e.u32(bytes, 4)?), 12)
    };
    if size > max {
        return None;
    }
    let mut out = Vec::with_capacity(usize::try_from(size).ok()?);
    flate2::read::ZlibDecoder::new(bytes.get(data_at..)?)
        .take(size)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 == size).then_some(out)
}

/// A note (`ElfN_Nhdr` with its name and descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Note<'a> {
    /// `n_type`.
    pub kind: u32,
    /// The owner's name, with its NUL (`GNU\0`).
    pub name: &'a [u8],
    pub desc: &'a [u8],
}

/// The notes of a `PT_NOTE` segment's bytes, whose name and descriptor are padded to `align` (the
/// segment's: 4, or 8 for notes such as `.note.gnu.property` in a segment aligned to 8). Stops at
/// the first note that does not fit.
pub(crate) fn notes(
    mut bytes: &[u8],
    endian: Endian,
    align: u64,
) -> impl Iterator<Item = Note<'_>> + '_ {
    let align = if align == 8 { 8 } else { 4 };
    let pad = move |n: usize| n.checked_add(align - 1).map(|n| n & !(align - 1));
    std::iter::from_fn(move || {
        let namesz = usize::try_from(endian.u32(bytes, 0)?).ok()?;
        let descsz = usize::try_from(endian.u32(bytes, 4)?).ok()?;
        let kind = endian.u32(bytes, 8)?;
        let name_end = 12usize.checked_add(namesz)?;
        let desc_at = 12usize.checked_add(pad(namesz)?)?;
        let desc_end = desc_at.checked_add(descsz)?;
        let note = Note {
            kind,
            name: bytes.get(12..name_end)?,
            desc: bytes.get(desc_at..desc_end)?,
        };
        bytes = bytes
            .get(desc_at.checked_add(pad(descsz)?)?..)
            .unwrap_or_default();
        Some(note)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;
    use std::path::Path;

    use super::*;

    /// Bytes of an ELF file for tests: a header, then the given program headers, then the
    /// sections (each a name, type, flags, address and contents) with their name table and
    /// header table. `ElfN` as `is64` says, in `endian`'s byte order.
    pub(crate) fn build(
        is64: bool,
        endian: Endian,
        segments: &[(u32, &[u8], u64)],
        sections: &[(&str, u32, u64, u64, &[u8])],
    ) -> Vec<u8> {
        let sections: Vec<TestSection> = sections
            .iter()
            .map(|&(name, kind, flags, addr, bytes)| TestSection {
                name,
                kind,
                flags,
                addr,
                bytes,
                ..TestSection::default()
            })
            .collect();
        build_with(is64, endian, segments, &sections)
    }

    /// A section of a test file made by [`build_with`].
    #[derive(Clone, Copy, Debug, Default)]
    pub(crate) struct TestSection<'a> {
        pub name: &'a str,
        pub kind: u32,
        pub flags: u64,
        pub addr: u64,
        pub bytes: &'a [u8],
        /// `sh_link`: an index of `build_with`'s sections, counting from 1 (0 is the null
        /// section).
        pub link: u32,
        pub entsize: u64,
    }

    /// `v` as `n` bytes in `e`'s byte order.
    pub(crate) fn int(e: Endian, v: u64, n: usize) -> Vec<u8> {
        let mut b = v.to_le_bytes()[..n].to_vec();
        if e == Endian::Big {
            b.reverse();
        }
        b
    }

    /// As [`build`], with each section's `sh_link` and `sh_entsize`.
    pub(crate) fn build_with(
        is64: bool,
        endian: Endian,
        segments: &[(u32, &[u8], u64)],
        sections: &[TestSection],
    ) -> Vec<u8> {
        let put = |out: &mut Vec<u8>, v: u64, n: usize| out.extend(int(endian, v, n));
        let w = if is64 { 8 } else { 4 };
        let (ehsize, phentsize, shentsize) = if is64 { (64, 56, 64) } else { (52, 32, 40) };
        // Layout: header, program headers, segment bytes, section bytes, names, section headers.
        let mut data = Vec::new();
        let phoff = ehsize;
        let mut at = phoff + phentsize * segments.len();
        let mut seg_at = Vec::new();
        for (_, bytes, _) in segments {
            seg_at.push(at);
            at += bytes.len();
        }
        let mut sec_at = Vec::new();
        for s in sections {
            sec_at.push(at);
            at += s.bytes.len();
        }
        let mut names = vec![0u8];
        let mut name_at = Vec::new();
        for TestSection { name, .. } in sections {
            name_at.push(names.len());
            names.extend_from_slice(name.as_bytes());
            names.push(0);
        }
        let shstrtab_name = names.len();
        names.extend_from_slice(b".shstrtab\0");
        let names_at = at;
        let shoff = names_at + names.len();
        let shnum = sections.len() + 2; // the null section first, the names last

        data.extend_from_slice(b"\x7fELF");
        data.push(if is64 { 2 } else { 1 });
        data.push(if endian == Endian::Little { 1 } else { 2 });
        data.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        put(&mut data, 3, 2); // e_type: ET_DYN
        put(&mut data, 62, 2); // e_machine: EM_X86_64
        put(&mut data, 1, 4);
        put(&mut data, 0, w); // e_entry
        put(&mut data, phoff as u64, w);
        put(&mut data, shoff as u64, w);
        put(&mut data, 0, 4);
        put(&mut data, ehsize as u64, 2);
        put(&mut data, phentsize as u64, 2);
        put(&mut data, segments.len() as u64, 2);
        put(&mut data, shentsize as u64, 2);
        put(&mut data, shnum as u64, 2);
        put(&mut data, shnum as u64 - 1, 2);
        assert_eq!(data.len(), ehsize);
        for ((kind, bytes, align), &off) in segments.iter().zip(&seg_at) {
            let len = bytes.len() as u64;
            put(&mut data, u64::from(*kind), 4);
            if is64 {
                put(&mut data, 4, 4); // p_flags
                for v in [off as u64, 0x1000, 0x1000, len, len, *align] {
                    put(&mut data, v, 8);
                }
            } else {
                for v in [off as u64, 0x1000, 0x1000, len, len, 4, *align] {
                    put(&mut data, v, 4);
                }
            }
        }
        for (_, bytes, _) in segments {
            data.extend_from_slice(bytes);
        }
        for s in sections {
            data.extend_from_slice(s.bytes);
        }
        data.extend_from_slice(&names);
        // The header of `s`, found at `off` in the file, its name at `name`.
        let header = |data: &mut Vec<u8>, name: usize, s: &TestSection, off: usize| {
            put(data, name as u64, 4);
            put(data, u64::from(s.kind), 4);
            for v in [s.flags, s.addr, off as u64, s.bytes.len() as u64] {
                put(data, v, w);
            }
            put(data, u64::from(s.link), 4);
            put(data, 0, 4); // sh_info
            put(data, 1, w); // sh_addralign
            put(data, s.entsize, w);
        };
        header(&mut data, 0, &TestSection::default(), 0);
        for (i, s) in sections.iter().enumerate() {
            header(&mut data, name_at[i], s, sec_at[i]);
        }
        let shstrtab = TestSection {
            kind: 3,
            bytes: &names,
            ..TestSection::default()
        };
        header(&mut data, shstrtab_name, &shstrtab, names_at);
        data
    }

    /// What `readelf ARGS FILE` prints; `None` (saying the test skips) where readelf is not installed.
    pub(crate) fn readelf(args: &[&str], file: &Path) -> Option<String> {
        match std::process::Command::new("readelf")
            .args(args)
            .arg(file)
            .output()
        {
            Ok(out) => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
            Err(_) => {
                println!("skipped: readelf is not installed");
                None
            }
        }
    }

    /// `bytes` as a [`Source`].
    pub(crate) fn reader(bytes: &[u8]) -> impl FnMut(u64, u64) -> Option<Vec<u8>> + '_ {
        |offset, len| {
            let start = usize::try_from(offset).ok()?;
            let end = start.checked_add(usize::try_from(len).ok()?)?;
            bytes.get(start..end).map(<[u8]>::to_vec)
        }
    }

    /// Strings read alone are those of the whole table: short, longer than the first read, at
    /// the table's end without a NUL, past it; longer than `max` is `None`.
    #[test]
    fn a_string_read_alone_is_the_whole_tables() {
        let long = "x".repeat(1000);
        let mut table = b"\0short\0".to_vec();
        table.extend_from_slice(long.as_bytes());
        table.extend_from_slice(b"\0no_nul");
        // Some bytes before the table, and after it (not the table's: never read).
        let mut file = vec![0xaa; 100];
        file.extend_from_slice(&table);
        file.extend_from_slice(b"after\0");
        let s = SectionHeader {
            name: b".dynstr".to_vec(),
            kind: 3,
            flags: 0,
            addr: 0,
            offset: 100,
            size: table.len() as u64,
            link: 0,
            entsize: 0,
        };
        let mut elf = Elf {
            header: Header::parse(&build(true, Endian::Little, &[], &[])[..64]).unwrap(),
            source: reader(&file),
        };
        for at in 0..table.len() as u32 + 3 {
            assert_eq!(
                elf.string(&s, at, 4096).as_deref(),
                Some(string_at(&table, at)),
                "at {at}"
            );
        }
        assert_eq!(elf.string(&s, 7, 999), None, "longer than max");
        assert_eq!(elf.string(&s, 7, 1000).map(|n| n.len()), Some(1000));
    }

    /// A note in 4-byte padding.
    pub(crate) fn note(e: Endian, kind: u32, name: &[u8], desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let pad = |out: &mut Vec<u8>| out.resize(out.len().next_multiple_of(4), 0);
        for v in [name.len(), desc.len(), kind as usize] {
            out.extend(int(e, v as u64, 4));
        }
        out.extend_from_slice(name);
        pad(&mut out);
        out.extend_from_slice(desc);
        pad(&mut out);
        out
    }

    #[test]
    fn every_class_and_byte_order_reads_the_same() {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        zlib.write_all(&[7u8; 300]).unwrap();
        let zlib = zlib.finish().unwrap();
        for is64 in [false, true] {
            for e in [Endian::Little, Endian::Big] {
                let notes = [
                    note(e, 1, b"GNU\0", &[1, 2, 3, 4]),
                    note(e, 3, b"GNU\0", &[0xab; 20]),
                ]
                .concat();
                // A compressed section: ElfN_Chdr (zlib, 300 bytes), then the data.
                let mut chdr = Vec::new();
                let u = |v: u64, n: usize| int(e, v, n);
                chdr.extend(u(1, 4));
                if is64 {
                    chdr.extend(u(0, 4));
                }
                let w = if is64 { 8 } else { 4 };
                chdr.extend(u(300, w));
                chdr.extend(u(1, w));
                chdr.extend_from_slice(&zlib);
                let file = build(
                    is64,
                    e,
                    &[(PT_LOAD, &[0; 16], 0x1000), (PT_NOTE, &notes, 4)],
                    &[
                        (".text", 1, 6, 0x1010, &[0x90; 8]),
                        (".debug_frame", 1, SHF_COMPRESSED, 0, &chdr),
                        (".bss", SHT_NOBITS, 3, 0x3000, &[]),
                    ],
                );
                let what = format!("64-bit {is64}, {e:?}");
                let mut elf = Elf::parse(&file, reader(&file)).expect(&what);
                let h = elf.header();
                assert_eq!((h.is64, h.endian, h.machine), (is64, e, 62));
                let ph = elf.program_headers().expect(&what);
                assert_eq!(ph.len(), 2, "{what}");
                assert_eq!(
                    (ph[0].kind, ph[0].vaddr, ph[0].filesz, ph[0].align),
                    (PT_LOAD, 0x1000, 16, 0x1000)
                );
                assert_eq!((ph[1].kind, ph[1].filesz), (PT_NOTE, notes.len() as u64));
                let seg = elf.read(ph[1].offset, ph[1].filesz, MAX_TABLE).unwrap();
                let found: Vec<Note> = super::notes(&seg, e, ph[1].align).collect();
                assert_eq!(found.len(), 2, "{what}");
                assert_eq!(
                    (found[1].kind, found[1].name, found[1].desc),
                    (3, &b"GNU\0"[..], &[0xab; 20][..])
                );

                let sections = elf.sections().expect(&what);
                let names: Vec<&[u8]> = sections.iter().map(|s| &s.name[..]).collect();
                assert_eq!(
                    names,
                    [&b""[..], b".text", b".debug_frame", b".bss", b".shstrtab"],
                    "{what}"
                );
                let text = sections[1].clone();
                assert_eq!((text.addr, text.size), (0x1010, 8));
                assert_eq!(elf.section_data(&text, 8).unwrap(), [0x90; 8]);
                assert_eq!(elf.section_data(&text, 7), None, "past the limit");
                let debug_frame = sections[2].clone();
                assert_eq!(
                    elf.section_data(&debug_frame, 1 << 20).unwrap(),
                    [7; 300],
                    "{what}"
                );
                assert_eq!(
                    elf.section_data(&debug_frame, 299),
                    None,
                    "decompressed past the limit"
                );
                assert_eq!(
                    elf.section_data(&sections[3].clone(), 1 << 20),
                    None,
                    "NOBITS"
                );
            }
        }
    }

    #[test]
    fn truncated_and_foreign_files_read_as_nothing() {
        let none = |_, _| None;
        assert!(Elf::parse(b"\x7fELF", none).is_none());
        assert!(Elf::parse(&[0u8; 64], none).is_none());
        assert!(
            Elf::parse(b"\x7fELF\x03\x01", none).is_none(),
            "a class that is not 1 or 2"
        );
        // A 64-bit header whose program headers lie past the end.
        let mut head = [0u8; 64];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[32] = 0xff;
        head[54] = 56;
        head[56] = 3;
        let mut elf = Elf::parse(&head, none).unwrap();
        assert_eq!(elf.program_headers(), None);
        // Program headers too small for their fields.
        head[54] = 8;
        assert_eq!(
            Elf::parse(&head, reader(&[0; 1024]))
                .unwrap()
                .program_headers(),
            None
        );
        // Cut anywhere, a whole file reads as nothing or as less, and never panics.
        let file = build(
            true,
            Endian::Little,
            &[(PT_NOTE, &note(Endian::Little, 3, b"GNU\0", &[1; 20]), 4)],
            &[(".eh_frame", 1, 2, 0x2000, &[1; 40])],
        );
        for cut in 0..file.len() {
            let part = &file[..cut];
            if let Some(mut elf) = Elf::parse(part, reader(part)) {
                let _ = elf.program_headers();
                if let Some(sections) = elf.sections() {
                    for s in &sections {
                        let _ = elf.section_data(s, 1 << 20);
                    }
                }
            }
        }
        assert!(decompress(Header::parse(&file).unwrap(), &[0u8; 8], 1 << 20).is_none());
        // A note whose sizes claim more than the bytes hold ends the list.
        let mut bad = note(Endian::Little, 3, b"GNU\0", &[1; 20]);
        bad[4] = 0xff;
        assert_eq!(notes(&bad, Endian::Little, 4).count(), 0);
    }

    /// `ElfN_Sym` entries (name offset, type, value, size) of `is64`'s size in `e`'s order.
    pub(crate) fn symbol_table(is64: bool, e: Endian, syms: &[(u32, u8, u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(name, kind, value, size) in syms {
            out.extend(int(e, name.into(), 4));
            // st_info: STB_GLOBAL in the high nibble, the type in the low one.
            let info = 0x10 | kind;
            if is64 {
                out.extend([info, 0]);
                out.extend(int(e, 1, 2)); // st_shndx
                out.extend(int(e, value, 8));
                out.extend(int(e, size, 8));
            } else {
                out.extend(int(e, value, 4));
                out.extend(int(e, size, 4));
                out.extend([info, 0]);
                out.extend(int(e, 1, 2));
            }
        }
        out
    }

    /// A file with code, a symbol table and its names, a compressed and an empty section, and
    /// a code section whose end lies past the address space: (file, the code).
    fn file_with_symbols(is64: bool, e: Endian) -> (Vec<u8>, Vec<u8>) {
        let code: Vec<u8> = (0..32).collect();
        let names = b"\0main\0_start\0data\0";
        let syms = symbol_table(
            is64,
            e,
            &[
                (0, 0, 0, 0),
                (1, STT_FUNC, 0x1010, 16),
                (6, STT_FUNC, 0x1020, 8),
                (13, 1, 0x3000, 4),
                // A name past the string table.
                (0xffff, STT_FUNC, 0x1028, 8),
            ],
        );
        let ent = if is64 { 24 } else { 16 };
        let sections = [
            TestSection {
                name: ".text",
                kind: SHT_PROGBITS,
                flags: 6,
                addr: 0x1010,
                bytes: &code,
                ..TestSection::default()
            },
            TestSection {
                name: ".symtab",
                kind: SHT_SYMTAB,
                bytes: &syms,
                link: 3,
                entsize: ent,
                ..TestSection::default()
            },
            TestSection {
                name: ".strtab",
                kind: 3,
                bytes: names,
                ..TestSection::default()
            },
            TestSection {
                name: ".zdata",
                kind: SHT_PROGBITS,
                flags: SHF_COMPRESSED,
                addr: 0x2000,
                bytes: &[0; 32],
                ..TestSection::default()
            },
            TestSection {
                name: ".bss",
                kind: SHT_NOBITS,
                addr: 0x3000,
                ..TestSection::default()
            },
            TestSection {
                name: ".wraps",
                kind: SHT_PROGBITS,
                addr: u64::MAX - 3,
                bytes: &[0; 8],
                ..TestSection::default()
            },
        ];
        (build_with(is64, e, &[], &sections), code)
    }

    #[test]
    fn symbols_and_code_by_address_of_every_class_and_byte_order() {
        for is64 in [false, true] {
            for e in [Endian::Little, Endian::Big] {
                let what = format!("64-bit {is64}, {e:?}");
                let (file, code) = file_with_symbols(is64, e);
                let mut elf = Elf::parse(&file, reader(&file)).expect(&what);
                let h = *elf.header();
                let sections = elf.sections().expect(&what);
                let symtab = sections[2].clone();
                assert_eq!(
                    (&symtab.name[..], symtab.link, symtab.entsize),
                    (&b".symtab"[..], 3, if is64 { 24 } else { 16 }),
                    "{what}"
                );
                let strtab = sections[symtab.link as usize].clone();
                assert_eq!(strtab.name, b".strtab");
                let table = elf.section_data(&symtab, 1 << 20).unwrap();
                let names = elf.section_data(&strtab, 1 << 20).unwrap();
                let found: Vec<_> = symbols(&table, &names, &h, symtab.entsize)
                    .map(|s| (s.name, s.kind, s.value, s.size))
                    .collect();
                assert_eq!(
                    found,
                    [
                        (&b""[..], 0, 0, 0),
                        (b"main", STT_FUNC, 0x1010, 16),
                        (b"_start", STT_FUNC, 0x1020, 8),
                        (b"data", 1, 0x3000, 4),
                        (b"", STT_FUNC, 0x1028, 8),
                    ],
                    "{what}"
                );
                // Entries smaller than an ElfN_Sym: none; larger ones, and bytes after the last
                // whole entry, are skipped over.
                assert_eq!(symbols(&table, &names, &h, 8).count(), 0);
                assert_eq!(symbols(&table, &names, &h, 0).count(), 0);
                let ent = symtab.entsize as usize;
                assert_eq!(symbols(&table, &names, &h, 2 * ent as u64).count(), 2);
                let cut = &table[..table.len() - 1];
                assert_eq!(symbols(cut, &names, &h, ent as u64).count(), 4);

                // Code by address: from .text only, all of it or nothing.
                assert_eq!(elf.read_addr(&sections, 0x1010, 16).unwrap(), code[..16]);
                assert_eq!(elf.read_addr(&sections, 0x1028, 8).unwrap(), code[24..]);
                assert_eq!(elf.read_addr(&sections, 0x1028, 9), None, "past .text");
                assert_eq!(elf.read_addr(&sections, 0x100f, 4), None, "before .text");
                assert_eq!(elf.read_addr(&sections, 0x2000, 4), None, "compressed");
                assert_eq!(elf.read_addr(&sections, 0x3000, 4), None, "NOBITS");
                assert_eq!(elf.read_addr(&sections, 0, 4), None, "not linked");
                assert_eq!(elf.read_addr(&sections, u64::MAX - 3, 2), None, "wraps");
                assert_eq!(elf.read_addr(&sections, u64::MAX, 2), None, "wraps");
            }
        }
    }

    #[test]
    fn a_file_with_symbols_cut_anywhere_reads_as_nothing_or_less() {
        let (file, _) = file_with_symbols(true, Endian::Little);
        for cut in 0..file.len() {
            let part = &file[..cut];
            let Some(mut elf) = Elf::parse(part, reader(part)) else {
                continue;
            };
            let h = *elf.header();
            let Some(sections) = elf.sections() else {
                continue;
            };
            for s in &sections {
                let table = elf.section_data(s, 1 << 20).unwrap_or_default();
                let names = sections
                    .get(s.link as usize)
                    .and_then(|t| elf.section_data(t, 1 << 20))
                    .unwrap_or_default();
                let _ = symbols(&table, &names, &h, s.entsize).count();
                let _ = elf.read_addr(&sections, s.addr, s.size);
            }
        }
    }

    #[test]
    fn own_executable_has_the_functions_readelf_lists() {
        let exe = std::env::current_exe().unwrap();
        let mut elf = of(File::open(&exe).unwrap()).unwrap();
        let h = *elf.header();
        let sections = elf.sections().unwrap();
        let symtab = sections.iter().find(|s| s.kind == SHT_SYMTAB).unwrap();
        let table = elf.section_data(symtab, 1 << 30).unwrap();
        let names = elf
            .section_data(&sections[symtab.link as usize], 1 << 30)
            .unwrap();
        let mut ours: Vec<(u64, u64, String)> = symbols(&table, &names, &h, symtab.entsize)
            .filter(|s| s.kind == STT_FUNC)
            .map(|s| {
                (
                    s.value,
                    s.size,
                    String::from_utf8_lossy(s.name).into_owned(),
                )
            })
            .collect();
        let Some(text) = readelf(&["-W", "-s"], &exe) else {
            return;
        };
        // Num: Value Size Type Bind Vis Ndx Name, in the .symtab part (after .dynsym's).
        let part = text.split("Symbol table '.symtab'").nth(1).unwrap();
        let mut theirs: Vec<(u64, u64, String)> = part
            .lines()
            .filter_map(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                (c.len() >= 8 && c[3] == "FUNC").then(|| {
                    let size = match c[2].strip_prefix("0x") {
                        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
                        None => c[2].parse().unwrap(),
                    };
                    // An undefined symbol's version (`memcpy@GLIBC_2.14`) is readelf's.
                    let name = c[7].split('@').next().unwrap().to_owned();
                    (u64::from_str_radix(c[1], 16).unwrap(), size, name)
                })
            })
            .collect();
        ours.sort();
        theirs.sort();
        assert!(ours.len() > 100, "{} functions", ours.len());
        assert_eq!(ours, theirs);
    }

    /// A file with `.dynsym`, `.dynstr`, `.rela.plt` and `.plt` (and `.plt.sec` at 0x2000 of
    /// `sec` bytes where given) for `machine`: four relocations, `foo`, an `IRELATIVE` one,
    /// `baz`, `bar`, of PLT entries 0 to 3. With `got`, a `.got.plt` and the relocations listed
    /// as libc lists them, the `IRELATIVE` one last.
    fn file_with_plt(
        e: Endian,
        machine: u16,
        plt: usize,
        sec: Option<usize>,
        got: bool,
    ) -> Vec<u8> {
        let names = b"\0foo\0bar\0baz\0";
        let syms = symbol_table(
            true,
            e,
            &[
                (0, 0, 0, 0),
                (1, STT_FUNC, 0, 0),
                (5, STT_FUNC, 0, 0),
                (9, STT_FUNC, 0, 0),
            ],
        );
        let (slot, irelative) = if machine == EM_AARCH64 {
            (R_AARCH64_JUMP_SLOT, 1032)
        } else {
            (R_X86_64_JUMP_SLOT, 37)
        };
        let mut rela = Vec::new();
        let mut relocs = vec![
            (0u64, 1u64, slot),
            (1, 0, irelative),
            (2, 3, slot),
            (3, 2, slot),
        ];
        if got {
            let irelative = relocs.remove(1);
            relocs.push(irelative);
        }
        for (entry, sym, kind) in relocs {
            // .got.plt at 0x4000: entry n's slot is its 3 + n.
            rela.extend(int(e, 0x4000 + 8 * (3 + entry), 8));
            rela.extend(int(e, sym << 32 | u64::from(kind), 8));
            rela.extend(int(e, 0, 8));
        }
        let (plt_code, sec_code) = (vec![0xcc; plt], vec![0xcc; sec.unwrap_or(0)]);
        let mut sections = vec![
            TestSection {
                name: ".dynsym",
                kind: SHT_DYNSYM,
                bytes: &syms,
                link: 2,
                entsize: 24,
                ..TestSection::default()
            },
            TestSection {
                name: ".dynstr",
                kind: 3,
                bytes: names,
                ..TestSection::default()
            },
            TestSection {
                name: ".rela.plt",
                kind: SHT_RELA,
                bytes: &rela,
                link: 1,
                entsize: 24,
                ..TestSection::default()
            },
            TestSection {
                name: ".plt",
                kind: SHT_PROGBITS,
                flags: 6,
                addr: 0x1020,
                bytes: &plt_code,
                ..TestSection::default()
            },
        ];
        if got {
            sections.push(TestSection {
                name: ".got.plt",
                kind: SHT_PROGBITS,
                flags: 3,
                addr: 0x4000,
                bytes: &[0; 8 * 7],
                ..TestSection::default()
            });
        }
        if sec.is_some() {
            sections.push(TestSection {
                name: ".plt.sec",
                kind: SHT_PROGBITS,
                flags: 6,
                addr: 0x2000,
                bytes: &sec_code,
                ..TestSection::default()
            });
        }
        let mut file = build_with(true, e, &[], &sections);
        file[18..20].copy_from_slice(&int(e, machine.into(), 2));
        file
    }

    /// The PLT entries of `file` as (address, name).
    fn plt_of(file: &[u8]) -> Option<Vec<(u64, String)>> {
        let mut elf = Elf::parse(file, reader(file))?;
        let sections = elf.sections()?;
        let plt = elf.plt(&sections)?;
        let names = elf.section_data(&sections[plt.strings], 1 << 20)?;
        Some(
            plt.entries
                .iter()
                .map(|p| {
                    let name = string_at(&names, p.name);
                    // Read alone, as the profiler reads it, the same.
                    let alone = elf.string(&sections[plt.strings], p.name, 1 << 20);
                    assert_eq!(alone.as_deref(), Some(name), "{}", p.name);
                    (p.addr, String::from_utf8_lossy(name).into_owned())
                })
                .collect(),
        )
    }

    #[test]
    fn plt_entries_are_named_by_their_relocations_in_each_layout() {
        let named = |v: &[(u64, &str)]| -> Vec<(u64, String)> {
            v.iter().map(|&(a, n)| (a, n.to_owned())).collect()
        };
        for (e, got) in [Endian::Little, Endian::Big]
            .into_iter()
            .flat_map(|e| [(e, false), (e, true)])
        {
            // x86-64 without .plt.sec: entry 0 is the resolver's, relocation n is entry n + 1;
            // the IRELATIVE slot is an entry but no name.
            let file = file_with_plt(e, EM_X86_64, 5 * 16, None, got);
            assert_eq!(
                plt_of(&file).unwrap(),
                named(&[(0x1030, "foo"), (0x1050, "baz"), (0x1060, "bar")]),
                "{e:?}, .got.plt {got}"
            );
            // With .plt.sec (IBT): relocation n is .plt.sec's entry n; .plt holds the
            // resolver's code only.
            let file = file_with_plt(e, EM_X86_64, 5 * 16, Some(4 * 16), got);
            assert_eq!(
                plt_of(&file).unwrap(),
                named(&[(0x2000, "foo"), (0x2020, "baz"), (0x2030, "bar")])
            );
            // A section too short for its relocations: the entries past its end are left out.
            let file = file_with_plt(e, EM_X86_64, 5 * 16, Some(3 * 16 + 8), got);
            assert_eq!(
                plt_of(&file).unwrap(),
                named(&[(0x2000, "foo"), (0x2020, "baz")])
            );
            // AArch64: a 32-byte header, then 16 bytes an entry; no .plt.sec there.
            let file = file_with_plt(e, EM_AARCH64, 32 + 4 * 16, Some(4 * 16), got);
            assert_eq!(
                plt_of(&file).unwrap(),
                named(&[(0x1040, "foo"), (0x1060, "baz"), (0x1070, "bar")])
            );
            // Another machine: nothing.
            let mut file = file_with_plt(e, EM_X86_64, 5 * 16, None, got);
            file[18..20].copy_from_slice(&int(e, 3, 2));
            assert_eq!(plt_of(&file), None);
        }
        // Cut anywhere: nothing or less, never a panic.
        let file = file_with_plt(Endian::Little, EM_X86_64, 5 * 16, Some(4 * 16), true);
        for cut in 0..file.len() {
            let _ = plt_of(&file[..cut]);
        }
    }

    #[test]
    fn plt_got_entries_are_named_by_the_got_slot_they_jump_through() {
        let e = Endian::Little;
        let names = b"\0foo\0bar\0";
        let syms = symbol_table(
            true,
            e,
            &[(0, 0, 0, 0), (1, STT_FUNC, 0, 0), (5, STT_FUNC, 0, 0)],
        );
        let rela = |relocs: &[(u64, u64, u32)]| {
            let mut out = Vec::new();
            for &(offset, sym, kind) in relocs {
                out.extend(int(e, offset, 8));
                out.extend(int(e, sym << 32 | u64::from(kind), 8));
                out.extend(int(e, 0, 8));
            }
            out
        };
        // GLOB_DAT: foo's address at 0x5000, bar's at 0x5008; a RELATIVE one (8) at 0x6000.
        let dyn_relocs = rela(&[(0x5000, 1, 6), (0x5008, 2, 6), (0x6000, 0, 8)]);
        // `jmp *disp32(%rip)` then `xchg %ax,%ax`: to bar's slot, foo's, one with no symbol.
        let mut got_code = Vec::new();
        for (at, slot) in [(0x3000u64, 0x5008u64), (0x3008, 0x5000), (0x3010, 0x6000)] {
            got_code.extend([0xff, 0x25]);
            got_code.extend(((slot - (at + 6)) as u32).to_le_bytes());
            got_code.extend([0x66, 0x90]);
        }
        let section = |name, kind, addr, bytes, link, entsize| TestSection {
            name,
            kind,
            addr,
            bytes,
            link,
            entsize,
            ..TestSection::default()
        };
        let plt_code = [0xcc; 16];
        let file = build_with(
            true,
            e,
            &[],
            &[
                section(".dynsym", SHT_DYNSYM, 0, &syms, 2, 24),
                section(".dynstr", 3, 0, names, 0, 0),
                section(".rela.plt", SHT_RELA, 0, &[], 1, 24),
                section(".plt", SHT_PROGBITS, 0x1020, &plt_code, 0, 16),
                section(".rela.dyn", SHT_RELA, 0, &dyn_relocs, 1, 24),
                section(".plt.got", SHT_PROGBITS, 0x3000, &got_code, 0, 8),
            ],
        );
        assert_eq!(
            plt_of(&file).unwrap(),
            [(0x3000, "bar".to_owned()), (0x3008, "foo".to_owned())]
        );
        for cut in 0..file.len() {
            let _ = plt_of(&file[..cut]);
        }
    }

    /// The PLT entries of a library of this machine's are those objdump names `name@plt`.
    #[test]
    fn a_system_librarys_plt_entries_are_those_objdump_names() {
        let dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"];
        let libs: Vec<std::path::PathBuf> = dirs
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                (n.starts_with("libpython3.") && n.ends_with(".so.1.0")) || n == "libc.so.6"
            })
            .collect();
        if libs.is_empty() {
            println!("skipped: no libpython3.*.so.1.0 or libc.so.6 here");
            return;
        }
        for lib in &libs {
            let objdump = match std::process::Command::new("objdump")
                .args([
                    "-d",
                    "--section=.plt",
                    "--section=.plt.sec",
                    "--section=.plt.got",
                ])
                .arg(lib)
                .output()
            {
                Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
                _ => {
                    println!("skipped: objdump is not installed");
                    return;
                }
            };
            // `0000000000103030 <PyList_New@plt>:`, without IRELATIVE slots
            // (`*ABS*+0x...@plt`).
            let mut theirs: Vec<(u64, String)> = objdump
                .lines()
                .filter_map(|l| {
                    let (addr, rest) = l.split_once(" <")?;
                    let name = rest.strip_suffix("@plt>:")?;
                    let addr = u64::from_str_radix(addr, 16).ok()?;
                    (!name.starts_with("*ABS*")).then(|| (addr, name.to_owned()))
                })
                .collect();
            let file = std::fs::read(lib).unwrap();
            let mut ours = plt_of(&file).unwrap();
            ours.sort();
            theirs.sort();
            assert!(!ours.is_empty(), "{lib:?}");
            assert_eq!(ours, theirs, "{lib:?}");
            println!("{lib:?}: {} PLT entries as objdump names them", ours.len());
        }
    }

    #[test]
    fn notes_in_a_segment_aligned_to_8_are_padded_to_8() {
        // namesz 5 ("GNUX\0"): padded to 8 in an 8-aligned segment, the descriptor at 20.
        let mut seg = Vec::new();
        for v in [5u32, 4, 1] {
            seg.extend_from_slice(&v.to_le_bytes());
        }
        seg.extend_from_slice(b"GNUX\0\0\0\0");
        seg.extend_from_slice(&[9, 9, 9, 9, 0, 0, 0, 0]);
        // namesz 8: the same padded to 4 or 8.
        seg.extend_from_slice(&note(Endian::Little, 3, b"GNUGNUX\0", &[2; 8]));
        let found: Vec<Note> = notes(&seg, Endian::Little, 8).collect();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].desc, [9; 4]);
        assert_eq!((found[1].kind, found[1].desc), (3, &[2; 8][..]));
    }
}
