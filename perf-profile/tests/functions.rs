//! `--symbolize functions`: frames named from the ELF symbol tables only, the way perf names them
//! by default, with no source file or line although the workload carries DWARF (`-g`); and the
//! mode continuous captures (`--every`) take by default.

mod common;

use std::io::Read;
use std::path::Path;

use common::{build_workload, folded_file, profile_ok, require_cc, require_sampling, scratch};
use perf_profile::proto::perftools::profiles::Profile;

/// The pprof file at `path`, decoded.
fn pprof(path: &Path) -> Profile {
    use prost::Message;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    Profile::decode(&raw[..]).unwrap()
}

/// For each function of the workload `p` names: (its file name, the lines of its locations).
fn workload_lines(p: &Profile) -> Vec<(String, String, Vec<i64>)> {
    let s = |i: i64| p.string_table[i as usize].clone();
    let mut out = Vec::new();
    for f in &p.function {
        let name = s(f.name);
        if !["main", "outer", "hot_a", "hot_b", "leaf"].contains(&name.as_str()) {
            continue;
        }
        let lines = p
            .location
            .iter()
            .flat_map(|l| &l.line)
            .filter(|l| l.function_id == f.id)
            .map(|l| l.line)
            .collect();
        out.push((name, s(f.filename), lines));
    }
    out.sort();
    out
}

#[test]
fn functions_mode_names_the_workloads_functions_without_file_or_line() {
    require_sampling!();
    require_cc!();
    let dir = scratch("functions");
    // Built with -g: its DWARF would give file:line; this mode must not read it.
    let bin = build_workload(&dir);
    let bin = bin.to_str().unwrap();
    let run = |mode: &[&str], name: &str| {
        let pb = dir.join(format!("{name}.pb.gz"));
        let folded = dir.join(format!("{name}.folded"));
        let mut args = vec!["-F", "499"];
        args.extend_from_slice(mode);
        args.extend_from_slice(&["-o", pb.to_str().unwrap(), "-o"]);
        args.extend_from_slice(&[folded.to_str().unwrap(), "--", bin, "1"]);
        profile_ok(&args);
        (pprof(&pb), folded_file(&folded))
    };

    let (p, stacks) = run(&["--symbolize", "functions"], "functions");
    for path in ["main;outer;hot_a;leaf", "main;outer;hot_b;leaf"] {
        assert!(
            common::samples_with(&stacks, path) > 0,
            "no {path} in {stacks:#?}"
        );
    }
    let named = workload_lines(&p);
    let names: Vec<_> = named.iter().map(|n| n.0.as_str()).collect();
    for f in ["hot_a", "hot_b", "leaf", "main", "outer"] {
        assert!(names.contains(&f), "{f} not named: {named:?}");
    }
    for (name, file, lines) in &named {
        assert_eq!(file, "", "{name}: no file from the symbol table");
        assert!(
            !lines.is_empty() && lines.iter().all(|&l| l == 0),
            "{name}: no lines from the symbol table: {lines:?}"
        );
    }
    let s = |i: i64| p.string_table[i as usize].as_str();
    let m = p
        .mapping
        .iter()
        .find(|m| s(m.filename) == bin)
        .expect("the workload's mapping");
    assert!(m.has_functions && !m.has_line_numbers, "{m:?}");

    // The same binary under `local`: its DWARF gives file and lines, so the checks above tell
    // the modes apart.
    let (p, _) = run(&["--symbolize", "local"], "local");
    let leaf = workload_lines(&p)
        .into_iter()
        .find(|n| n.0 == "leaf")
        .expect("leaf named");
    assert!(
        leaf.1.ends_with("calls.c") && leaf.2.iter().any(|&l| l > 0),
        "{leaf:?}"
    );

    // Continuous mode names functions only unless told otherwise: every cut (`{n}`), the last of
    // which may hold no sample of the workload.
    let cuts = dir.join("every-{n}.pb.gz");
    profile_ok(&[
        "-F",
        "499",
        "--every",
        "0.5",
        "-o",
        cuts.to_str().unwrap(),
        "--",
        bin,
        "1",
    ]);
    let mut named = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().contains("every-") {
            named.extend(workload_lines(&pprof(&path)));
        }
    }
    assert!(!named.is_empty(), "nothing of the workload named");
    for (name, file, lines) in &named {
        assert!(
            file.is_empty() && lines.iter().all(|&l| l == 0),
            "--every's default: {name} {file} {lines:?}"
        );
    }
}
