//! `--doctor` for the whole process: a program whose time is in a stripped shared library built
//! without frame pointers (`tests/workload/plt.c` calling `pltlib.c`) is sampled briefly, and the
//! doctor names the library first, by its share of the samples, with what it lacks (a `.symtab`,
//! frame pointers, a debug file), then the program and the other files it maps (libc). And the
//! note that there is no hardware PMU is said once, plainly, by the doctor and by a capture.

mod common;

use std::path::Path;
use std::process::Command;

use common::{cc, have, profile, require_cc, require_sampling, scratch, text};

/// `DIR/libpltlib.so`, optimized without frame pointers and stripped, and `DIR/plt` (with frame
/// pointers) calling it, found by its rpath.
fn build(dir: &Path) -> (String, String) {
    let lib = cc(
        dir,
        "libpltlib.so",
        "pltlib.c",
        common::NO_FRAME_POINTERS,
        &["-fPIC", "-shared", "-Wl,--build-id"],
    );
    let s = Command::new("strip").arg(&lib).output().unwrap();
    assert!(s.status.success(), "strip: {}", text(&s.stderr));
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let link = format!("-L{}", dir.display());
    let bin = cc(
        dir,
        "plt",
        "plt.c",
        common::FRAME_POINTERS,
        &[&link, "-lpltlib", &rpath],
    );
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    (s(&bin), s(&lib))
}

/// The doctor's block for the file `path` in `report`: the line of its heading (share and path)
/// and the lines of its checks, up to the next file's heading (none for a file without samples,
/// which gets one line).
fn block<'a>(report: &'a str, path: &str) -> Option<(usize, Vec<&'a str>)> {
    let lines: Vec<&str> = report.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(path) && l.contains('%'))?;
    let rest = lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("        "))
        .copied()
        .collect();
    Some((at, rest))
}

#[test]
fn doctor_names_the_stripped_library_without_frame_pointers_that_holds_the_time() {
    require_sampling!();
    require_cc!();
    tests::require!(
        have("strip", "--version"),
        tests::Skip::Environment,
        "no strip (binutils)"
    );
    let dir = scratch("doctor-lib");
    let (bin, lib) = build(&dir);
    let out = profile(&["--doctor", "-F", "499", "--", &bin, "1.5"]);
    // With a command, the report is on stderr: stdout is the command's.
    let report = text(&out.stderr);
    println!("{report}");
    assert_eq!(out.status.success(), !report.contains("[FAIL]"), "{report}");

    // The library holds nearly all the time: it comes first, before the program.
    let (lib_at, lib_checks) =
        block(&report, &lib).unwrap_or_else(|| panic!("{lib} not named:\n{report}"));
    let (bin_at, _) = block(&report, &bin).unwrap_or_else(|| panic!("{bin} not named:\n{report}"));
    assert!(lib_at < bin_at, "{report}");
    let heading = report.lines().nth(lib_at).unwrap();
    let share: f64 = heading
        .split('%')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no share in {heading:?}"));
    assert!(share > 50.0, "{heading}");

    // What it lacks, each said with the fix.
    let check = |name: &str| {
        lib_checks
            .iter()
            .find(|l| l.contains(&format!("] {name}:")))
            .unwrap_or_else(|| panic!("no {name} check for the library:\n{report}"))
            .to_string()
    };
    let symbols = check("symbols");
    assert!(
        symbols.contains("[warn]") && symbols.contains("no .symtab"),
        "{symbols}"
    );
    let fp = check("frame pointers");
    assert!(fp.contains("[warn]"), "{fp}");
    let unwind = check("unwind tables");
    assert!(
        unwind.contains("[  ok]") && unwind.contains(".eh_frame"),
        "{unwind}"
    );
    let debug = check("debug file");
    assert!(debug.contains("[warn] debug file: none"), "{debug}");
    assert!(
        lib_checks
            .iter()
            .any(|l| l.contains("-fno-omit-frame-pointer")),
        "{report}"
    );

    // The other executable files the process maps, though they may hold no sample: libc.
    assert!(
        report
            .lines()
            .any(|l| l.contains("libc.so") && l.contains('%')),
        "{report}"
    );
}

/// The deepest nesting of parentheses in `line`.
fn depth(line: &str) -> usize {
    let (mut d, mut max) = (0usize, 0usize);
    for c in line.chars() {
        match c {
            '(' => {
                d += 1;
                max = max.max(d);
            }
            ')' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The note on `out` (stdout and stderr of a run) that there is no hardware PMU: at most once,
/// and no deeper than one pair of parentheses.
fn said_once(what: &str, out: &std::process::Output) {
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let lines: Vec<&str> = all
        .lines()
        .filter(|l| l.to_lowercase().contains("hardware pmu"))
        .collect();
    let times = all.to_lowercase().matches("no hardware pmu").count();
    println!("{what}: {times} times in {lines:#?}");
    assert!(times <= 1, "{what}: said {times} times:\n{all}");
    for l in lines {
        assert!(depth(l) <= 1, "{what}: nested parentheses in {l:?}");
    }
}

#[test]
fn the_missing_pmu_is_said_once_plainly() {
    require_sampling!();
    let dir = scratch("doctor-pmu");
    let folded = dir.join("out.folded");
    let out = profile(&[
        "-d",
        "5",
        "-o",
        folded.to_str().unwrap(),
        "--",
        "sleep",
        "0.2",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    said_once("a capture", &out);
    let out = profile(&["--doctor", "--", "sleep", "0.2"]);
    said_once("the doctor", &out);
    let out = profile(&["--doctor"]);
    said_once("the doctor without a target", &out);
}

#[test]
fn doctor_of_a_running_process_names_its_libraries_by_their_share() {
    require_sampling!();
    require_cc!();
    tests::require!(
        have("strip", "--version"),
        tests::Skip::Environment,
        "no strip (binutils)"
    );
    let dir = scratch("doctor-pid");
    let (bin, lib) = build(&dir);
    let mut child = Command::new(&bin).arg("30").spawn().unwrap();
    // Its library is mapped before main runs; the doctor samples it for a second.
    let pid = child.id().to_string();
    let out = profile(&["--doctor", "-F", "499", "-d", "1", "-p", &pid]);
    let _ = child.kill();
    let _ = child.wait();
    // Without a command the report is on stdout.
    let report = text(&out.stdout);
    println!("{report}\n{}", text(&out.stderr));
    let (lib_at, lib_checks) =
        block(&report, &lib).unwrap_or_else(|| panic!("{lib} not named:\n{report}"));
    let (bin_at, _) = block(&report, &bin).unwrap_or_else(|| panic!("{bin} not named:\n{report}"));
    assert!(lib_at < bin_at, "{report}");
    assert!(
        lib_checks
            .iter()
            .any(|l| l.contains("[warn] symbols:") && l.contains("no .symtab")),
        "{report}"
    );
}
