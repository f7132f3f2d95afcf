//! Names as perf gives them, on a PLT-heavy program calling a shared library the test builds
//! (`tests/workload/plt.c`, `pltlib.c`): a PLT stub is `name@plt` (as objdump and perf name it),
//! not the symbol before it (`_init`); in a stripped library, code no symbol covers is
//! `[libpltlib.so+0xOFF]` (its file offset), in the folded output and as the pprof function, so
//! that viewers reading functions only show it; `--symbolize none` keeps address-only locations.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

use common::{cc, folded_file, profile_ok, require_cc, require_sampling, scratch, text};
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

/// `DIR/libpltlib.so` (stripped when `stripped`) and `DIR/plt` linked against it (its
/// `.plt.sec` layout asked for: `-z ibtplt`), found by its rpath.
fn build(dir: &Path, stripped: bool) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    let flags = common::FRAME_POINTERS;
    let lib = cc(
        dir,
        "libpltlib.so",
        "pltlib.c",
        flags,
        &["-fPIC", "-shared"],
    );
    if stripped {
        let s = Command::new("strip").arg(&lib).output().unwrap();
        assert!(s.status.success(), "strip: {}", text(&s.stderr));
    }
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let link = format!("-L{}", dir.display());
    let bin = cc(
        dir,
        "plt",
        "plt.c",
        flags,
        &["-Wl,-z,ibtplt", &link, "-lpltlib", &rpath],
    );
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    (s(&bin), s(&lib))
}

/// Runs the workload `bin` under the profiler with `mode` (`--symbolize`): its folded stacks
/// and pprof.
fn run(dir: &Path, bin: &str, mode: &str) -> (BTreeMap<String, u64>, Profile) {
    let folded = dir.join(format!("{mode}.folded"));
    let pb = dir.join(format!("{mode}.pb.gz"));
    profile_ok(&[
        "-F",
        "999",
        "--symbolize",
        mode,
        "-o",
        folded.to_str().unwrap(),
        "-o",
        pb.to_str().unwrap(),
        "--",
        bin,
        "1",
    ]);
    (folded_file(&folded), pprof(&pb))
}

/// For the locations of `p` in the mapping of `lib`: how many there are, and how many have no
/// function.
fn locations_without_function(p: &Profile, lib: &str) -> (usize, usize) {
    let s = |i: i64| p.string_table[i as usize].as_str();
    let m = p
        .mapping
        .iter()
        .find(|m| s(m.filename) == lib)
        .expect("the library's mapping");
    let ours: Vec<_> = p.location.iter().filter(|l| l.mapping_id == m.id).collect();
    let bare = ours.iter().filter(|l| l.line.is_empty()).count();
    (ours.len(), bare)
}

/// (start, end) of the function `name` in the ELF file `file`, as `nm -S` reads its symbol table.
fn nm_range(file: &Path, name: &str) -> Option<(u64, u64)> {
    let out = Command::new("nm").arg("-S").arg(file).output().ok()?;
    text(&out.stdout).lines().find_map(|l| {
        let c: Vec<&str> = l.split_whitespace().collect();
        (c.len() == 4 && c[3] == name).then(|| {
            let start = u64::from_str_radix(c[0], 16).unwrap();
            (start, start + u64::from_str_radix(c[1], 16).unwrap())
        })
    })
}

#[test]
fn plt_stubs_are_name_at_plt_and_uncovered_code_is_lib_plus_offset() {
    require_sampling!();
    require_cc!();
    let dir = scratch("names");
    let (bin, lib) = build(&dir.join("full"), false);
    let (bin_s, lib_s) = build(&dir.join("stripped"), true);
    // The stripped library's static function, where `.symtab` (gone) named it: the unstripped
    // twin's symbol gives its range.
    let hidden = nm_range(&dir.join("full/libpltlib.so"), "hidden_spin").expect("nm hidden_spin");

    for mode in ["local", "functions"] {
        let (stacks, p) = run(&dir, &bin, mode);
        assert!(
            common::samples_with(&stacks, "plt_hidden;hidden_spin") > 0,
            "{mode}: {stacks:#?}"
        );
        assert_eq!(locations_without_function(&p, &lib).1, 0, "{mode}");

        let (stacks, p) = run(&dir, &bin_s, mode);
        // Every frame of the library not named by a symbol: `[libpltlib.so+0xOFF]`, inside
        // hidden_spin (the only code of the library without one), under plt_hidden.
        let mut uncovered = 0;
        for (stack, n) in &stacks {
            for f in stack.split(';') {
                let Some(off) = f
                    .strip_prefix("[libpltlib.so+0x")
                    .and_then(|o| o.strip_suffix(']'))
                else {
                    assert!(
                        !f.starts_with("libpltlib.so+"),
                        "{mode}, stripped: a bare location {f}"
                    );
                    continue;
                };
                let off = u64::from_str_radix(off, 16).unwrap();
                assert!(
                    (hidden.0..hidden.1).contains(&off),
                    "{mode}: {f} outside hidden_spin {hidden:x?}"
                );
                uncovered += n;
            }
        }
        assert!(
            common::samples_with(&stacks, "plt_hidden") > 0 && uncovered > 0,
            "{mode}, stripped: no [libpltlib.so+0x...] frame: {stacks:#?}"
        );
        let (all, bare) = locations_without_function(&p, &lib_s);
        assert!(
            all > 0 && bare == 0,
            "{mode}: {bare} of {all} without function"
        );
        // A viewer that reads functions only finds the frame in the pprof.
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert!(
            p.function
                .iter()
                .any(|f| s(f.name).starts_with("[libpltlib.so+0x")),
            "{mode}: no [libpltlib.so+0x...] function in the pprof"
        );
    }

    // `none`: address-only locations, for a backend that symbolizes.
    let (_, p) = run(&dir, &bin_s, "none");
    let (all, bare) = locations_without_function(&p, &lib_s);
    assert!(
        all > 0 && bare == all,
        "none: {bare} of {all} without function"
    );

    let _ = std::fs::remove_dir_all(&dir);
}

/// The address objdump gives the PLT entry `name@plt` of `file`.
fn objdump_plt(file: &Path, name: &str) -> Option<u64> {
    let out = Command::new("objdump")
        .args(["-d", "--section=.plt", "--section=.plt.sec"])
        .arg(file)
        .output()
        .ok()?;
    let label = format!(" <{name}@plt>:");
    text(&out.stdout)
        .lines()
        .find_map(|l| u64::from_str_radix(l.strip_suffix(&label)?, 16).ok())
}

/// The frames a timer sample rarely lands on (a PLT stub is one jump), named directly: the
/// libraries and the program mapped at known addresses, their frames resolved in each mode.
#[test]
fn plt_stubs_and_code_no_symbol_covers_are_named_as_perf_names_them() {
    use perf_profile::aggregate::Frame;
    use perf_profile::maps::{AddressSpaces, KernelSymbols};
    use perf_profile::symbolize::{Mode, Symbols};
    require_cc!();
    let dir = scratch("names-direct");
    let (bin, lib) = build(&dir.join("full"), false);
    let (_, lib_s) = build(&dir.join("stripped"), true);
    let full = dir.join("full/libpltlib.so");
    let hidden = nm_range(&full, "hidden_spin").expect("nm hidden_spin");
    // The library's own PLT (no .plt.sec: entry 0 is the resolver's) and the program's
    // (.plt.sec), as objdump names them.
    let Some(tiny) = objdump_plt(&full, "plt_tiny") else {
        println!("skipped: objdump is not installed");
        return;
    };
    let outer = objdump_plt(Path::new(&bin), "plt_outer").expect("plt_outer@plt in the program");
    let mut maps = AddressSpaces::new();
    let at = |i: u64| 0x7f00_0000_0000 + (i << 32);
    for (i, path) in [&lib, &lib_s, &bin].into_iter().enumerate() {
        let len = std::fs::metadata(path).unwrap().len();
        maps.mmap(2, at(i as u64), len, 0, path, None);
    }
    let frame = |i: u64, offset: u64| {
        let addr = at(i) + offset;
        Frame::User {
            mapping: maps.find(2, addr).unwrap(),
            addr,
        }
    };
    let mid = (hidden.0 + hidden.1) / 2;
    let frames = [
        frame(0, tiny),
        frame(1, tiny + 4),
        frame(2, outer + 8),
        frame(0, mid),
        frame(1, mid),
        Frame::Unmapped {
            addr: 0x3133_3436_383a_3d3e,
        },
    ];
    let kernel = KernelSymbols::default();
    for mode in [Mode::Local, Mode::Functions] {
        let mut symbols = Symbols::new(mode);
        symbols.resolve(&frames, &maps, &kernel);
        let names: Vec<String> = frames
            .iter()
            .map(|f| {
                let lines = symbols.lines(f);
                lines.last().map_or(String::new(), |l| l.function.clone())
            })
            .collect();
        assert_eq!(
            names,
            [
                "plt_tiny@plt".to_owned(),
                "plt_tiny@plt".to_owned(),
                "plt_outer@plt".to_owned(),
                "hidden_spin".to_owned(),
                format!("[libpltlib.so+{mid:#x}]"),
                "[unknown]".to_owned(),
            ],
            "{mode:?}"
        );
    }
    // `none` names no user frame; a frame in no mapping cannot be named later either.
    let mut symbols = Symbols::new(Mode::None);
    symbols.resolve(&frames, &maps, &kernel);
    assert!(frames[..5].iter().all(|f| symbols.lines(f).is_empty()));
    assert_eq!(symbols.lines(&frames[5])[0].function, "[unknown]");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A frame pointer chain led to garbage (`tests/workload/badframe.c`): the return address it
/// reads, 0x31333436383a3d3e, is in no mapping and is perf's `[unknown]` in every output (folded,
/// the pprof function, the OTLP string table), never a raw address.
#[test]
fn a_garbage_return_address_is_unknown_in_every_output() {
    require_sampling!();
    require_cc!();
    if !cfg!(target_arch = "x86_64") {
        tests::skip(
            tests::Skip::Environment,
            "the workload's fake frame is x86-64's",
        );
        return;
    }
    let dir = scratch("names-garbage");
    let bin = cc(&dir, "badframe", "badframe.c", common::FRAME_POINTERS, &[]);
    let (folded, pb, otlp) = (
        dir.join("x.folded"),
        dir.join("x.pb.gz"),
        dir.join("x.otlp"),
    );
    let mut args = vec!["-F", "999"];
    for out in [&folded, &pb, &otlp] {
        args.extend(["-o", out.to_str().unwrap()]);
    }
    args.extend(["--", bin.to_str().unwrap(), "1"]);
    profile_ok(&args);
    let stacks = folded_file(&folded);
    let unknown = common::samples_with(&stacks, "[unknown];bad_frame");
    let total: u64 = stacks.values().sum();
    assert!(
        unknown * 2 > total && !stacks.keys().any(|s| s.contains("0x313334")),
        "{stacks:#?}"
    );
    let p = pprof(&pb);
    let s = |i: i64| p.string_table[i as usize].as_str();
    let garbage = p
        .location
        .iter()
        .find(|l| l.address >> 8 == 0x31333436383a3d)
        .expect("the garbage address's location");
    let named: Vec<&str> = garbage
        .line
        .iter()
        .filter_map(|l| p.function.iter().find(|f| f.id == l.function_id))
        .map(|f| s(f.name))
        .collect();
    assert_eq!(named, ["[unknown]"], "{garbage:?}");
    let otlp = std::fs::read(&otlp).unwrap();
    assert!(
        otlp.windows(9).any(|w| w == b"[unknown]"),
        "no [unknown] in the OTLP strings"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
