//! The tables a profile's exporters share, built once per export: strings, mappings, functions
//! and locations, each value interned once, and what the samples' values mean.
//!
//! Every table is numbered from 1 in the order its entries were first met; 0 means "none" (no
//! mapping, the empty string). That is how pprof numbers its ids and how OTLP's dictionary
//! numbers its tables (whose entry 0 is the empty one), so each exporter only turns an entry into
//! its own message: [`pprof`](super::pprof) and [`otlp`](super::otlp).

use std::borrow::{Borrow, Cow};
use std::hash::Hash;
use std::ops::Range;
use std::time::UNIX_EPOCH;

use foldhash::HashMap;

use crate::aggregate::{Frame, FrameId};
use crate::profile::{Info, Profile};

/// Distinct values numbered from 1 in the order first seen (0 is left for "none").
///
/// Hashed with foldhash, seeded per process: the names interned come from other users' binaries,
/// and a seed they cannot know keeps them from choosing names that collide.
#[derive(Debug)]
pub(crate) struct Interner<K> {
    values: Vec<K>,
    index: HashMap<K, u32>,
}

impl<K: Hash + Eq + Clone> Interner<K> {
    pub(crate) fn new() -> Self {
        Self {
            values: Vec::new(),
            index: HashMap::default(),
        }
    }

    /// The number of `key`, interning it when new.
    pub(crate) fn id<Q>(&mut self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        self.insert(key.to_owned())
    }

    /// Numbers `value`, known to be new.
    fn insert(&mut self, value: K) -> u32 {
        self.values.push(value.clone());
        let i = self.values.len() as u32;
        self.index.insert(value, i);
        i
    }

    /// The values in order: number `n` is `into_values()[n - 1]`.
    pub(crate) fn into_values(self) -> Vec<K> {
        self.values
    }
}

/// The string table: the empty string is 0, as pprof and OTLP both require. The strings of the
/// profile (names, files, paths) are borrowed from it, not copied.
#[derive(Debug)]
pub(crate) struct Strings<'a>(Interner<Cow<'a, str>>);

impl<'a> Strings<'a> {
    pub(crate) fn new() -> Self {
        Self(Interner::new())
    }

    /// The index of `s` in [`table`](Self::table).
    pub(crate) fn id(&mut self, s: &'a str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        match self.0.index.get(s) {
            Some(&i) => i,
            None => self.0.insert(Cow::Borrowed(s)),
        }
    }

    /// The index of `s`, a string made for the profile (a comment, a build id in hex).
    pub(crate) fn owned(&mut self, s: String) -> u32 {
        if s.is_empty() {
            return 0;
        }
        match self.0.index.get(s.as_str()) {
            Some(&i) => i,
            None => self.0.insert(Cow::Owned(s)),
        }
    }

    /// Every string by index, the empty one first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        std::iter::once("").chain(self.0.values.iter().map(|s| &**s))
    }

    /// Every string by index, the empty one first.
    pub(crate) fn table(self) -> Vec<String> {
        let mut t = Vec::with_capacity(self.0.values.len() + 1);
        t.push(String::new());
        t.extend(self.0.values.into_iter().map(Cow::into_owned));
        t
    }
}

/// A mapping the frames name: a file's, or one spanning the kernel's frames.
#[derive(Debug)]
pub(crate) struct Mapping {
    pub start: u64,
    pub limit: u64,
    pub file_offset: u64,
    /// The path (`[kernel.kallsyms]` for the kernel).
    pub filename: u32,
    /// The GNU build id in lowercase hex.
    pub build_id: Option<String>,
    /// Whether its frames were symbolized: functions named ...
    pub has_functions: bool,
    /// ... with their files, lines and inlined frames.
    pub has_lines: bool,
}

/// A function: its name and file (0 when unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Function {
    pub name: u32,
    pub file: u32,
}

/// A location: one frame of the stack table.
#[derive(Debug)]
pub(crate) struct Location {
    /// Its mapping (0: none).
    pub mapping: u32,
    pub address: u64,
    /// Its functions in [`Dictionary::lines`](Dictionary#structfield.lines), innermost (inlined) first.
    pub lines: Range<usize>,
}

/// The tables of one profile.
#[derive(Debug)]
pub(crate) struct Dictionary<'a> {
    pub strings: Strings<'a>,
    /// Mapping `n` is `mappings[n - 1]`: the ones user frames name, then the kernel's.
    pub mappings: Vec<Mapping>,
    /// Function `n` is `functions.into_values()[n - 1]`.
    pub functions: Interner<Function>,
    /// Location `n` is `locations[n - 1]`, the frame `FrameId(n - 1)`.
    pub locations: Vec<Location>,
    /// The locations' functions with their line (0 when unknown), each location's in one range:
    /// one table rather than a list per location.
    pub lines: Vec<(u32, i64)>,
}

impl<'a> Dictionary<'a> {
    /// The tables of `profile`, with a location per frame of its stack table.
    pub(crate) fn of(profile: &'a Profile) -> Self {
        let symbolized = profile.info.symbolize.names_functions();
        let lines = profile.info.symbolize.has_lines();
        let frames = profile.stacks.frames();
        let mut strings = Strings::new();

        // Mappings: the ones frames name, then one for the kernel. Each profile mapping's number
        // (0: not named yet), by its index.
        let mut mappings = Vec::new();
        let mut mapping_ids = vec![0u32; profile.mappings.len()];
        let mut kernel_range: Option<(u64, u64)> = None;
        for frame in frames {
            match *frame {
                Frame::User { mapping, .. } => {
                    let i = mapping.0 as usize;
                    let (Some(m), Some(&0)) = (profile.mappings.get(i), mapping_ids.get(i)) else {
                        continue;
                    };
                    let resolved = symbolized && m.is_file();
                    mappings.push(Mapping {
                        start: m.start,
                        limit: m.end,
                        file_offset: m.file_offset,
                        filename: strings.id(&m.path),
                        build_id: m.build_id_hex(),
                        has_functions: resolved,
                        has_lines: resolved && lines,
                    });
                    mapping_ids[i] = mappings.len() as u32;
                }
                Frame::Kernel { addr } => {
                    let (lo, hi) = kernel_range.unwrap_or((addr, addr));
                    kernel_range = Some((lo.min(addr), hi.max(addr)));
                }
                Frame::KernelHidden => {
                    kernel_range.get_or_insert((0, 0));
                }
                Frame::Unmapped { .. } | Frame::Jit { .. } => {}
            }
        }
        let kernel_mapping = kernel_range.map_or(0, |(lo, hi)| {
            mappings.push(Mapping {
                start: lo,
                limit: hi.saturating_add(1),
                file_offset: 0,
                filename: strings.id("[kernel.kallsyms]"),
                build_id: None,
                has_functions: symbolized,
                has_lines: false,
            });
            mappings.len() as u32
        });

        // Functions, interned by (name, file); a location per frame.
        let mut functions = Interner::new();
        let mut all_lines = Vec::with_capacity(if symbolized { frames.len() } else { 0 });
        let mut function = |name: &'a str, file: &'a str| {
            functions.id(&Function {
                name: strings.id(name),
                file: strings.id(file),
            })
        };
        let mut locations = Vec::with_capacity(frames.len());
        for (i, frame) in frames.iter().enumerate() {
            let (mapping, address) = match *frame {
                Frame::User { mapping, addr } => (
                    mapping_ids.get(mapping.0 as usize).copied().unwrap_or(0),
                    addr,
                ),
                // Not an address: no location's address says it.
                f if f.is_truncated() => (0, 0),
                Frame::Unmapped { addr } | Frame::Jit { addr, .. } => (0, addr),
                Frame::Kernel { addr } => (kernel_mapping, addr),
                Frame::KernelHidden => (kernel_mapping, 0),
            };
            let first = all_lines.len();
            if let Frame::KernelHidden = frame {
                all_lines.push((function("[kernel]", ""), 0));
            } else {
                for l in profile.lines(FrameId(i as u32)) {
                    let file = l.file.as_deref().unwrap_or("");
                    all_lines.push((function(&l.function, file), l.line.map_or(0, i64::from)));
                }
            }
            locations.push(Location {
                mapping,
                address,
                lines: first..all_lines.len(),
            });
        }

        Self {
            strings,
            mappings,
            functions,
            locations,
            lines: all_lines,
        }
    }
}

/// The type and unit of a profile's period value: `off_cpu/nanoseconds` off CPU,
/// `cpu/nanoseconds` for `cpu-clock`, the event and `count` otherwise.
pub(crate) fn period_type(info: &Info) -> (&str, &'static str) {
    if crate::offcpu::is_off_cpu(info) {
        ("off_cpu", "nanoseconds")
    } else if info.event == "cpu-clock" {
        ("cpu", "nanoseconds")
    } else {
        (info.event.as_str(), "count")
    }
}

/// The sampling period in the period type's unit, where it is fixed (`cpu-clock`: 1 s / frequency).
pub(crate) fn period(info: &Info) -> i64 {
    if info.event == "cpu-clock" {
        1_000_000_000 / info.frequency.max(1) as i64
    } else {
        0
    }
}

/// When the capture started, in nanoseconds since the Unix epoch.
pub(crate) fn start_unix_nanos(info: &Info) -> u64 {
    info.start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::aggregate::{Identity, Stacks};
    use crate::maps::{self, MappingId};
    use crate::profile::Stats;
    use crate::symbolize::{Line, Mode};

    /// The container of [`sample_profile`]'s second stack.
    pub(crate) const CONTAINER: &str =
        "3f4e9a1c0b2d4e6f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f";

    /// A symbolized profile of two stacks: `main -> leaf (inlined into `inlined`) -> a kernel
    /// address`, and `main -> an unmapped address -> the hidden kernel`; the file's build id is
    /// `0a0b0c`, and a second mapping no frame names. The first stack ran in thread 10 of process
    /// 10 (`app`), the second in its thread 11 (`worker`), in container [`CONTAINER`].
    pub(crate) fn sample_profile() -> Profile {
        let mapping = |path: &str, start: u64, build_id: Option<Vec<u8>>| maps::Mapping {
            start,
            end: start + 0x1000,
            file_offset: 0,
            path: path.into(),
            build_id,
        };
        let app = MappingId(1);
        let mut stacks = Stacks::new();
        let main = Identity::new(10, 10, "app", "app");
        let worker = Identity::new(10, 11, "app", "worker").in_container(CONTAINER);
        stacks.add_as(
            [
                Frame::User {
                    mapping: app,
                    addr: 0x1100,
                },
                Frame::User {
                    mapping: app,
                    addr: 0x1200,
                },
                Frame::Kernel { addr: 0xffff_0010 },
            ],
            10,
            &main,
        );
        stacks.add_as(
            [
                Frame::User {
                    mapping: app,
                    addr: 0x1100,
                },
                Frame::Unmapped { addr: 0x9999 },
                Frame::KernelHidden,
            ],
            20,
            &worker,
        );
        let line = |function: &str, line: u32| Line {
            function: function.into(),
            file: Some("app.c".into()),
            line: Some(line),
        };
        let lines: Vec<Arc<[Line]>> = vec![
            Arc::from(vec![line("main", 3)]),
            Arc::from(vec![line("leaf", 10), line("inlined", 20)]),
            Arc::from(Vec::new()),
            Arc::from(Vec::new()),
            Arc::from(Vec::new()),
        ];
        Profile {
            stacks,
            mappings: vec![
                mapping("/lib/unused.so", 0x7000, None),
                mapping("/bin/app", 0x1000, Some(vec![0x0a, 0x0b, 0x0c])),
            ],
            lines,
            info: Info {
                event: "cpu-clock".into(),
                event_reason: String::new(),
                frequency: 100,
                start: SystemTime::now(),
                duration: Duration::from_secs(1),
                stats: Stats {
                    samples: 2,
                    ..Stats::default()
                },
                notes: Vec::new(),
                symbolize: Mode::Local,
                process: None,
                service: None,
            },
            folded_roots: Default::default(),
        }
    }

    #[test]
    fn tables_number_from_one_and_intern() {
        let mut s = Strings::new();
        assert_eq!(s.id(""), 0);
        let a = s.id("a");
        assert_eq!(a, 1);
        assert_eq!(s.id("b"), 2);
        assert_eq!(s.id("a"), a);
        assert_eq!(s.table(), ["", "a", "b"]);

        let mut f = Interner::new();
        let main = Function { name: 1, file: 2 };
        assert_eq!(f.id(&main), 1);
        assert_eq!(f.id(&Function { name: 1, file: 0 }), 2);
        assert_eq!(f.id(&main), 1);
        // A function with neither name nor file is still an entry, not "none".
        assert_eq!(f.id(&Function { name: 0, file: 0 }), 3);
        assert_eq!(f.into_values()[0], main);

        let mut stacks: Interner<Vec<i32>> = Interner::new();
        assert_eq!(stacks.id(&[1, 2][..]), 1);
        assert_eq!(stacks.id(&[2][..]), 2);
        assert_eq!(stacks.id(&[1, 2][..]), 1);
        assert_eq!(stacks.into_values(), [vec![1, 2], vec![2]]);
    }

    #[test]
    fn a_profile_has_a_location_per_frame_and_each_mapping_and_function_once() {
        let p = sample_profile();
        let d = Dictionary::of(&p);
        let mut s = d.strings;
        // The file's mapping (the unused one left out), then the kernel's, spanning its addresses.
        assert_eq!(d.mappings.len(), 2);
        let (app, kernel) = (&d.mappings[0], &d.mappings[1]);
        assert_eq!((app.start, app.limit), (0x1000, 0x2000));
        assert_eq!(app.filename, s.id("/bin/app"));
        assert_eq!(app.build_id.as_deref(), Some("0a0b0c"));
        assert!(app.has_functions && app.has_lines);
        assert_eq!((kernel.start, kernel.limit), (0xffff_0010, 0xffff_0011));
        assert_eq!(kernel.filename, s.id("[kernel.kallsyms]"));
        assert!(kernel.has_functions && !kernel.has_lines);

        let f = |name: &'static str, s: &mut Strings| Function {
            name: s.id(name),
            file: s.id(if name == "[kernel]" { "" } else { "app.c" }),
        };
        let functions: Vec<Function> = ["main", "leaf", "inlined", "[kernel]"]
            .iter()
            .map(|n| f(n, &mut s))
            .collect();
        assert_eq!(d.functions.into_values(), functions);
        // Frames: main, leaf, the kernel address, the unmapped one, the hidden kernel.
        let at: Vec<(u32, u64)> = d.locations.iter().map(|l| (l.mapping, l.address)).collect();
        assert_eq!(
            at,
            [
                (1, 0x1100),
                (1, 0x1200),
                (2, 0xffff_0010),
                (0, 0x9999),
                (2, 0)
            ]
        );
        let lines: Vec<&[(u32, i64)]> = d
            .locations
            .iter()
            .map(|l| &d.lines[l.lines.clone()])
            .collect();
        assert_eq!(
            lines,
            [&[(1, 3)][..], &[(2, 10), (3, 20)], &[], &[], &[(4, 0)]]
        );
    }
}
