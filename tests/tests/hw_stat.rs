//! The `stat` example on a real PMU: cycles, instructions and insn per cycle as `perf stat` prints them,
//! the `(xx.xx%)` running fraction of multiplexed events, and `<not counted>` for a group that can never
//! be on the PMU. Event groups (`-e '{a,b}'`) with software events run everywhere.
//!
//! The hardware tests skip where there is no hardware PMU; the arm64 guests of `cargo xtask kernel-matrix
//! --arch aarch64` have one (exact values in its exact mode). There Debian's `perf` is not installed (it
//! needs its own shared libraries; the initramfs has busybox only), so the multiplexed counts are compared
//! with the same command counted by one event alone, which is not multiplexed.

use std::process::{Command, Output};
use std::time::Duration;

use tests::hw::{cycles_group_capacity, exact};
use tests::{has_hardware_pmu, require, Skip};

const NO_PMU: &str = "no hardware PMU here (the arm64 guests of `cargo xtask kernel-matrix --arch \
                      aarch64` have one)";

/// A command with a steady, deterministic amount of user-space work (a shell loop; tens of millions of
/// instructions), long enough for the kernel to rotate multiplexed events many times.
const BUSY: [&str; 3] = [
    "sh",
    "-c",
    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
];

fn stat(args: &[&str]) -> Output {
    tests::run_example("stat", args)
}

/// One event line of the human table: value (as printed), event name, the comment, the `(xx.xx%)`.
#[derive(Debug)]
struct Line {
    value: String,
    name: String,
    comment: String,
    running: Option<f64>,
}

fn lines(stderr: &str) -> Vec<Line> {
    stderr
        .lines()
        .filter_map(|l| {
            let (left, comment) = match l.split_once('#') {
                Some((a, b)) => (a, b.trim().to_owned()),
                None => (l, String::new()),
            };
            let mut words = left.split_whitespace();
            let first = words.next()?;
            let value = if first.starts_with('<') {
                // `<not counted>`, `<not supported>`: two words.
                format!("{first} {}", words.next()?)
            } else {
                first.parse::<f64>().ok()?;
                first.to_owned()
            };
            let name = words.next()?.to_owned();
            if name == "seconds" {
                return None;
            }
            let running = l
                .rsplit_once('(')
                .and_then(|(_, r)| r.strip_suffix("%)"))
                .and_then(|p| p.parse().ok());
            Some(Line {
                value,
                name,
                comment,
                running,
            })
        })
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_group_of_software_events_reads_as_one() {
    let o = stat(&[
        "-x,",
        "-e",
        "{task-clock,page-faults},context-switches",
        "--",
        "true",
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows: Vec<Vec<&str>> = err
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r.len() == 7)
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(
        names,
        ["task-clock", "page-faults", "context-switches"],
        "{err}"
    );
    for r in &rows {
        assert!(r[0].parse::<f64>().is_ok(), "not counted: {r:?}");
    }
    // The group's members share the leader's time running.
    assert_eq!(rows[0][3], rows[1][3], "{err}");
    // perf's grammar: a group's modifiers apply to every member.
    let o = stat(&["-x,", "-e", "{task-clock,page-faults}:u", "--", "true"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let counted = err
        .lines()
        .filter(|l| {
            l.split(',').count() == 7
                && l.split(',')
                    .next()
                    .is_some_and(|v| v.parse::<f64>().is_ok())
        })
        .count();
    assert_eq!(counted, 2, "{err}");
    // A malformed list is refused like any bad event name (exit 1), with the parser's pointer.
    for bad in ["{task-clock,page-faults", "task-clock}"] {
        let o = stat(&["-e", bad, "--", "true"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{bad}: {err}");
        assert!(
            err.contains(&format!("cannot use -e {bad}")) && err.contains("event syntax error"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn cycles_instructions_and_insn_per_cycle_like_perf_stat() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let o = stat(&["-e", "cycles:u,instructions:u", "--", "true"]);
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "{err}");
    let l = lines(&err);
    let find = |n: &str| {
        l.iter()
            .find(|x| x.name == n)
            .unwrap_or_else(|| panic!("no {n} line: {err}"))
    };
    let (cycles, instr) = (find("cycles:u"), find("instructions:u"));
    require!(
        instr.value != "<not supported>",
        Skip::Hardware,
        "this PMU does not count instructions (qemu offers them only under -icount)"
    );
    let (c, i): (f64, f64) = (cycles.value.parse().unwrap(), instr.value.parse().unwrap());
    assert!(c > 0.0 && i > 0.0, "{err}");
    // perf: "#    1.23  insn per cycle", the ratio with two decimals and two spaces.
    let (ratio_text, unit) = instr.comment.split_once("  ").expect("ratio and unit");
    assert_eq!(unit, "insn per cycle", "{err}");
    assert_eq!(ratio_text.split('.').nth(1).map(str::len), Some(2), "{err}");
    let ratio: f64 = ratio_text.trim().parse().expect("a ratio");
    assert!((ratio - i / c).abs() < 0.006, "{ratio} vs {i}/{c}");
    if exact() {
        // One cycle per instruction, both enabled at the exec and disabled at the exit.
        assert_eq!(c, i, "{err}");
        assert!(instr.comment.starts_with("1.00  "), "{err}");
    }
}

#[test]
fn multiplexed_events_show_their_running_fraction() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let one = stat(&[&["-e", "cycles:u", "--"][..], &BUSY].concat());
    let err = text(&one.stderr);
    assert!(one.status.success(), "{err}");
    let truth: f64 = lines(&err)[0].value.parse().expect(&err);
    assert!(
        lines(&err)[0].running.is_none(),
        "one event alone is not multiplexed: {err}"
    );
    let ten = ["cycles:u"; 10].join(",");
    let o = stat(&[&["-e", ten.as_str(), "--"][..], &BUSY].concat());
    let err = text(&o.stderr);
    println!("alone: cycles:u {truth}\n{err}");
    assert!(o.status.success(), "{err}");
    let l = lines(&err);
    assert_eq!(l.len(), 10, "{err}");
    let mut worst = 0f64;
    let mut sum = 0f64;
    for x in &l {
        let running = x.running.unwrap_or_else(|| panic!("no (xx.xx%) on {x:?}"));
        assert!(running > 0.0 && running < 100.0, "{x:?}");
        let v: f64 = x.value.parse().unwrap();
        worst = worst.max((v - truth).abs() / truth);
        sum += v;
    }
    let mean = (sum / l.len() as f64 - truth).abs() / truth;
    println!(
        "scaled error against the count alone: worst {:.4}%, mean of the ten {:.4}%",
        worst * 100.0,
        mean * 100.0
    );
    if exact() {
        // The library's own scaling of a uniform loop is within 0.1% (hw_count). A whole command
        // is not uniform: its exec and page faults run in the kernel, where cycles:u does not
        // count, so an event scheduled out then is scaled up from user time only. Usually
        // 0.08-0.14% off; once (7.2, a clean-clone CI) one event 2.42% and the mean 0.44%, when
        // the rotations fell on the start-up differently. The mean shares the start-up among all.
        assert!(worst < 0.03, "{:.4}% off", worst * 100.0);
        assert!(mean < 0.01, "the mean is {:.4}% off", mean * 100.0);
    }
    // Elsewhere cycles follow the clock (frequency scaling, or the host's load under qemu without
    // icount): another run's count is no truth, so only the multiplexing is checked.
}

/// A busy child process to attach to, killed on drop.
struct Busy(std::process::Child);

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_group_that_cannot_fit_is_not_counted() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let k = cycles_group_capacity();
    println!("{k} cycles counters fit in one group");
    let group = |n: usize| format!("{{{}}}", vec!["cycles:u"; n].join(","));
    let busy = Busy(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn a busy shell"),
    );
    std::thread::sleep(Duration::from_millis(50));
    let pid = busy.0.id().to_string();
    // Attached to a running process, the leader is opened disabled and enabled later: the kernel does
    // not count it when members join, accepts one member too many, and the group never runs.
    for (n, fits) in [(k, true), (k + 1, false)] {
        let o = stat(&["-p", &pid, "--duration", "0.3", "-e", &group(n)]);
        let err = text(&o.stderr);
        println!("group of {n}:\n{err}");
        if !fits && !o.status.success() && !cfg!(target_arch = "aarch64") {
            // Other PMU drivers may count a disabled leader when members join: then the member is
            // refused, with the counters named.
            assert!(err.contains(&format!("has {k} counters")), "{err}");
            continue;
        }
        assert!(o.status.success(), "{err}");
        let l = lines(&err);
        assert_eq!(l.len(), n, "{err}");
        for x in &l {
            if fits {
                let v: f64 = x.value.parse().unwrap_or_else(|_| panic!("{x:?}"));
                assert!(v > 0.0, "{x:?}");
                assert!(
                    x.running.is_none(),
                    "a group that fits is not multiplexed: {x:?}"
                );
            } else {
                assert_eq!(x.value, "<not counted>", "{x:?}");
            }
        }
    }
    drop(busy);
    // Counting a command, the leader is enabled by the exec (enable_on_exec), so the kernel counts it
    // and refuses the member that does not fit; the example reports the library's explanation.
    let o = stat(&["-e", &group(k + 1), "--", "true"]);
    let err = text(&o.stderr);
    println!("group of {} on a command: {err}", k + 1);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("has {k} counters")), "{err}");
}
