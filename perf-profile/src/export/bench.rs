//! The pprof writer against the one it replaced (test only): on the same profiles it writes the
//! same message, byte for byte, and how much CPU each takes on a system-wide capture's profile
//! (`cargo test -p perf-profile --release --lib export::bench -- --ignored --nocapture`).

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prost::Message;

use super::baseline;
use crate::aggregate::{Frame, Identity, Stacks};
use crate::maps::{self, MappingId};
use crate::profile::{Info, Profile, Stats};
use crate::proto::perftools::profiles as pb;
use crate::symbolize::{Line, Mode};

/// xorshift64*: the same profile on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const LIBS: usize = 10;
const PROGRAMS: usize = 20;
const FUNCTIONS: u64 = 60;
const MAPPING_SIZE: u64 = 0x80_0000;

fn mapping_start(m: usize) -> u64 {
    0x5500_0000_0000 + m as u64 * 0x100_0000
}

/// What a system-wide capture of 5 s at 999 Hz beside twenty busy programs holds: about 10 000
/// samples in 3 000 stacks of 40 threads over 30 mappings (ten shared libraries and twenty
/// programs), C++-sized names, a third of the stacks ending in the kernel, inlined frames.
pub(crate) fn system_wide_profile(symbolize: Mode) -> Profile {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mappings: Vec<maps::Mapping> = (0..LIBS + PROGRAMS)
        .map(|m| maps::Mapping {
            start: mapping_start(m),
            end: mapping_start(m) + MAPPING_SIZE,
            file_offset: 0x1000 * (m as u64 % 3),
            path: if m < LIBS {
                format!("/usr/lib/x86_64-linux-gnu/libshared{m}.so.{m}").into()
            } else {
                format!("/usr/bin/program-{m}").into()
            },
            build_id: (m % 7 != 3).then(|| (0..20).map(|_| rng.next() as u8).collect()),
        })
        .collect();
    let mut identities = Vec::new();
    for p in 0..PROGRAMS {
        let comm = format!("program-{p}");
        let pid = 1000 + p as u32 * 10;
        for t in 0..1 + p % 3 {
            let name = if t == 0 {
                comm.clone()
            } else {
                format!("worker-{t}")
            };
            let who = Identity::new(pid, pid + t as u32, &comm, &name);
            identities.push((
                p,
                if p % 5 == 4 {
                    who.in_container(&format!("{:064x}", p))
                } else {
                    who
                },
            ));
        }
    }
    let user = |m: usize, function: u64, offset: u64| Frame::User {
        mapping: MappingId(m as u32),
        addr: mapping_start(m) + 0x1000 + function * 0x2000 + offset * 4,
    };
    let mut stacks = Stacks::new();
    let mut keyed = Vec::new();
    for (p, who) in &identities {
        let exe = LIBS + p;
        let libs = [p % LIBS, (p + 3) % LIBS, (p + 7) % LIBS];
        let mut stack = vec![user(libs[0], 0, 0), user(libs[0], 1, 9), user(exe, 0, 17)];
        for _ in 0..75 {
            stack.truncate(3 + rng.below(stack.len().saturating_sub(2).max(1)));
            for _ in 0..rng.below(24) {
                let m = if rng.below(3) == 0 {
                    libs[rng.below(3)]
                } else {
                    exe
                };
                stack.push(user(m, rng.next() % FUNCTIONS, rng.next() % 5));
            }
            let mut frames = stack.clone();
            if rng.below(100) == 0 {
                frames.push(Frame::Unmapped {
                    addr: 0x7f00_0000_0000 + rng.next() % 0x1000,
                });
            }
            if rng.below(3) == 0 {
                for _ in 0..3 + rng.below(6) {
                    frames.push(Frame::Kernel {
                        addr: 0xffff_ffff_8100_0000 + (rng.next() % 300) * 0x100 + rng.next() % 16,
                    });
                }
            }
            stacks.add_as(frames.iter().copied(), 1_001_001, who);
            keyed.push((frames, who.clone()));
        }
    }
    // The rest of the 10 000 samples in the stacks already seen, most in a few.
    for _ in keyed.len()..10_000 {
        let r = rng.below(keyed.len());
        let (frames, who) = &keyed[r * r / keyed.len()];
        stacks.add_as(frames.iter().copied(), 1_001_001, who);
    }

    let function = |m: usize, f: u64| {
        Line {
        function: format!(
            "ns{m}::detail::Class{}::method_{f}<std::vector<int, std::allocator<int>>>(int, char const*)",
            f % 7
        ),
        file: Some(format!("/build/src/component{m}/module{}.cc", f % 10)),
        line: Some((f * 37 % 900) as u32 + 1),
    }
    };
    let lines: Vec<Arc<[Line]>> = stacks
        .frames()
        .iter()
        .map(|frame| {
            let lines: Vec<Line> = match *frame {
                Frame::User { mapping, addr } => {
                    let m = mapping.0 as usize;
                    let f = (addr - mapping_start(m) - 0x1000) / 0x2000;
                    let mut l = Vec::new();
                    // Inlined into it, innermost first.
                    if symbolize.has_lines() && addr % 16 == 0 {
                        l.push(function(m, (f + 1) % FUNCTIONS));
                    }
                    l.push(function(m, f));
                    if !symbolize.has_lines() {
                        for l in &mut l {
                            (l.file, l.line) = (None, None);
                        }
                    }
                    l
                }
                Frame::Kernel { addr } => vec![Line {
                    function: format!("kernel_function_{}", (addr >> 8) & 0xfff),
                    file: None,
                    line: None,
                }],
                _ => Vec::new(),
            };
            if symbolize.names_functions() {
                Arc::from(lines)
            } else {
                Arc::from(Vec::new())
            }
        })
        .collect();
    Profile {
        stacks,
        mappings,
        lines,
        info: Info {
            event: "cpu-clock".into(),
            event_reason: "no hardware PMU".into(),
            frequency: 999,
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            duration: Duration::from_secs(5),
            stats: Stats {
                samples: 10_000,
                lost_records: 2,
                ..Stats::default()
            },
            notes: vec!["a note".into(), "another note".into()],
            symbolize,
            process: None,
            service: None,
        },
        folded_roots: Default::default(),
    }
}

/// The message a `.pb.gz` holds.
fn gunzip(gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}

/// The profiles the comparison runs on: small and system-wide, each symbolization, and samples
/// with no thread known.
fn profiles() -> Vec<(&'static str, Profile)> {
    let mut anonymous = system_wide_profile(Mode::Local);
    let mut stacks = Stacks::new();
    for (stack, counts) in anonymous.stacks.sampled() {
        let mut frames: Vec<Frame> = anonymous
            .stacks
            .frames_of(stack)
            .map(|f| anonymous.stacks.frame(f).unwrap())
            .collect();
        frames.reverse();
        stacks.add_counts(frames, counts);
    }
    // The frames were met in the same order, so the lines still fit them.
    assert_eq!(stacks.frames(), anonymous.stacks.frames());
    anonymous.stacks = stacks;
    vec![
        ("small", super::dictionary::tests::sample_profile()),
        ("local", system_wide_profile(Mode::Local)),
        ("functions", system_wide_profile(Mode::Functions)),
        ("none", system_wide_profile(Mode::None)),
        ("no threads", anonymous),
    ]
}

#[test]
fn the_streamed_pprof_is_the_message_the_old_writer_wrote() {
    for (what, profile) in profiles() {
        let old = baseline::to_pprof(&profile);
        let mut gz = Vec::new();
        profile.write_pprof(&mut gz).unwrap();
        let bytes = gunzip(&gz);
        assert!(
            bytes == old.encode_to_vec(),
            "{what}: the bytes differ from the old writer's"
        );
        let new = pb::Profile::decode(&bytes[..]).unwrap();
        assert_eq!(new, old, "{what}");
        assert_eq!(profile.to_pprof(), old, "{what}: to_pprof");
        // Not a profile that says nothing.
        assert!(
            !new.sample.is_empty() && new.string_table.len() > 5,
            "{what}"
        );
    }
}

/// This thread's CPU time for `f`.
fn cpu<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = tests::thread_cpu_time();
    let out = f();
    (tests::thread_cpu_time() - start, out)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The CPU time of writing a system-wide capture's profile as `.pb.gz` (into memory: no file, no
/// fsync), old writer and new alternately, the median of many; and the compressed size and CPU
/// of each gzip level on the same message.
#[test]
#[ignore = "a benchmark: run it on a --release build"]
fn pprof_write_cpu() {
    let profile = system_wide_profile(Mode::Local);
    let (old_gz, new_gz) = {
        let mut old = Vec::new();
        baseline::write_pprof(&profile, &mut old).unwrap();
        let mut new = Vec::new();
        profile.write_pprof(&mut new).unwrap();
        (old, new)
    };
    let message = gunzip(&new_gz);
    println!(
        "profile: {} pprof samples (a stack in a thread), {} locations, {} functions, {} \
         strings, {} mappings; {} bytes of protobuf, {} gzipped (old writer: {})",
        profile.stacks.sampled_by_identity().count(),
        profile.stacks.frames().len(),
        pb::Profile::decode(&message[..]).unwrap().function.len(),
        pb::Profile::decode(&message[..])
            .unwrap()
            .string_table
            .len(),
        profile.mappings.len(),
        message.len(),
        new_gz.len(),
        old_gz.len(),
    );
    let rounds = 31;
    let (mut old, mut new, mut old_msg, mut new_msg) = (vec![], vec![], vec![], vec![]);
    let (mut old_dict, mut new_dict) = (vec![], vec![]);
    for _ in 0..rounds {
        let mut out = Vec::with_capacity(1 << 20);
        old.push(cpu(|| baseline::write_pprof(&profile, &mut out).unwrap()).0);
        let mut out = Vec::with_capacity(1 << 20);
        new.push(cpu(|| profile.write_pprof(&mut out).unwrap()).0);
        old_msg.push(cpu(|| baseline::to_pprof(&profile).encode_to_vec()).0);
        new_msg.push(cpu(|| super::pprof::encode_for_bench(&profile)).0);
        old_dict.push(cpu(|| baseline::Dictionary::of(&profile).locations.len()).0);
        new_dict.push(cpu(|| super::dictionary::Dictionary::of(&profile).locations.len()).0);
    }
    let (o, n) = (median(old), median(new));
    println!(
        "write_pprof (message + gzip), median of {rounds}: old {:.2} ms, new {:.2} ms: {:.2}x",
        ms(o),
        ms(n),
        n.as_secs_f64() / o.as_secs_f64()
    );
    let (o, n) = (median(old_msg), median(new_msg));
    println!(
        "message alone (to_pprof + encode_to_vec / streamed), median: old {:.2} ms, new {:.2} ms: \
         {:.2}x",
        ms(o),
        ms(n),
        n.as_secs_f64() / o.as_secs_f64()
    );
    let (o, n) = (median(old_dict), median(new_dict));
    println!(
        "the shared tables alone (Dictionary::of), median: old {:.2} ms, new {:.2} ms: {:.2}x",
        ms(o),
        ms(n),
        n.as_secs_f64() / o.as_secs_f64()
    );
    for level in 1..=6 {
        let times: Vec<Duration> = (0..11)
            .map(|_| {
                cpu(|| {
                    let mut gz = flate2::write::GzEncoder::new(
                        Vec::with_capacity(1 << 20),
                        flate2::Compression::new(level),
                    );
                    std::io::Write::write_all(&mut gz, &message).unwrap();
                    gz.finish().unwrap()
                })
                .0
            })
            .collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        std::io::Write::write_all(&mut gz, &message).unwrap();
        let size = gz.finish().unwrap().len();
        println!(
            "gzip level {level}: {:.2} ms, {size} bytes ({:.1}% of the message)",
            ms(median(times)),
            size as f64 * 100.0 / message.len() as f64
        );
    }
}

/// The tables OTLP export shares with pprof are those the old dictionary made.
#[test]
fn the_shared_tables_are_the_old_ones() {
    for (what, profile) in profiles() {
        let old = baseline::Dictionary::of(&profile);
        let new = super::dictionary::Dictionary::of(&profile);
        let at = |m: &super::dictionary::Mapping| {
            (
                m.start,
                m.limit,
                m.file_offset,
                m.filename,
                m.build_id.clone(),
                m.has_functions,
                m.has_lines,
            )
        };
        let old_at = |m: &baseline::Mapping| {
            (
                m.start,
                m.limit,
                m.file_offset,
                m.filename,
                m.build_id.clone(),
                m.has_functions,
                m.has_lines,
            )
        };
        assert_eq!(
            new.mappings.iter().map(at).collect::<Vec<_>>(),
            old.mappings.iter().map(old_at).collect::<Vec<_>>(),
            "{what}"
        );
        let locations = |l: &super::dictionary::Location| {
            (l.mapping, l.address, new.lines[l.lines.clone()].to_vec())
        };
        assert_eq!(
            new.locations.iter().map(locations).collect::<Vec<_>>(),
            old.locations
                .iter()
                .map(|l| (l.mapping, l.address, l.lines.clone()))
                .collect::<Vec<_>>(),
            "{what}"
        );
        let functions = |f: &super::dictionary::Function| (f.name, f.file);
        let old_functions = |f: &baseline::Function| (f.name, f.file);
        let (new_f, old_f) = (new.functions.into_values(), old.functions.into_values());
        assert_eq!(
            new_f.iter().map(functions).collect::<Vec<_>>(),
            old_f.iter().map(old_functions).collect::<Vec<_>>(),
            "{what}"
        );
        assert_eq!(new.strings.table(), old.strings.table(), "{what}");
    }
}

/// A line of `/proc/self/status` in KiB.
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap()
}

/// The child of [`pprof_write_peak_rss`]: writes the profile with the writer `PPROF_WRITER` names
/// and prints how far its resident memory rose above what it was once the profile was made.
#[test]
#[ignore = "run by pprof_write_peak_rss"]
fn pprof_write_peak_rss_child() {
    let Ok(writer) = std::env::var("PPROF_WRITER") else {
        return;
    };
    let profile = system_wide_profile(Mode::Local);
    let mut out = Vec::with_capacity(1 << 20);
    out.resize(1 << 20, 1);
    out.clear();
    // Writing 5 resets the peak (VmHWM) to the resident size now.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kib("VmRSS:");
    match writer.as_str() {
        "old" => baseline::write_pprof(&profile, &mut out).unwrap(),
        _ => profile.write_pprof(&mut out).unwrap(),
    }
    println!("peak rise: {} KiB", status_kib("VmHWM:") - before);
}

/// How much memory each writer takes on top of the profile (each in a process of its own, as
/// the command writes once): the old one held the whole message, then its encoding.
#[test]
#[ignore = "a benchmark: run it on a --release build"]
fn pprof_write_peak_rss() {
    for writer in ["old", "new", "old", "new", "old", "new"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "export::bench::pprof_write_peak_rss_child",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env("PPROF_WRITER", writer)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().find(|l| l.starts_with("peak rise")).unwrap();
        println!("{writer} writer: {line}");
    }
}
