//! [`Mode::Local`](super::Mode::Local)'s names for a file without DWARF, in one pass over its
//! symbol tables, when nothing of the file is kept afterwards (a capture's final snapshot).
//!
//! blazesym names such a file from its ELF symbols only, but first sorts the whole symbol table
//! by address (`/usr/bin/node`: 109 848 `.symtab` entries), a cost that pays off over many
//! lookups and is pure waste when the file is asked for a handful of addresses once. Measured on
//! a 5 s system-wide capture beside 20 busy programs (`perf record --call-graph dwarf` on the
//! profiler): blazesym was 18% of the profiler's CPU, more than half of it that sort.
//!
//! Here each symbol is read once and placed by a binary search over the k addresses asked for
//! (O(n log k), no sort of the n symbols, nothing allocated per symbol), with blazesym 0.2's rules
//! (its `elf::parser::find_sym`): the symbols of types `NOTYPE`, `OBJECT`, `FUNC` and `IFUNC` are
//! ordered by address; an address belongs to the group of those at the greatest address at or
//! below it (undefined ones count for that, but are never the answer); in that group the largest
//! size wins when it covers the address, else one of size 0 (in `.dynsym` only at its exact
//! address); `.symtab` first, `.dynsym` when `.symtab` has nothing there; a name that cannot be
//! read is no name. Where blazesym's choice among symbols of the same address and size depends on
//! the order its unstable sort leaves them in (`fgetc`, `getc`, `_IO_getc`), and their names
//! differ once demangled, the file goes to blazesym as before: the profile names what it named.

use std::fs::File;

use super::{names_another_file, plt_names, Line};
use crate::elf::{Elf, SectionHeader, Source};

/// `sh_type` of a section that takes no room in the file; `sh_flags` of a compressed one.
const SHT_NOBITS: u32 = 8;
const SHF_COMPRESSED: u64 = 0x800;
/// Symbols read at a time.
const PIECE: u64 = 2048;
/// The longest name read (longer: no name, where blazesym would read it whole).
const MAX_NAME: u64 = 1 << 20;
/// Symbols of one address and size whose names are told apart; more: the file goes to blazesym.
const TIES: usize = 4;

/// What one address is named by the symbol tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// No symbol: blazesym's unknown address.
    Nothing,
    /// This name, demangled as blazesym demangles it.
    Name(String),
    /// Symbols whose names differ, among which blazesym's pick depends on its sort's order:
    /// their names as far as read (`None`: unreadable), and whether those are all of them.
    Ambiguous(Vec<Option<String>>, bool),
}

/// Whether blazesym reads only the ELF symbols of the file with `sections`: it names another file
/// for its debug information (then local mode does not let blazesym read DWARF at all), or it has
/// no DWARF section.
pub(crate) fn has_no_dwarf(sections: &[SectionHeader]) -> bool {
    names_another_file(sections)
        || !sections
            .iter()
            .any(|s| s.name.starts_with(b".debug_") || s.name.starts_with(b".zdebug_"))
}

/// The lines of file offsets `offsets` of the ELF file `file` where blazesym would name them
/// from its ELF symbols only and pick the same names (`name@plt` for PLT stubs included);
/// `None` for an offset left to blazesym (in a compilation unit of its DWARF, or where its pick
/// depends on its sort's order), and for the whole file where it has DWARF this cannot place
/// (units without `.debug_aranges`, compressed or unusual sections), a `.gnu_debugdata` table, or
/// a table or header blazesym could not read either.
pub(crate) fn local(file: &File, offsets: &[u64]) -> Option<Vec<Option<Vec<Line>>>> {
    let mut elf = crate::elf::of(file)?;
    let sections = elf.sections()?;
    // Where DWARF names an address, blazesym names it (file:line, inlined functions); elsewhere
    // it names it from the ELF symbols, as here.
    let dwarf = if has_no_dwarf(&sections) {
        Vec::new()
    } else {
        units_ranges(&mut elf, &sections)?
    };
    let loads: Vec<_> = elf
        .program_headers()?
        .into_iter()
        .filter(|p| p.kind == crate::elf::PT_LOAD)
        .collect();
    let found = find(&mut elf, &sections, offsets)?;
    let mut lines: Vec<Option<Vec<Line>>> = found
        .into_iter()
        .zip(offsets)
        .map(|(f, &o)| {
            let addr = loads
                .iter()
                .find(|p| o >= p.offset && o - p.offset < p.filesz)
                .map(|p| (o - p.offset).wrapping_add(p.vaddr));
            if addr.is_some_and(|a| dwarf.iter().any(|&(b, e)| b <= a && a < e)) {
                return None;
            }
            match f {
                Found::Nothing => Some(Vec::new()),
                Found::Name(function) => Some(vec![Line {
                    function,
                    file: None,
                    line: None,
                }]),
                Found::Ambiguous(..) => None,
            }
        })
        .collect();
    for (i, name) in plt_names(file, offsets) {
        if let Some(l) = lines.get_mut(i) {
            *l = Some(vec![Line {
                function: name,
                file: None,
                line: None,
            }]);
        }
    }
    Some(lines)
}

/// The address ranges of the compilation units of the file's DWARF as blazesym finds them, when
/// `.debug_aranges` gives every unit's (blazesym reads those, and parses the units' entries only
/// for a unit it does not list): (start, end). `None` where a unit is not listed, or the sections
/// are compressed or of a form not read here (blazesym reads the file then).
fn units_ranges<S: Source>(
    elf: &mut Elf<S>,
    sections: &[SectionHeader],
) -> Option<Vec<(u64, u64)>> {
    /// The most bytes of `.debug_aranges` read (a few KiB to a few MiB).
    const MAX_ARANGES: u64 = 64 << 20;
    if sections.iter().any(|s| {
        s.name.starts_with(b".zdebug_")
            || (s.name.starts_with(b".debug_") && s.flags & SHF_COMPRESSED != 0)
    }) {
        return None;
    }
    let e = elf.header().endian;
    let by_name = |name: &[u8]| sections.iter().skip(1).find(|s| s.name == name);
    // The units that need ranges: compile units (and skeleton ones), not type or partial units.
    let mut units = Vec::new();
    if let Some(info) = by_name(b".debug_info").filter(|s| s.kind != SHT_NOBITS) {
        let mut at = 0u64;
        while at < info.size {
            let head = elf.read(
                info.offset.checked_add(at)?,
                info.size.min(at + 24) - at,
                24,
            )?;
            let (length, ils) = match e.u32(&head, 0)? {
                0xffff_ffff => (e.u64(&head, 4)?, 12u64),
                n if n >= 0xffff_fff0 => return None,
                n => (u64::from(n), 4),
            };
            let version = e.u16(&head, ils as usize)?;
            let kind = match version {
                2..=4 => 1,
                5 => *head.get(ils as usize + 2)?,
                _ => return None,
            };
            match kind {
                1 | 4 | 5 => units.push(at),
                2 | 3 | 6 => {}
                _ => return None,
            }
            at = at.checked_add(ils)?.checked_add(length)?;
            if at > info.size {
                return None;
            }
        }
    }
    let aranges = match by_name(b".debug_aranges") {
        Some(s) => elf.section_data(s, MAX_ARANGES)?,
        None => Vec::new(),
    };
    let mut ranges = Vec::new();
    let mut listed = vec![false; units.len()];
    let mut at = 0usize;
    while at < aranges.len() {
        let set = &aranges[at..];
        let (length, ils, word): (usize, usize, usize) = match e.u32(set, 0)? {
            0xffff_ffff => (usize::try_from(e.u64(set, 4)?).ok()?, 12, 8),
            n if n >= 0xffff_fff0 => return None,
            n => (n as usize, 4, 4),
        };
        let set = set.get(ils..ils.checked_add(length)?)?;
        if !matches!(e.u16(set, 0)?, 2 | 3) {
            return None;
        }
        let unit = if word == 8 {
            e.u64(set, 2)?
        } else {
            u64::from(e.u32(set, 2)?)
        };
        let size = usize::from(*set.get(2 + word)?);
        if !matches!(size, 4 | 8) || *set.get(3 + word)? != 0 {
            return None;
        }
        let tuple = 2 * size;
        let header = ils + 2 + word + 2;
        let mut t = header.div_ceil(tuple) * tuple - ils;
        let unit = units.binary_search(&unit).ok();
        while t + tuple <= set.len() {
            let read = |at: usize| {
                if size == 8 {
                    e.u64(set, at)
                } else {
                    e.u32(set, at).map(u64::from)
                }
            };
            let (begin, len) = (read(t)?, read(t + size)?);
            t += tuple;
            let max = if size == 8 {
                u64::MAX
            } else {
                u64::from(u32::MAX)
            };
            // Tombstones (of discarded code): -1 and -2 in the address's size.
            if len == 0 || begin >= max - 1 {
                continue;
            }
            let end = begin.checked_add(len).filter(|&end| end <= max)?;
            if let Some(u) = unit {
                listed[u] = true;
                ranges.push((begin, end));
            }
        }
        at = at.checked_add(ils)?.checked_add(length)?;
    }
    listed.iter().all(|&l| l).then_some(ranges)
}

/// The best symbols of one size (the largest, or 0) of a group: their size, how many distinct
/// name offsets (more than [`TIES`]: the first are kept), and those.
#[derive(Clone, Copy, Debug, Default)]
struct Best {
    size: u64,
    n: usize,
    names: [u32; TIES],
}

impl Best {
    fn add(&mut self, size: u64, name: u32) {
        if self.n == 0 || size > self.size {
            let mut names = [0; TIES];
            names[0] = name;
            *self = Self { size, n: 1, names };
        } else if size == self.size && !self.names[..self.n.min(TIES)].contains(&name) {
            if let Some(slot) = self.names.get_mut(self.n) {
                *slot = name;
            }
            self.n += 1;
        }
    }
}

/// The symbols at the greatest address seen of those whose first address asked for at or above
/// them is one address: the group that names it and those after it up to the next group.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    seen: bool,
    value: u64,
    /// Defined symbols of a size, the largest kept; defined ones of size 0.
    sized: Best,
    zero: Best,
}

/// Each of `offsets`' symbol as blazesym's ELF resolver finds it; `None` where a table or the
/// program headers cannot be read as blazesym reads them (it is left to blazesym).
pub(crate) fn find<S: Source>(
    elf: &mut Elf<S>,
    sections: &[SectionHeader],
    offsets: &[u64],
) -> Option<Vec<Found>> {
    if sections.iter().any(|s| s.name == b".gnu_debugdata") {
        return None;
    }
    let loads: Vec<_> = elf
        .program_headers()?
        .into_iter()
        .filter(|p| p.kind == crate::elf::PT_LOAD)
        .collect();
    // (address, index in `offsets`), by address.
    let mut addrs: Vec<(u64, usize)> = offsets
        .iter()
        .enumerate()
        .filter_map(|(i, &o)| {
            let p = loads
                .iter()
                .find(|p| o >= p.offset && o - p.offset < p.filesz)?;
            Some(((o - p.offset).wrapping_add(p.vaddr), i))
        })
        .collect();
    addrs.sort_unstable();
    let mut found = vec![Found::Nothing; offsets.len()];
    let mut open = vec![true; addrs.len()];
    let by_name = |name: &[u8]| sections.iter().skip(1).find(|s| s.name == name);
    for (table, strings, symtab) in [
        (&b".symtab"[..], &b".strtab"[..], true),
        (b".dynsym", b".dynstr", false),
    ] {
        if !open.contains(&true) {
            break;
        }
        let Some(s) = by_name(table).filter(|s| s.kind != SHT_NOBITS) else {
            continue;
        };
        let strs = by_name(strings);
        if s.flags & SHF_COMPRESSED != 0
            || strs.is_some_and(|t| t.kind == SHT_NOBITS || t.flags & SHF_COMPRESSED != 0)
        {
            return None;
        }
        let groups = scan(elf, s, &addrs)?;
        let mut group: Option<&Group> = None;
        for (j, &(addr, i)) in addrs.iter().enumerate() {
            if groups[j].seen {
                group = Some(&groups[j]);
            }
            let Some(g) = group.filter(|_| open[j]) else {
                continue;
            };
            let best = if g.sized.n > 0 && addr < g.value.wrapping_add(g.sized.size) {
                &g.sized
            } else if g.zero.n > 0 && (symtab || addr == g.value) {
                &g.zero
            } else {
                continue;
            };
            open[j] = false;
            found[i] = named(elf, strs, best);
        }
    }
    Some(found)
}

/// What `best` names: one name (the same for all, demangled), or why not.
fn named<S: Source>(elf: &mut Elf<S>, strs: Option<&SectionHeader>, best: &Best) -> Found {
    let names: Vec<Option<String>> = best.names[..best.n.min(TIES)]
        .iter()
        .map(|&at| strs.and_then(|t| name_at(elf, t, at)).map(|n| demangle(&n)))
        .collect();
    if best.n > TIES || names.windows(2).any(|w| w[0] != w[1]) {
        return Found::Ambiguous(names, best.n <= TIES);
    }
    match names.into_iter().next().flatten() {
        Some(name) => Found::Name(name),
        None => Found::Nothing,
    }
}

/// One pass over the symbol table `s`: for each of `addrs` (sorted) the group of symbols at the
/// greatest address whose first address asked for at or above it is that one (not seen: none).
fn scan<S: Source>(
    elf: &mut Elf<S>,
    s: &SectionHeader,
    addrs: &[(u64, usize)],
) -> Option<Vec<Group>> {
    let crate::elf::Header {
        is64, endian: e, ..
    } = *elf.header();
    let entry: u64 = if is64 { 24 } else { 16 };
    if !s.size.is_multiple_of(entry) {
        return None;
    }
    let mut groups = vec![Group::default(); addrs.len()];
    let Some(&(highest, _)) = addrs.last() else {
        return Some(groups);
    };
    // The group of the symbol before: a table lists a file's symbols mostly in address order,
    // so the next one's is mostly the same, found by two comparisons rather than a search.
    let mut last = 0;
    let mut at = 0;
    while at < s.size {
        let len = (s.size - at).min(PIECE * entry);
        let piece = elf.read(s.offset.checked_add(at)?, len, len)?;
        at += len;
        for sym in piece.chunks_exact(entry as usize) {
            // Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64;
            // Elf32_Sym: name u32, value u32, size u32, info u8, other u8, shndx u16.
            let (name, info, shndx, value, size) = if is64 {
                (
                    e.u32(sym, 0)?,
                    sym[4],
                    e.u16(sym, 6)?,
                    e.u64(sym, 8)?,
                    e.u64(sym, 16)?,
                )
            } else {
                (
                    e.u32(sym, 0)?,
                    sym[12],
                    e.u16(sym, 14)?,
                    u64::from(e.u32(sym, 4)?),
                    u64::from(e.u32(sym, 8)?),
                )
            };
            // STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_GNU_IFUNC: what blazesym orders by address.
            if !matches!(info & 0xf, 0 | 1 | 2 | 10) {
                continue;
            }
            if value > highest {
                continue;
            }
            // The first address asked for at or above `value`.
            let i = if addrs[last].0 >= value && (last == 0 || addrs[last - 1].0 < value) {
                last
            } else {
                addrs.partition_point(|&(a, _)| a < value)
            };
            last = i;
            let Some(g) = groups.get_mut(i) else {
                continue;
            };
            if !g.seen || value > g.value {
                *g = Group {
                    seen: true,
                    value,
                    ..Group::default()
                };
            } else if value < g.value {
                continue;
            }
            // Undefined (SHN_UNDEF): it makes the group, it names nothing.
            if shndx == 0 {
                continue;
            }
            if size == 0 {
                g.zero.add(0, name);
            } else {
                g.sized.add(size, name);
            }
        }
    }
    Some(groups)
}

/// The NUL-terminated UTF-8 string at `at` of the string table `t`, as blazesym reads a symbol's
/// name; `None` where it would fail (past the table, no NUL in it, not UTF-8).
fn name_at<S: Source>(elf: &mut Elf<S>, t: &SectionHeader, at: u32) -> Option<String> {
    let left = t.size.checked_sub(u64::from(at)).filter(|&n| n > 0)?;
    let start = t.offset.checked_add(u64::from(at))?;
    let cap = left.min(MAX_NAME);
    let mut len = cap.min(256);
    loop {
        let mut bytes = elf.read(start, len, cap)?;
        if let Some(end) = bytes.iter().position(|&b| b == 0) {
            bytes.truncate(end);
            return String::from_utf8(bytes).ok();
        }
        if len == cap {
            return None;
        }
        len = len.saturating_mul(4).min(cap);
    }
}

/// `name` demangled as blazesym does it for a symbol of no known language: Rust's scheme, else
/// C++'s (whatever the name starts with), else as it is.
pub(crate) fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| name.to_owned())
}
