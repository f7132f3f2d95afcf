//! The kernel's JSON event tables (`tools/perf/pmu-events/arch`), compiled into a compact table
//! by `cargo xtask pmu-events` (format in `xtask/src/pmu_events.rs`), and the CPU model that
//! selects one, as perf selects it: the x86 cpuid string (`GenuineIntel-6-97-2`, matched against
//! each model's regular expression) or the arm64 MIDR (variant and revision ignored).

use perf_core::fork::Lock;

/// One event of the table.
#[derive(Copy, Clone, Debug)]
pub(crate) struct JsonEvent {
    pub name: &'static str,
    /// `""` for the core PMU, else a PMU name (`cpu_core`, `uncore_imc`, `amd_df`).
    pub pmu: &'static str,
    pub topic: &'static str,
    pub terms: &'static str,
    pub desc: &'static str,
    /// `ScaleUnit`, e.g. `64Bytes`; `""` when none.
    pub scale_unit: &'static str,
    pub deprecated: bool,
}

struct Model {
    arm64: bool,
    cpuid: &'static str,
    dir: &'static str,
    events: std::ops::Range<usize>,
    /// Decoded on first use: only the models a machine asks for cost memory. A fork-safe [`Lock`]
    /// rather than a `OnceLock`, whose initialisation a `fork()` could strand in the child.
    decoded: Lock<Option<&'static [JsonEvent]>>,
}

struct Table {
    strings: Vec<&'static str>,
    models: Vec<Model>,
    /// Where the event records start in the blob, and how many there are.
    events_at: usize,
    n_events: usize,
}

#[cfg(feature = "pmu-events")]
static BLOB: &[u8] = include_bytes!("pmu_events.bin");
#[cfg(not(feature = "pmu-events"))]
static BLOB: &[u8] = b"";

fn table() -> &'static Table {
    // Decoded once per process (a fork child that finds the decoding stranded decodes again).
    static T: Lock<Option<&'static Table>> = Lock::new(None);
    let mut slot = T.lock();
    if let Some(t) = *slot {
        return t;
    }
    let t: &'static Table = Box::leak(Box::new(decode(BLOB).unwrap_or(Table {
        strings: Vec::new(),
        models: Vec::new(),
        events_at: 0,
        n_events: 0,
    })));
    *slot = Some(t);
    t
}

/// Whether perf-event was built with the tables (the `pmu-events` feature).
#[cfg(all(test, feature = "pmu-events"))]
fn available() -> bool {
    !table().models.is_empty()
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn u(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.b.get(self.i)?;
            self.i += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.b.get(self.i)?;
        self.i += 1;
        Some(b)
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.i..self.i.checked_add(n)?)?;
        self.i += n;
        Some(s)
    }
}

fn decode(b: &'static [u8]) -> Option<Table> {
    let rest = b.strip_prefix(b"PMUEVT01")?;
    let mut r = Reader { b: rest, i: 0 };
    let n = usize::try_from(r.u()?).ok()?;
    let mut strings: Vec<&'static str> = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        let len = usize::try_from(r.u()?).ok()?;
        strings.push(std::str::from_utf8(r.bytes(len)?).ok()?);
    }
    let s = |i: u64| -> Option<&'static str> { strings.get(usize::try_from(i).ok()?).copied() };
    let nm = usize::try_from(r.u()?).ok()?;
    let mut models = Vec::with_capacity(nm.min(1 << 16));
    for _ in 0..nm {
        let arm64 = r.byte()? == 1;
        let cpuid = s(r.u()?)?;
        let dir = s(r.u()?)?;
        let first = usize::try_from(r.u()?).ok()?;
        let count = usize::try_from(r.u()?).ok()?;
        models.push(Model {
            arm64,
            cpuid,
            dir,
            events: first..first.checked_add(count)?,
            decoded: Lock::new(None),
        });
    }
    let n_events = usize::try_from(r.u()?).ok()?;
    if models.iter().any(|m| m.events.end > n_events) {
        return None;
    }
    let events_at = 8 + r.i;
    Some(Table {
        strings,
        models,
        events_at,
        n_events,
    })
}

impl Table {
    /// Decodes events `range` (they are walked from the first: records have no fixed size).
    fn events(&self, range: std::ops::Range<usize>) -> Option<Vec<JsonEvent>> {
        let mut r = Reader {
            b: BLOB.get(self.events_at..)?,
            i: 0,
        };
        let s = |i: u64| -> Option<&'static str> {
            self.strings.get(usize::try_from(i).ok()?).copied()
        };
        let mut out = Vec::with_capacity(range.len());
        for k in 0..range.end.min(self.n_events) {
            if k < range.start {
                for _ in 0..6 {
                    r.u()?;
                }
                r.byte()?;
                continue;
            }
            out.push(JsonEvent {
                name: s(r.u()?)?,
                pmu: s(r.u()?)?,
                topic: s(r.u()?)?,
                terms: s(r.u()?)?,
                desc: s(r.u()?)?,
                scale_unit: s(r.u()?)?,
                deprecated: r.byte()? & 1 != 0,
            });
        }
        Some(out)
    }
}

/// A CPU model as perf identifies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuId {
    /// x86: `vendor-family-model-stepping`, family in decimal, model and stepping in hex
    /// (`GenuineIntel-6-97-2`, `AuthenticAMD-25-1-1`).
    X86(String),
    /// arm64: `MIDR_EL1`.
    Midr(u64),
}

impl CpuId {
    /// This machine's: `/proc/cpuinfo` on x86, CPU 0's `midr_el1` on arm64.
    pub fn current() -> Option<Self> {
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            let get = |k: &str| {
                info.lines()
                    .find(|l| l.split(':').next().is_some_and(|n| n.trim() == k))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            };
            if let (Some(v), Some(f), Some(m), Some(st)) = (
                get("vendor_id"),
                get("cpu family"),
                get("model"),
                get("stepping"),
            ) {
                let (f, m, st): (u32, u32, u32) =
                    (f.parse().ok()?, m.parse().ok()?, st.parse().ok()?);
                return Some(Self::X86(format!("{v}-{f}-{m:X}-{st:X}")));
            }
        }
        let midr =
            std::fs::read_to_string("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")
                .ok()?;
        let h = midr.trim().trim_start_matches("0x");
        u64::from_str_radix(h, 16).ok().map(Self::Midr)
    }

    /// Parses `GenuineIntel-6-97-2` or a MIDR (`0x410fd0c0`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok().map(Self::Midr),
            None => s.contains('-').then(|| Self::X86(s.to_owned())),
        }
    }
}

/// The events of the model `id` selects, and its table directory (`alderlake`); `None` without
/// tables or without a match.
pub(crate) fn model(id: &CpuId) -> Option<(&'static str, &'static [JsonEvent])> {
    let t = table();
    let m = t.models.iter().find(|m| match id {
        CpuId::X86(s) => !m.arm64 && x86_matches(m.cpuid, s),
        CpuId::Midr(v) => {
            // Variant [23:20] and revision [3:0] do not select a table.
            let mask = !(0xf | 0xf << 20);
            m.arm64
                && u64::from_str_radix(m.cpuid.trim_start_matches("0x"), 16)
                    .is_ok_and(|x| x & mask == v & mask)
        }
    })?;
    let mut decoded = m.decoded.lock();
    let events: &'static [JsonEvent] = match *decoded {
        Some(events) => events,
        None => {
            let events: &'static [JsonEvent] = Box::leak(
                t.events(m.events.clone())
                    .unwrap_or_default()
                    .into_boxed_slice(),
            );
            *decoded = Some(events);
            events
        }
    };
    Some((m.dir, events))
}

/// The events named `name` (case-insensitive) in `events` (sorted by lower-cased name).
pub(crate) fn find<'a>(events: &'a [JsonEvent], name: &str) -> &'a [JsonEvent] {
    let key = name.to_ascii_lowercase();
    let lower = |e: &JsonEvent| e.name.to_ascii_lowercase();
    let start = events.partition_point(|e| lower(e) < key);
    let end = start + events[start..].partition_point(|e| lower(e) == key);
    &events[start..end]
}

/// perf's x86 rule: the map's expression matches the whole id, or the id without its stepping
/// when the expression names none.
fn x86_matches(re: &str, id: &str) -> bool {
    let Some(re) = Regex::parse(re) else {
        return false;
    };
    if re.full_match(id) {
        return true;
    }
    match id.rsplit_once('-') {
        Some((no_stepping, _)) if re.dashes() < 3 => re.full_match(no_stepping),
        _ => false,
    }
}

/// The extended regular expressions of the mapfiles: literals, `.`, bracket expressions (with
/// ranges and `[:xdigit:]`-style classes), groups with `|`, and `*`, `+`, `?`.
#[derive(Debug)]
struct Regex {
    alt: Vec<Vec<(Atom, Rep)>>,
}

#[derive(Debug)]
enum Atom {
    Char(u8),
    Any,
    Class(Vec<(u8, u8)>, bool),
    Group(Regex),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Rep {
    One,
    Opt,
    Star,
    Plus,
}

impl Regex {
    fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        let (r, i) = Self::parse_alt(b, 0)?;
        (i == b.len()).then_some(r)
    }

    fn parse_alt(b: &[u8], mut i: usize) -> Option<(Self, usize)> {
        let mut alt = vec![Vec::new()];
        while i < b.len() {
            let atom = match b[i] {
                b'|' => {
                    alt.push(Vec::new());
                    i += 1;
                    continue;
                }
                b')' => break,
                b'(' => {
                    let (g, j) = Self::parse_alt(b, i + 1)?;
                    if b.get(j) != Some(&b')') {
                        return None;
                    }
                    i = j + 1;
                    Atom::Group(g)
                }
                b'[' => {
                    let (c, j) = class(b, i)?;
                    i = j;
                    c
                }
                b'.' => {
                    i += 1;
                    Atom::Any
                }
                b'\\' => {
                    let c = *b.get(i + 1)?;
                    i += 2;
                    Atom::Char(c)
                }
                c => {
                    i += 1;
                    Atom::Char(c)
                }
            };
            let rep = match b.get(i) {
                Some(b'*') => Rep::Star,
                Some(b'+') => Rep::Plus,
                Some(b'?') => Rep::Opt,
                _ => Rep::One,
            };
            if rep != Rep::One {
                i += 1;
            }
            alt.last_mut()?.push((atom, rep));
        }
        Some((Self { alt }, i))
    }

    /// How many literal `-` the expression has (outside groups): 3 means it names a stepping.
    fn dashes(&self) -> usize {
        self.alt.first().map_or(0, |seq| {
            seq.iter()
                .filter(|(a, _)| matches!(a, Atom::Char(b'-')))
                .count()
        })
    }

    fn full_match(&self, s: &str) -> bool {
        self.ends(s.as_bytes(), 0).contains(&s.len())
    }

    /// Every position where a match starting at `at` can end.
    fn ends(&self, s: &[u8], at: usize) -> Vec<usize> {
        let mut out = Vec::new();
        for seq in &self.alt {
            let mut pos = vec![at];
            for (atom, rep) in seq {
                let mut next = Vec::new();
                for &p in &pos {
                    let step = |p: usize| atom_ends(atom, s, p);
                    match rep {
                        Rep::One => next.extend(step(p)),
                        Rep::Opt => {
                            next.push(p);
                            next.extend(step(p));
                        }
                        Rep::Star | Rep::Plus => {
                            let mut frontier = vec![p];
                            let mut seen = Vec::new();
                            if *rep == Rep::Star {
                                seen.push(p);
                            }
                            while let Some(q) = frontier.pop() {
                                for r in step(q) {
                                    if !seen.contains(&r) {
                                        seen.push(r);
                                        frontier.push(r);
                                    }
                                }
                            }
                            next.extend(seen);
                        }
                    }
                }
                next.sort_unstable();
                next.dedup();
                pos = next;
                if pos.is_empty() {
                    break;
                }
            }
            out.extend(pos);
        }
        out
    }
}

fn atom_ends(a: &Atom, s: &[u8], p: usize) -> Vec<usize> {
    match a {
        Atom::Group(g) => g.ends(s, p),
        _ => match s.get(p) {
            Some(&c) if atom_char(a, c) => vec![p + 1],
            _ => Vec::new(),
        },
    }
}

fn atom_char(a: &Atom, c: u8) -> bool {
    match a {
        Atom::Char(x) => *x == c,
        Atom::Any => true,
        Atom::Class(ranges, neg) => ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *neg,
        Atom::Group(_) => false,
    }
}

fn class(b: &[u8], start: usize) -> Option<(Atom, usize)> {
    let mut i = start + 1;
    let neg = b.get(i) == Some(&b'^');
    if neg {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *b.get(i)?;
        if c == b']' && !first {
            return Some((Atom::Class(ranges, neg), i + 1));
        }
        first = false;
        if c == b'[' && b.get(i + 1) == Some(&b':') {
            let end = i + 2 + b[i + 2..].windows(2).position(|w| w == b":]")?;
            let name = &b[i + 2..end];
            match name {
                b"xdigit" => ranges.extend([(b'0', b'9'), (b'a', b'f'), (b'A', b'F')]),
                b"digit" => ranges.push((b'0', b'9')),
                b"alpha" => ranges.extend([(b'a', b'z'), (b'A', b'Z')]),
                b"alnum" => ranges.extend([(b'0', b'9'), (b'a', b'z'), (b'A', b'Z')]),
                b"upper" => ranges.push((b'A', b'Z')),
                b"lower" => ranges.push((b'a', b'z')),
                _ => return None,
            }
            i = end + 2;
            continue;
        }
        if b.get(i + 1) == Some(&b'-') && b.get(i + 2).is_some_and(|&e| e != b']') {
            ranges.push((c, b[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapfile_expressions() {
        assert!(x86_matches(
            "GenuineIntel-6-(97|9A|B7|BA|BF)",
            "GenuineIntel-6-97-2"
        ));
        assert!(x86_matches(
            "GenuineIntel-6-(97|9A|B7|BA|BF)",
            "GenuineIntel-6-BF-5"
        ));
        assert!(!x86_matches(
            "GenuineIntel-6-(97|9A|B7|BA|BF)",
            "GenuineIntel-6-9-2"
        ));
        assert!(!x86_matches(
            "GenuineIntel-6-(97|9A)",
            "GenuineIntel-6-97A-2"
        ));
        let zen3 = "AuthenticAMD-25-([245][[:xdigit:]]|[[:xdigit:]])";
        assert!(x86_matches(zen3, "AuthenticAMD-25-1-1"));
        assert!(x86_matches(zen3, "AuthenticAMD-25-5F-0"));
        assert!(!x86_matches(zen3, "AuthenticAMD-25-6F-0"));
        // A stepping in the expression must match the id's.
        assert!(x86_matches(
            "GenuineIntel-6-55-[01234]",
            "GenuineIntel-6-55-4"
        ));
        assert!(!x86_matches(
            "GenuineIntel-6-55-[01234]",
            "GenuineIntel-6-55-7"
        ));
        assert!(x86_matches(
            "GenuineIntel-6-55-[56789ABCDEF]",
            "GenuineIntel-6-55-7"
        ));
        assert!(x86_matches("a.*b+c?", "axxxbb"));
        assert!(Regex::parse("(unclosed").is_none());
    }

    #[test]
    fn cpu_ids() {
        assert_eq!(CpuId::parse("0x410fd0c0"), Some(CpuId::Midr(0x410f_d0c0)));
        assert_eq!(
            CpuId::parse("GenuineIntel-6-97-2"),
            Some(CpuId::X86("GenuineIntel-6-97-2".into()))
        );
        assert!(decode(b"garbage").is_none());
        assert!(decode(b"PMUEVT01\x05").is_none());
    }

    #[cfg(feature = "pmu-events")]
    #[test]
    fn the_committed_table() {
        assert!(available());
        let (dir, events) = model(&CpuId::X86("GenuineIntel-6-97-2".into())).unwrap();
        assert_eq!(dir, "alderlake");
        let any = find(events, "inst_retired.any_p");
        assert_eq!(any.len(), 2, "{any:?}");
        assert!(any
            .iter()
            .any(|e| e.pmu == "cpu_core" && e.terms.starts_with("event=0xc0")));
        let (dir, events) = model(&CpuId::Midr(0x413f_d0c1)).unwrap();
        assert_eq!(dir, "arm/neoverse-n1");
        assert_eq!(find(events, "L1D_CACHE_REFILL")[0].terms, "event=0x3");
        let (dir, _) = model(&CpuId::X86("AuthenticAMD-25-1-1".into())).unwrap();
        assert_eq!(dir, "amdzen3");
        let t = table();
        for m in &t.models {
            let evs = t.events(m.events.clone()).unwrap();
            assert_eq!(evs.len(), m.events.len());
            assert!(evs
                .windows(2)
                .all(|w| w[0].name.to_ascii_lowercase() <= w[1].name.to_ascii_lowercase()));
        }
    }
}
