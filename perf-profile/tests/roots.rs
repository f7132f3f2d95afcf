//! One root per path (issue 34, item 4): every stack of one code path ends at the same outermost
//! frame, and a stack whose unwinding stopped before the natural end of the stack (the copied
//! stack or the kernel's frame limit ran out, the unwinder failed) starts with a `[truncated]`
//! frame, in the folded, pprof and OTLP outputs, on `tests/workload/roots.c`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use common::{build_c, folded_file, profile_ok, require_cc, require_sampling, scratch};
use perf_profile::proto::perftools::profiles::Profile;

const TRUNCATED: &str = "[truncated]";

/// The pprof file at `path`, decoded.
fn pprof(path: &Path) -> Profile {
    use prost::Message;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    Profile::decode(&raw[..]).unwrap()
}

/// The modes both unwinders are tried in: frame pointers, and DWARF where it is supported.
fn modes() -> Vec<&'static str> {
    let mut m = vec!["fp"];
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        m.push("dwarf");
    }
    m
}

/// Runs `perf-profile -g MODE EXTRA -o DIR/NAME.{folded,pb.gz,otlp} -- roots ARGS`: the three
/// files.
fn run(dir: &Path, name: &str, mode: &str, extra: &[&str], args: &[&str]) -> [PathBuf; 3] {
    let bin = dir.join("roots");
    let outs = ["folded", "pb.gz", "otlp"].map(|ext| dir.join(format!("{name}.{ext}")));
    let mut a = vec!["-g", mode];
    a.extend_from_slice(extra);
    for o in &outs {
        a.extend(["-o", o.to_str().unwrap()]);
    }
    a.extend(["--", bin.to_str().unwrap()]);
    a.extend_from_slice(args);
    profile_ok(&a);
    outs
}

/// The outermost frame of each folded stack holding `frames` (consecutive, `main;nap`), with
/// the samples (or nanoseconds) of each.
fn roots_of(stacks: &BTreeMap<String, u64>, frames: &str) -> BTreeMap<String, u64> {
    let needle = format!(";{frames};");
    let mut roots = BTreeMap::new();
    for (s, n) in stacks {
        if format!(";{s};").contains(&needle) {
            let root = s.split(';').next().unwrap().to_owned();
            *roots.entry(root).or_default() += n;
        }
    }
    roots
}

/// The sleeps of `main -> nap` off CPU and the CPU of `main -> deep -> spin` (a stack that fits
/// the copy and the frame limit) each end at one outermost frame, the same in both, in each mode
/// (with DWARF: `_start`, where the CFI ends the stack), and none is `[truncated]`. (With frame
/// pointers `nap` itself is not seen: libc's `clock_nanosleep` keeps no frame pointer, so the
/// kernel's walk goes from it to the return address in main; the root is what this test is
/// about.)
#[test]
fn one_code_path_ends_at_one_root_and_complete_stacks_are_not_truncated() {
    require_sampling!();
    require_cc!();
    let dir = scratch("roots-one");
    build_c(&dir, "roots");
    for mode in modes() {
        let [nap, _, _] = run(
            &dir,
            &format!("nap-{mode}"),
            mode,
            &["--off-cpu"],
            &["nap", "25"],
        );
        let nap = folded_file(&nap);
        let nap_roots = roots_of(&nap, "main");
        let [cpu, _, _] = run(
            &dir,
            &format!("cpu-{mode}"),
            mode,
            &["-F", "999"],
            &["deep", "3", "300"],
        );
        let cpu = folded_file(&cpu);
        let cpu_roots = roots_of(&cpu, "main;deep");
        println!(
            "{mode}: roots of the naps through main (ns) {nap_roots:?}, of main;deep (samples) {cpu_roots:?}"
        );
        assert!(
            !nap_roots.is_empty() && !cpu_roots.is_empty(),
            "{nap:#?} {cpu:#?}"
        );
        let all: BTreeSet<&String> = nap_roots.keys().chain(cpu_roots.keys()).collect();
        assert_eq!(
            all.len(),
            1,
            "{mode}: one path, several roots: {nap:#?} {cpu:#?}"
        );
        let root = all.into_iter().next().unwrap();
        assert_ne!(root, TRUNCATED, "{mode}: {nap:#?} {cpu:#?}");
        if mode == "dwarf" {
            assert_eq!(root, "_start", "{nap:#?} {cpu:#?}");
        }
        for stacks in [&nap, &cpu] {
            let through_main: u64 = stacks
                .iter()
                .filter(|(s, _)| s.contains(";main;"))
                .map(|(_, n)| n)
                .sum();
            let truncated: u64 = stacks
                .iter()
                .filter(|(s, _)| s.contains(";main;") && s.contains(TRUNCATED))
                .map(|(_, n)| n)
                .sum();
            assert!(through_main > 0 && truncated == 0, "{mode}: {stacks:#?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recursion depth past the kernel's frame limit (`perf_event_max_stack`, 127 by default): 400
/// frames, or 100 more than a raised limit.
fn deeper_than_the_limit() -> u32 {
    let limit: u32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(127);
    (limit + 100).max(400)
}

/// `main -> deep` 400 frames deep (see [`deeper_than_the_limit`]): with frame pointers the kernel
/// stops at its frame limit, with DWARF the 8 KiB copy of the stack runs out;
/// either way main is never reached, and every stack of the spin starts with `[truncated]` in the
/// folded stacks, as the pprof's outermost location (a function named `[truncated]`), and in
/// the OTLP profile.
#[test]
fn a_stack_deeper_than_the_frame_limit_or_the_copy_starts_with_truncated_in_every_output() {
    require_sampling!();
    require_cc!();
    let dir = scratch("roots-deep");
    build_c(&dir, "roots");
    for mode in modes() {
        let depth = deeper_than_the_limit().to_string();
        let [folded, pb, otlp] = run(&dir, mode, mode, &["-F", "999"], &["deep", &depth, "400"]);
        let stacks = folded_file(&folded);
        let spin: Vec<(&String, &u64)> =
            stacks.iter().filter(|(s, _)| s.contains(";spin")).collect();
        let roots = roots_of(&stacks, "deep;spin");
        println!("{mode}: roots of the spin {roots:?}");
        assert!(!spin.is_empty(), "{mode}: {stacks:#?}");
        for (s, _) in &spin {
            assert!(
                s.starts_with("[truncated];deep;") && !s.contains("main"),
                "{mode}: {s}"
            );
        }
        let p = pprof(&pb);
        let name = |i: i64| p.string_table[i as usize].as_str();
        let truncated: Vec<u64> = p
            .location
            .iter()
            .filter(|l| {
                l.line.iter().any(|line| {
                    p.function
                        .iter()
                        .any(|f| f.id == line.function_id && name(f.name) == TRUNCATED)
                })
            })
            .map(|l| l.id)
            .collect();
        assert_eq!(
            truncated.len(),
            1,
            "{mode}: one [truncated] location: {:?}",
            p.location
        );
        let spin_fn: Vec<u64> = p
            .function
            .iter()
            .filter(|f| name(f.name) == "spin")
            .map(|f| f.id)
            .collect();
        let in_spin = |id: &u64| {
            p.location.iter().any(|l| {
                l.id == *id
                    && l.line
                        .iter()
                        .any(|line| spin_fn.contains(&line.function_id))
            })
        };
        let spin_samples: Vec<_> = p
            .sample
            .iter()
            .filter(|s| s.location_id.iter().any(in_spin))
            .collect();
        assert!(!spin_samples.is_empty(), "{mode}");
        for s in spin_samples {
            assert_eq!(
                s.location_id.last(),
                Some(&truncated[0]),
                "{mode}: root first? {s:?}"
            );
        }
        let otlp = std::fs::read(&otlp).unwrap();
        assert!(
            otlp.windows(TRUNCATED.len())
                .any(|w| w == TRUNCATED.as_bytes()),
            "{mode}: no [truncated] in the OTLP strings"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
