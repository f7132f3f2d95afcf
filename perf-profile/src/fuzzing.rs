//! The parsers of what other users' processes control, for the fuzz targets in `fuzz/` (feature
//! `fuzzing`; not part of the API). Each function takes arbitrary bytes, opens no file, and panics
//! only where a parser broke a promise: a panic inside a parser, or an answer its documentation
//! rules out, is a bug the fuzzer reports.

use crate::elf::{self, Elf, MAX_TABLE};

/// Section and table reads are limited to this: the fuzzer's inputs are small, and a claim of
/// more must fail rather than allocate it.
const MAX: u64 = 1 << 20;

/// `bytes` as an ELF [`Source`](elf::Source): what a file of these bytes reads.
fn reader(bytes: &[u8]) -> impl FnMut(u64, u64) -> Option<Vec<u8>> + '_ {
    |offset, len| {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        bytes.get(start..end).map(<[u8]>::to_vec)
    }
}

/// Up to 8 addresses or offsets taken from the file's last bytes, for the lookups.
fn probes(data: &[u8]) -> Vec<u64> {
    let tail = &data[data.len().saturating_sub(64)..];
    tail.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// An ELF file's bytes through every reader of ELF files: header, program headers and their notes,
/// the build id, section headers and names, every section's (decompressed) bytes, symbol tables,
/// code by address, PLT entries, the unwind sections and load bias, and the `--symbolize functions`
/// table.
pub fn elf(data: &[u8]) {
    let Some(mut file) = Elf::parse(data, reader(data)) else {
        return;
    };
    let header = *file.header();
    if let Some(phs) = file.program_headers() {
        for ph in &phs {
            if let Some(bytes) = file.read(ph.offset, ph.filesz, MAX_TABLE) {
                assert_eq!(
                    bytes.len() as u64,
                    ph.filesz,
                    "a read gives what it was asked"
                );
                for n in elf::notes(&bytes, header.endian, ph.align) {
                    assert!(n.name.len() + n.desc.len() <= bytes.len());
                }
            }
        }
    }
    if let Some(id) = Elf::parse(data, reader(data)).and_then(crate::maps::build_id::find) {
        assert!(id.len() <= data.len(), "a build id comes from the file");
    }
    let at = probes(data);
    if let Some(sections) = file.sections() {
        for s in &sections {
            let bytes = file.section_data(s, MAX);
            assert!(bytes.as_ref().is_none_or(|b| b.len() as u64 <= MAX));
            let names = sections
                .get(s.link as usize)
                .and_then(|t| file.section_data(t, MAX))
                .unwrap_or_default();
            for sym in elf::symbols(&bytes.unwrap_or_default(), &names, &header, s.entsize) {
                assert!(sym.name.len() <= names.len() && !sym.name.contains(&0));
            }
            let len = s.size.min(4096);
            if let Some(code) = file.read_addr(&sections, s.addr, len) {
                assert_eq!(code.len() as u64, len);
            }
        }
        for &addr in &at {
            if let Some(code) = file.read_addr(&sections, addr, 16) {
                assert_eq!(code.len(), 16);
            }
        }
        // PLT entries: one per address, in order, their names in a section the file has.
        if let Some(plt) = file.plt(&sections) {
            assert!(plt.strings < sections.len());
            assert!(plt.entries.windows(2).all(|w| w[0].addr < w[1].addr));
        }
    }
    if let Some(unwind) =
        Elf::parse(data, reader(data)).and_then(|e| crate::unwind::elf::parse(e, MAX))
    {
        let _ = unwind.has_tables();
        for w in at.windows(2) {
            let _ = unwind.bias(w[0], w[1]);
        }
    }
    if let Some(mut file) = Elf::parse(data, reader(data)) {
        crate::symbolize::function_table_of(&mut file, &at);
    }
}

/// A JIT map's text (`/tmp/perf-PID.map`): the symbols come out sorted, without overlaps, each
/// named, within the budget, whatever the text; a lookup finds the symbol holding the address.
pub fn perf_map(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let budget = crate::untrusted::Budget::new(MAX as usize);
    let mut at = probes(data);
    let Some((syms, _)) = crate::maps::perf_map::parse_and_look_up(&text, &budget, &[]) else {
        return;
    };
    at.extend(syms.iter().flat_map(|s| [s.0, s.1.wrapping_sub(1), s.1]));
    let (_, found) = crate::maps::perf_map::parse_and_look_up(&text, &budget, &at)
        .expect("the same text fits the same budget again");
    for (start, end, name) in &syms {
        assert!(start < end, "an empty range: {start:#x}..{end:#x}");
        assert!(!name.is_empty() && name.trim() == name);
    }
    for w in syms.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlapping or unsorted: {:?}", &w);
    }
    for (addr, found) in at.iter().zip(found) {
        let holder = syms.iter().find(|s| s.0 <= *addr && *addr < s.1);
        assert_eq!(found.as_deref(), holder.map(|s| &*s.2), "at {addr:#x}");
    }
}

/// The text of a `/proc/PID/maps` file, line by line, into an address space (with the build id
/// given, so that no file the text names is opened): every mapping found is the one at its start,
/// and compaction keeps them.
pub fn proc_maps(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut spaces = crate::maps::AddressSpaces::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        let Some(m) = crate::maps::parse_maps_line(line) else {
            continue;
        };
        assert!(m.start <= m.end);
        spaces.mmap(
            1,
            m.start,
            m.end - m.start,
            m.file_offset,
            &m.path,
            Some(vec![1]),
        );
        lines.push(m);
    }
    spaces.fork(1, 2);
    for m in lines.iter().filter(|m| m.end > m.start) {
        let id = spaces.find(1, m.start);
        let mapping = id.and_then(|id| spaces.mapping(id));
        assert!(
            mapping.is_some_and(|found| found.start <= m.start && m.start < found.end),
            "{:#x} is not found in its own mapping",
            m.start
        );
        assert_eq!(
            spaces.find(2, m.start),
            id,
            "a fork sees its parent's space"
        );
        assert_eq!(spaces.find(1, m.end), spaces.find(2, m.end));
    }
    let before: Vec<_> = lines.iter().map(|m| spaces.find(1, m.start)).collect();
    let remap = spaces.compact();
    for (m, old) in lines.iter().zip(before) {
        let new = spaces.find(1, m.start);
        assert_eq!(
            old.map(|o| remap.get(o.0 as usize).copied().flatten()),
            new.map(Some)
        );
    }
}

/// `/proc/kallsyms` text, parsed whole and read in pieces (as the capture reads it): the two agree
/// on text without carriage returns and whose lines fit the reader's buffer, and lookups find the
/// symbol at or below an address.
pub fn kallsyms(data: &[u8]) {
    use crate::maps::KernelSymbols;

    let text = String::from_utf8_lossy(data);
    let whole = KernelSymbols::parse(&text);
    // Three bytes at a time: lines are cut at every place.
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(3).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let pieces = KernelSymbols::read_from(Trickle(text.as_bytes()));
    let mut at = probes(data);
    at.extend([0, u64::MAX]);
    if let Some((lo, hi)) = whole.range() {
        assert!(lo <= hi);
        at.extend([lo, hi, lo.wrapping_sub(1)]);
    }
    for &addr in &at {
        let found = whole.find(addr);
        assert!(found.is_none_or(|s| s.addr <= addr));
        if let Some(pieces) = &pieces {
            if !text.contains('\r') {
                assert_eq!(
                    pieces.find(addr),
                    found,
                    "read in pieces differs at {addr:#x}"
                );
            }
        }
    }
}

#[cfg(feature = "push")]
/// Whether `value` holds a character that no message or `Debug` text of the credentials parser
/// has of its own: then finding it there means a value of the file was shown.
fn distinctive(value: &str) -> bool {
    value.len() >= 4
        && value
            .chars()
            .any(|c| !c.is_ascii_alphanumeric() && !" =(),:'\"-._[]{}".contains(c))
}

/// A `--credentials` file's text: accepted or refused, and neither its `Debug` text nor the error
/// shows a secret of it (a token, password or header value).
#[cfg(feature = "push")]
pub fn credentials(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("credentials");
    // The values of `key = value` lines; a user name is shown, the rest are secrets.
    let values = || {
        text.lines().filter_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            Some((k.trim(), v.trim()))
        })
    };
    let users: Vec<&str> = values()
        .filter(|(k, _)| *k == "user")
        .map(|v| v.1)
        .collect();
    match crate::push::Credentials::parse_file(text, path) {
        Ok(c) => {
            let shown = format!("{c:?}");
            for secret in c.secrets() {
                if distinctive(&secret) && !users.iter().any(|u| u.contains(&*secret)) {
                    assert!(!shown.contains(&secret), "Debug shows a secret: {shown}");
                }
            }
        }
        Err(e) => {
            let message = e.to_string();
            // A header's name (before its ':') is shown when it is malformed.
            let names: Vec<&str> = values()
                .filter(|(k, _)| *k == "header")
                .filter_map(|(_, v)| v.split_once(':'))
                .map(|(n, _)| n)
                .collect();
            for (_, value) in values() {
                if distinctive(value) && !names.iter().any(|n| n.contains(value)) {
                    assert!(
                        !message.contains(value),
                        "the error shows a value: {message}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every seed of `fuzz/seeds/TARGET/` (small real files, and each input that once made a target
    /// fail, kept there) through its target, in every `cargo test`.
    #[test]
    fn the_fuzz_seeds_pass_their_targets() {
        let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
        if !seeds.exists() {
            // The published crate leaves out fuzz/.
            println!("skipped: no {}", seeds.display());
            return;
        }
        type Target = fn(&[u8]);
        let targets: [(&str, Target); 5] = [
            ("elf", super::elf),
            ("perf_map", super::perf_map),
            ("proc_maps", super::proc_maps),
            ("kallsyms", super::kallsyms),
            ("credentials", super::credentials),
        ];
        for (name, target) in targets {
            let mut n = 0;
            for entry in std::fs::read_dir(seeds.join(name)).unwrap() {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let run = std::panic::catch_unwind(|| target(&data));
                assert!(run.is_ok(), "{name} fails on {}", path.display());
                n += 1;
            }
            assert!(n >= 2, "{name}: {n} seeds");
        }
    }
}
