//! The `perf-profile` command on a C workload of known shape (`tests/workload/calls.c`:
//! `main -> outer -> {hot_a -> leaf (2/3), hot_b -> leaf (1/3)}`), built with frame pointers:
//! the share of each stack in our folded output is within 5 points of `perf record -g` +
//! `perf script` on the same binary; built `-O2 -fomit-frame-pointer`, our `-g dwarf` shares are
//! within 5 points of `perf record --call-graph dwarf`; `go tool pprof -raw` reads our pprof and shows the same
//! stacks; the SVG parses as XML and names every function; `--symbolize none` carries the build
//! id `readelf -n` prints. Each test decides at run time and says why it skips.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{
    build_workload, folded_file, go_pprof_raw, have, profile, profile_ok, require_cc,
    require_sampling, scratch, text, NO_FRAME_POINTERS,
};
use tests::{require, Skip};

const WORKLOAD: &[&str] = &["main", "outer", "hot_a", "hot_b", "leaf"];
const A: &str = "main;outer;hot_a;leaf";
const B: &str = "main;outer;hot_b;leaf";

/// Keeps the workload's own frames of a stack (root first), joined by `;`.
fn workload_stack<'a>(frames: impl Iterator<Item = &'a str>) -> String {
    frames
        .filter(|f| WORKLOAD.contains(f))
        .collect::<Vec<_>>()
        .join(";")
}

/// Sample counts per workload stack of a folded file.
fn folded_stacks(path: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (stack, n) in folded_file(path) {
        *out.entry(workload_stack(stack.split(';'))).or_default() += n;
    }
    out
}

/// Sample counts per workload stack of `perf script -F comm,ip,sym` output (blocks of frames,
/// leaf first, separated by blank lines).
fn perf_stacks(script: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for block in script.split("\n\n") {
        let mut frames: Vec<&str> = block
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        if frames.is_empty() {
            continue;
        }
        frames.reverse();
        *out.entry(workload_stack(frames.into_iter())).or_default() += 1;
    }
    out
}

/// Sample counts per workload stack of `go tool pprof -raw` output: the samples' location ids,
/// each location's functions (inlined ones on continuation lines).
fn pprof_raw_stacks(raw: &str) -> BTreeMap<String, u64> {
    let mut section = "";
    let mut samples: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut functions: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut last = None;
    for line in raw.lines() {
        match line {
            "Samples:" | "Locations" | "Mappings" => {
                section = line;
                continue;
            }
            _ => {}
        }
        match section {
            "Samples:" => {
                let Some((counts, locs)) = line.split_once(':') else {
                    continue;
                };
                let Some(Ok(n)) = counts.split_whitespace().next().map(str::parse::<u64>) else {
                    continue;
                };
                let locs = locs
                    .split_whitespace()
                    .map(|l| l.parse().expect("location id"))
                    .collect();
                samples.push((n, locs));
            }
            "Locations" => {
                let t = line.trim_start();
                let head = t.split_once(": 0x");
                match head.and_then(|(id, _)| id.parse::<u64>().ok()) {
                    Some(id) => {
                        // `ID: 0xADDR M=N FUNCTION FILE:LINE s=0`
                        let name = t.split_whitespace().nth(3).unwrap_or("").to_owned();
                        functions.insert(id, vec![name]);
                        last = Some(id);
                    }
                    None => {
                        // A continuation: a function the previous one was inlined into.
                        if let (Some(id), Some(name)) = (last, t.split_whitespace().next()) {
                            functions.get_mut(&id).unwrap().push(name.to_owned());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for (n, locs) in samples {
        // Leaf first; within a location, innermost first: reverse all for root first.
        let names: Vec<&str> = locs
            .iter()
            .flat_map(|l| functions.get(l).into_iter().flatten().map(String::as_str))
            .collect();
        *out.entry(workload_stack(names.into_iter().rev()))
            .or_default() += n;
    }
    out
}

/// Each stack's share in percent of the samples whose stack is the workload's (starts at main).
fn shares(stacks: &BTreeMap<String, u64>) -> BTreeMap<String, f64> {
    let total: u64 = stacks
        .iter()
        .filter(|(s, _)| s.starts_with("main"))
        .map(|(_, n)| n)
        .sum();
    stacks
        .iter()
        .filter(|(s, _)| s.starts_with("main"))
        .map(|(s, &n)| (s.clone(), 100.0 * n as f64 / total.max(1) as f64))
        .collect()
}

#[test]
fn stack_shares_agree_with_perf_and_go_pprof_reads_the_same_stacks() {
    require_sampling!();
    require_cc!();
    require!(
        have("perf", "--version"),
        Skip::Environment,
        "perf is not installed (Debian: linux-perf)"
    );
    let dir = scratch("shares");
    let calls = build_workload(&dir);
    let calls_s = calls.to_str().unwrap();
    let out_folded = dir.join("ours.folded");
    let out_pprof = dir.join("ours.pb.gz");
    let out_svg = dir.join("ours.svg");

    let our_stacks = shares_agree_in_one_of_two(|| {
        profile_ok(&[
            "-F",
            "999",
            "-o",
            out_folded.to_str().unwrap(),
            "-o",
            out_pprof.to_str().unwrap(),
            "-o",
            out_svg.to_str().unwrap(),
            "--",
            calls_s,
            "1.5",
        ]);
        let ours = folded_stacks(&out_folded);
        (ours, perf_record_stacks(&dir, &["-g"], &[calls_s, "1.5"]))
    });

    // A real consumer reads the pprof and sees the same stacks as the folded output.
    if let Some(raw) = go_pprof_raw(&out_pprof) {
        assert!(
            raw.contains("PeriodType: cpu nanoseconds") || raw.contains("PeriodType: cycles count"),
            "{raw}"
        );
        assert_eq!(
            pprof_raw_stacks(&raw),
            our_stacks,
            "go tool pprof -raw:\n{raw}"
        );
    }

    // The flame graph is XML and names every function of the workload.
    let svg = std::fs::read_to_string(&out_svg).unwrap();
    for f in WORKLOAD {
        assert!(
            svg.contains(&format!("<title>{f} (")),
            "the SVG does not name {f}"
        );
    }
    if have("python3", "--version") {
        let parsed = Command::new("python3")
            .args([
                "-c",
                "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])",
            ])
            .arg(&out_svg)
            .output()
            .unwrap();
        assert!(
            parsed.status.success(),
            "the SVG is not XML: {}",
            text(&parsed.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `perf record` with `call_graph` of `cmd` at 999 Hz, then `perf script`: its workload stacks.
fn perf_record_stacks(dir: &Path, call_graph: &[&str], cmd: &[&str]) -> BTreeMap<String, u64> {
    // `--buildid-mmap`: this kernel marks MMAP2 records with PERF_RECORD_MISC_MMAP_BUILD_ID even
    // when they carry the device and inode, and Debian's perf 6.1 then aborts reading the file
    // ("assertion failed at util/build-id.c"); with build ids asked for, the records are what the
    // flag says.
    let data = dir.join("perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "--buildid-mmap"])
        .args(call_graph)
        .args(["-F", "999", "-o"])
        .arg(&data)
        .args(cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        rec.status.success(),
        "perf record failed: {}",
        text(&rec.stderr)
    );
    let script = Command::new("perf")
        .args(["script", "-F", "comm,ip,sym", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        script.status.success(),
        "perf script failed: {}",
        text(&script.stderr)
    );
    let script = text(&script.stdout);
    let perf = perf_stacks(&script);
    assert!(
        perf.keys().any(|k| k.starts_with("main")),
        "no workload stacks in perf script's output:\n{}",
        &script[..script.len().min(2000)]
    );
    perf
}

/// Our shares of the two workload stacks are within 5 points of perf's, and have the workload's
/// shape (so that agreeing on something else cannot pass).
fn shares_agree(ours: &BTreeMap<String, u64>, perf: &BTreeMap<String, u64>) -> Result<(), String> {
    let (our_shares, perf_shares) = (shares(ours), shares(perf));
    for stack in [A, B] {
        let o = our_shares.get(stack).copied().unwrap_or(0.0);
        let p = perf_shares.get(stack).copied().unwrap_or(0.0);
        println!("{stack}: ours {o:.1}%, perf {p:.1}%");
        if (o - p).abs() > 5.0 {
            return Err(format!(
                "{stack}: ours {o:.1}% vs perf {p:.1}%\nours: {ours:?}\nperf: {perf:?}"
            ));
        }
    }
    let a = our_shares.get(A).copied().unwrap_or(0.0);
    let b = our_shares.get(B).copied().unwrap_or(0.0);
    if !((55.0..80.0).contains(&a) && (22.0..45.0).contains(&b)) {
        return Err(format!("hot_a {a:.1}%, hot_b {b:.1}%"));
    }
    Ok(())
}

/// Runs `measure` (ours, then perf's, on the same workload) and checks [`shares_agree`]; a
/// disagreement is measured once more and must not repeat. Sampling is statistical and a loaded
/// machine skews one run now and then (perf alone once gave hot_a 59.3 % of the workload's 2/3,
/// ours 65.6 %); a real disagreement shows in both runs. Returns our stacks of the run that agreed.
fn shares_agree_in_one_of_two(
    mut measure: impl FnMut() -> (BTreeMap<String, u64>, BTreeMap<String, u64>),
) -> BTreeMap<String, u64> {
    let (ours, perf) = measure();
    match shares_agree(&ours, &perf) {
        Ok(()) => ours,
        Err(first) => {
            println!("the first measurement disagreed, measuring both again: {first}");
            let (ours, perf) = measure();
            if let Err(second) = shares_agree(&ours, &perf) {
                panic!("two measurements disagree with perf:\n{first}\n{second}");
            }
            ours
        }
    }
}

#[test]
fn dwarf_stack_shares_agree_with_perf_call_graph_dwarf() {
    require_sampling!();
    require!(
        cfg!(any(target_arch = "x86_64", target_arch = "aarch64")),
        Skip::Environment,
        "-g dwarf unwinds on x86_64 and aarch64"
    );
    require_cc!();
    require!(
        have("perf", "--version"),
        Skip::Environment,
        "perf is not installed (Debian: linux-perf)"
    );
    let dir = scratch("dwarf");
    let calls = common::cc(&dir, "calls", "calls.c", NO_FRAME_POINTERS, &[]);
    let calls_s = calls.to_str().unwrap();
    let out_folded = dir.join("dwarf.folded");
    shares_agree_in_one_of_two(|| {
        profile_ok(&[
            "-F",
            "999",
            "-g",
            "dwarf",
            "-o",
            out_folded.to_str().unwrap(),
            "--",
            calls_s,
            "1.0",
        ]);
        let ours = folded_stacks(&out_folded);
        let perf = perf_record_stacks(&dir, &["--call-graph", "dwarf"], &[calls_s, "1.0"]);
        (ours, perf)
    });

    // The binary has no frame pointers: frame-pointer chains lose hot_a and hot_b, so the
    // agreement above is the DWARF unwinder's.
    let fp_folded = dir.join("fp.folded");
    profile_ok(&[
        "-F",
        "999",
        "-o",
        fp_folded.to_str().unwrap(),
        "--",
        calls_s,
        "0.3",
    ]);
    let fp_shares = shares(&folded_stacks(&fp_folded));
    let fp_a = fp_shares.get(A).copied().unwrap_or(0.0);
    println!("{A} with frame pointers: {fp_a:.1}%");
    assert!(fp_a < 30.0, "-g fp found {A} in {fp_a:.1}% of samples");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn symbolize_none_exports_addresses_and_the_build_id_readelf_shows() {
    require_sampling!();
    require_cc!();
    require!(
        have("readelf", "--version"),
        Skip::Environment,
        "readelf is not installed (binutils)"
    );
    let dir = scratch("none");
    let calls = build_workload(&dir);
    let out_folded = dir.join("none.folded");
    let out_pprof = dir.join("none.pprof");
    profile_ok(&[
        "--symbolize",
        "none",
        "-o",
        out_folded.to_str().unwrap(),
        "-o",
        out_pprof.to_str().unwrap(),
        "--",
        calls.to_str().unwrap(),
        "0.5",
    ]);
    let folded = std::fs::read_to_string(&out_folded).unwrap();
    assert!(folded.lines().any(|l| l.contains("calls+0x")), "{folded}");
    assert!(
        !WORKLOAD
            .iter()
            .any(|f| folded.split([';', ' ']).any(|n| n == *f)),
        "names in --symbolize none: {folded}"
    );

    let readelf = Command::new("readelf")
        .arg("-n")
        .arg(&calls)
        .output()
        .unwrap();
    let readelf = text(&readelf.stdout);
    let id = readelf
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("cc writes a build id");
    if let Some(raw) = go_pprof_raw(&out_pprof) {
        let mapping = raw
            .lines()
            .skip_while(|l| *l != "Mappings")
            .find(|l| l.contains(calls.to_str().unwrap()))
            .unwrap_or_else(|| panic!("no mapping of the workload:\n{raw}"));
        assert!(
            mapping.contains(id),
            "mapping {mapping:?} lacks build id {id}"
        );
        assert!(
            !mapping.contains("[FN]"),
            "an unsymbolized mapping claims functions: {mapping}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_1_or_2_and_leaves_no_file() {
    let dir = scratch("errors");
    let out = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["-o", &out("x.txt"), "--", "true"],
            2,
            "unknown output format",
        ),
        (
            &["-g", "dwarf,7", "-o", &out("x.folded"), "--", "true"],
            2,
            "multiple of 8",
        ),
        (&["-o", &out("x.folded")], 2, "nothing to profile"),
        (&["--", "true"], 2, "no output"),
        (&["-p", "1,x", "-o", &out("x.folded")], 2, "process ids"),
        (
            &["-o", "/nonexistent-dir/x.folded", "--", "true"],
            1,
            "cannot write",
        ),
        (
            &["-p", "999999999", "-o", &out("x.folded")],
            1,
            "no such process",
        ),
    ];
    for (args, code, says) in cases {
        let o = profile(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    if common::may_sample_commands() {
        let o = profile(&["-o", &out("x.folded"), "--", "/nonexistent/command"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("cannot run /nonexistent/command"), "{err}");
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
