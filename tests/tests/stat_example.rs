//! The `stat` example of perf-event (`cargo run -p perf-event-safe --example stat`), run as a user runs it:
//! its counts agree with `perf stat`, its CSV and JSON parse, errors exit 1 and usage errors 2.
//!
//! The example binary is built by the first test that needs it (`cargo build -p perf-event-safe --example
//! stat`, same profile and target directory as these tests), so `cargo test -p tests` works alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tests::{is_root, paranoid, require, Skip};

/// The example binary, built once.
fn stat_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| tests::example_binary("stat"))
}

/// Runs the example; the counts go to stderr, as with perf.
fn stat(args: &[&str]) -> Output {
    Command::new(stat_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running the stat example")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// CSV rows (`-x,`) of stderr: event name → (value field, all fields).
fn csv_rows(stderr: &str) -> Vec<Vec<String>> {
    stderr
        .lines()
        .filter(|l| l.split(',').count() == 7)
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

/// The numeric value of event `name` in CSV rows (msec for clocks), `None` if absent or not counted.
fn csv_value(rows: &[Vec<String>], name: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r[2] == name)
        .and_then(|r| r[0].parse().ok())
}

fn has_perf() -> bool {
    Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A workload with a stable page-fault count (dd's 8 MiB buffer, faulted page by page) and ~100 ms
/// of deterministic CPU work (a shell loop).
const WORKLOAD: [&str; 3] = [
    "sh",
    "-c",
    "dd if=/dev/zero of=/dev/null bs=8M count=20 status=none; \
     i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
];

/// What one run of `perf stat` or of the example printed, in perf's human format.
#[derive(Debug)]
struct Run {
    task_clock_ms: f64,
    page_faults: f64,
    /// `seconds user` + `seconds sys`: the command's CPU time as the kernel accounts it (rusage).
    cpu_ms: f64,
}

fn parse_human(stderr: &str) -> Run {
    let value = |suffix: &str| -> f64 {
        stderr
            .lines()
            .find_map(|l| {
                let l = l.split('#').next()?.trim();
                let v = l.strip_suffix(suffix)?;
                v.trim().replace(',', "").parse().ok()
            })
            .unwrap_or_else(|| panic!("no '{suffix}' line in:\n{stderr}"))
    };
    Run {
        task_clock_ms: value("msec task-clock"),
        page_faults: value("page-faults"),
        cpu_ms: (value("seconds user") + value("seconds sys")) * 1000.0,
    }
}

/// The example and `perf stat` count the same command alike.
///
/// Page faults are the same count in every run. Task time is not: a parallel test run makes the
/// same shell loop take 150 to 250 ms from run to run. So each run's task-clock is compared with
/// that same run's CPU time as the kernel accounts it (the `seconds user` + `seconds sys` lines,
/// from rusage), for both tools: the two must agree in either tool's runs (the median over
/// alternating runs, as steal time inside a VM counts in task-clock but not in rusage).
#[test]
fn agrees_with_perf_stat() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    let events = "task-clock,page-faults,context-switches";
    let (mut ours, mut perf) = (vec![], vec![]);
    for _ in 0..5 {
        let mut args = vec!["-e", events];
        args.extend(WORKLOAD);
        let o = stat(&args);
        let err = text(&o.stderr);
        assert!(o.status.success(), "stat failed: {err}");
        ours.push(parse_human(&err));

        let p = Command::new("perf")
            .args(["stat", "-e", events])
            .args(WORKLOAD)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
            .expect("running perf");
        let err = text(&p.stderr);
        assert!(p.status.success(), "perf stat failed: {err}");
        perf.push(parse_human(&err));
    }
    let pf = |runs: &[Run]| median(runs.iter().map(|r| r.page_faults).collect());
    let ratio = |runs: &[Run]| median(runs.iter().map(|r| r.task_clock_ms / r.cpu_ms).collect());
    let (opf, ppf, oratio, pratio) = (pf(&ours), pf(&perf), ratio(&ours), ratio(&perf));
    println!("stat: {ours:?}\nperf: {perf:?}");
    println!(
        "page faults (median): stat {opf}, perf {ppf}; task-clock / (user + sys) (median): \
         stat {oratio:.4}, perf {pratio:.4}"
    );
    assert!(
        ppf > 1000.0,
        "the workload should fault its 8 MiB buffer in"
    );
    assert!(
        (opf - ppf).abs() <= 0.02 * ppf,
        "page faults differ by more than 2%: stat {opf}, perf {ppf}"
    );
    // perf's own agreement checks the method; ours must agree as well as perf's does.
    for (who, r) in [("perf stat", pratio), ("the stat example", oratio)] {
        assert!(
            (0.95..=1.05).contains(&r),
            "{who}: task-clock is {r:.4} times the command's user + sys time"
        );
    }
    assert!(
        (oratio - pratio).abs() <= 0.03,
        "task-clock / (user + sys): stat {oratio:.4}, perf {pratio:.4}"
    );
}

#[test]
fn csv_has_the_default_events_in_perf_column_order() {
    let o = stat(&["-x,", "sh", "-c", ": > /dev/null"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows = csv_rows(&err);
    let names: Vec<&str> = rows.iter().map(|r| r[2].as_str()).collect();
    let base = |n: &str| n.strip_suffix(":u").unwrap_or(n).to_owned();
    let names: Vec<String> = names.into_iter().map(base).collect();
    assert_eq!(
        names,
        [
            "task-clock",
            "context-switches",
            "cpu-migrations",
            "page-faults",
            "cycles",
            "instructions",
            "branches",
            "branch-misses"
        ],
        "{err}"
    );
    for r in &rows {
        // value, unit, event, run time, % running, metric value, metric unit
        let counted = r[0].parse::<f64>().is_ok();
        assert!(
            counted || r[0] == "<not supported>" || r[0] == "<not counted>",
            "{r:?}"
        );
        r[3].parse::<u64>().expect("run time in ns");
        let pct: f64 = r[4].parse().expect("percentage running");
        assert!((0.0..=100.0).contains(&pct), "{r:?}");
        if counted {
            assert!(r[5].is_empty() || r[5].parse::<f64>().is_ok(), "{r:?}");
        }
    }
    let tc = &rows[0];
    assert_eq!(tc[1], "msec");
    assert!(tc[0].parse::<f64>().unwrap() > 0.0, "{tc:?}");
    assert_eq!(tc[6], "CPUs utilized");
    assert!(
        csv_value(&rows, "page-faults").is_some_and(|v| v > 0.0) || err.contains("page-faults:u")
    );
}

/// A flat JSON object of string and number values, as perf's `--json` lines are; `None` when the
/// line is not one.
fn parse_json_object(line: &str) -> Option<Vec<(String, String)>> {
    let mut chars = line.trim().chars().peekable();
    let skip_ws = |c: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while c.peek().is_some_and(|c| c.is_whitespace()) {
            c.next();
        }
    };
    let string = |c: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Option<String> {
        if c.next()? != '"' {
            return None;
        }
        let mut out = String::new();
        loop {
            match c.next()? {
                '"' => return Some(out),
                '\\' => match c.next()? {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'u' => {
                        let hex: String = c.by_ref().take(4).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    ch => out.push(ch),
                },
                ch if (ch as u32) < 0x20 => return None,
                ch => out.push(ch),
            }
        }
    };
    if chars.next()? != '{' {
        return None;
    }
    let mut fields = Vec::new();
    loop {
        skip_ws(&mut chars);
        let key = string(&mut chars)?;
        skip_ws(&mut chars);
        if chars.next()? != ':' {
            return None;
        }
        skip_ws(&mut chars);
        let value = if chars.peek() == Some(&'"') {
            string(&mut chars)?
        } else {
            let mut num = String::new();
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
            {
                num.extend(chars.next());
            }
            num.parse::<f64>().ok()?;
            num
        };
        fields.push((key, value));
        skip_ws(&mut chars);
        match chars.next()? {
            ',' => continue,
            '}' => return chars.next().is_none().then_some(fields),
            _ => return None,
        }
    }
}

#[test]
fn json_lines_parse_and_name_the_events() {
    let o = stat(&["--json", "-e", "task-clock,page-faults", "true"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let objs: Vec<Vec<(String, String)>> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| parse_json_object(l).unwrap_or_else(|| panic!("not a JSON object: {l}")))
        .collect();
    assert_eq!(objs.len(), 2, "{err}");
    let get = |o: &[(String, String)], k: &str| {
        o.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {k} in {o:?}"))
    };
    let keys: Vec<&str> = objs[0].iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "counter-value",
            "unit",
            "event",
            "event-runtime",
            "pcnt-running",
            "metric-value",
            "metric-unit"
        ]
    );
    assert!(get(&objs[0], "event").starts_with("task-clock"));
    assert_eq!(get(&objs[0], "unit"), "msec");
    assert!(get(&objs[0], "counter-value").parse::<f64>().unwrap() > 0.0);
    assert!(get(&objs[1], "event").starts_with("page-faults"));
    assert!(get(&objs[1], "counter-value").parse::<f64>().unwrap() > 0.0);
    assert!(get(&objs[1], "event-runtime").parse::<u64>().unwrap() > 0);
}

#[test]
fn tracepoints_count() {
    require!(
        is_root(),
        Skip::Privilege,
        "counting a tracepoint needs root here"
    );
    tests::require_tracepoint!("sched:sched_switch");
    let o = stat(&[
        "-x,",
        "-e",
        "sched:sched_switch",
        "sh",
        "-c",
        "sleep 0.01; sleep 0.01; sleep 0.01",
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let n = csv_value(&csv_rows(&err), "sched:sched_switch").expect(&err);
    // Each sleep switches its task out at least once (three processes: sh's children).
    assert!(n >= 3.0, "sched:sched_switch counted {n}: {err}");
    // Asked for in user space only, where tracepoints never fire: counted, and said to be 0.
    let o = stat(&["-x,", "-e", "sched:sched_switch:u", "sleep", "0.01"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        csv_value(&csv_rows(&err), "sched:sched_switch:u"),
        Some(0.0),
        "{err}"
    );
    assert!(
        err.contains("sched:sched_switch:u counts user space only") && err.contains("drop the :u"),
        "{err}"
    );
}

#[test]
fn bad_event_is_an_error_with_exit_1() {
    let o = stat(&["-e", "no-such-event-xyz", "true"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no-such-event-xyz") && err.contains("cannot use -e"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// A misspelt event, PMU or term gets the nearest names, and the explanation is printed once.
#[test]
fn misspelt_events_get_the_nearest_names_once() {
    for (e, near) in [
        ("page-fautls", "did you mean 'page-faults'?"),
        ("task_clock", "did you mean 'task-clock'?"),
        ("msrr/tsc/", "did you mean 'msr'?"),
        ("cpu-clock/perod=1/", "did you mean 'period'?"),
    ] {
        // The `msr` PMU is x86's (the arm64 guests have none to suggest).
        if e.starts_with("msrr") && !tests::has_pmu("msr") {
            continue;
        }
        let o = stat(&["-e", e, "true"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.matches(near).count(), 1, "{e}: {err}");
        // Each line of the explanation once.
        let lines: Vec<&str> = err.lines().collect();
        for l in &lines {
            assert_eq!(
                lines.iter().filter(|m| *m == l).count(),
                1,
                "{l:?} twice: {err}"
            );
        }
        assert!(
            !err.contains("perf list` prints"),
            "two `perf list` hints: {err}"
        );
    }
    // A tracepoint, where tracefs can be read.
    let tracefs = Path::new("/sys/kernel/tracing/events/sched/sched_switch");
    require!(
        tracefs.exists(),
        Skip::Environment,
        "{} is not there (tracefs not mounted or not readable)",
        tracefs.display()
    );
    let o = stat(&["-e", "sched:sched_swich", "true"]);
    let err = text(&o.stderr);
    assert!(err.contains("did you mean 'sched:sched_switch'?"), "{err}");
}

#[test]
fn bad_options_give_usage_and_exit_2() {
    for args in [
        &["--bogus"][..],
        &["-e"],
        &["-x,", "--json", "true"],
        &["-p", "abc"],
        &["-a", "-p", "1"],
        &["--duration", "-1", "true"],
    ] {
        let o = stat(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("usage: stat"), "{args:?}: {err}");
    }
    let o = stat(&["--help"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("--field-separator"));
}

#[test]
fn missing_command_and_process_are_errors_with_exit_1() {
    let o = stat(&["/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("cannot run /nonexistent/command"));
    let o = stat(&["-p", "2147483647"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("no such process"));
}

#[test]
fn the_command_exit_status_is_passed_on() {
    let o = stat(&["-x,", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
}

#[test]
fn no_command_measures_the_builtin_workload() {
    let o = stat(&["-x,"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows = csv_rows(&err);
    let value = |name: &str| {
        csv_value(&rows, name)
            .or_else(|| csv_value(&rows, &format!("{name}:u")))
            .unwrap_or_else(|| panic!("no {name} in {err}"))
    };
    assert!(value("task-clock") > 1.0, "{err}");
    // 16 MiB of fresh pages: one fault per 4 KiB page (more with the sort's buffers); where
    // transparent huge pages are always on (Debian's kernels), one per 2 MiB page at least.
    let thp_always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]"));
    let min_faults = if thp_always { 8.0 } else { 4096.0 };
    assert!(value("page-faults") >= min_faults, "{err}");
    if csv_value(&rows, "context-switches").is_some() {
        // Kernel counted: the three sleeps switch out.
        assert!(value("context-switches") >= 3.0, "{err}");
    }
    // The human table too.
    let o = stat(&[]);
    let err = text(&o.stderr);
    assert!(
        err.contains("Performance counter stats for 'built-in workload"),
        "{err}"
    );
    assert!(err.contains("seconds time elapsed"), "{err}");
    assert!(err.contains("CPUs utilized"), "{err}");
}

#[test]
fn attach_to_a_pid_until_it_exits_and_system_wide_for_a_duration() {
    stat_bin(); // built before the target starts, so that it still runs when stat attaches
    let mut child = Command::new("sh")
        .args([
            "-c",
            "sleep 0.3; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done",
        ])
        .spawn()
        .expect("spawn sh");
    let pid = child.id().to_string();
    let t0 = Instant::now();
    let o = stat(&["-x,", "-e", "task-clock,page-faults", "-p", &pid]);
    let took = t0.elapsed();
    let _ = child.wait();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(took < Duration::from_secs(20), "stat -p took {took:?}");
    let rows = csv_rows(&err);
    assert!(
        // The shell's loop after its sleep: tens of ms, all after stat attached.
        csv_value(&rows, "task-clock").is_some_and(|v| v > 5.0),
        "{err}"
    );

    require!(
        is_root() || paranoid() <= 0,
        Skip::Privilege,
        "system-wide counting needs perf_event_paranoid <= 0"
    );
    let t0 = Instant::now();
    let o = stat(&["-x,", "-a", "--duration", "0.2"]);
    let took = t0.elapsed();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    let rows = csv_rows(&err);
    // cpu-clock over every CPU for 0.2 s: about 200 ms per CPU.
    let clock = csv_value(&rows, "cpu-clock").expect(&err);
    assert!(clock > 150.0, "cpu-clock {clock} msec: {err}");
}

/// As an unprivileged user: kernel-space counting falls back to user space only (paranoid 2), or
/// the error says what the level allows.
#[test]
fn permission_limits_are_explained() {
    require!(
        is_root(),
        Skip::Privilege,
        "needs root to switch to uid 65534"
    );
    let setpriv = Path::new("/usr/bin/setpriv");
    require!(
        setpriv.exists(),
        Skip::Environment,
        "setpriv (util-linux) is not installed"
    );
    // A copy the unprivileged user can execute wherever the checkout lies.
    let dir = std::env::temp_dir().join(format!("perf-rs-stat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("stat");
    tests::copy_executable(stat_bin(), &bin);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&bin)
            .args(args)
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .expect("setpriv")
    };
    let level = paranoid();
    let o = as_nobody(&["-x,", "true"]);
    let err = text(&o.stderr);
    println!("paranoid {level}, as uid 65534: {err}");
    match level {
        // Only kernels with the Debian/Android restriction refuse everything at 3 and above
        // (and then say so); mainline acts as at 2.
        3.. if !o.status.success() => {
            assert_eq!(o.status.code(), Some(1), "{err}");
            assert!(err.contains("perf_event_paranoid is"), "{err}");
            assert!(err.contains("at level 3 and above"), "{err}");
            assert!(err.contains("Debian/Android"), "{err}");
        }
        2.. => {
            assert!(o.status.success(), "{err}");
            assert!(err.contains("task-clock:u"), "{err}");
            assert!(err.contains("count user space only"), "{err}");
            assert!(
                err.contains(&format!("perf_event_paranoid is {level}")),
                "{err}"
            );
        }
        _ => {
            assert!(o.status.success(), "{err}");
            assert!(!err.contains(":u,"), "{err}");
        }
    }
    if level == 2 {
        // Context switches happen in the kernel: not shown as user-space zeros, but explained.
        let o = as_nobody(&["sh", "-c", "sleep 0.01"]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("<not counted>      context-switches"), "{err}");
        assert!(
            err.contains("context-switches, cpu-migrations happen in the kernel")
                && err.contains("sysctl kernel.perf_event_paranoid=1"),
            "{err}"
        );
        // A tracepoint by number (what a user without tracefs access can give): refused with
        // the reason, not counted 0.
        if let Ok(tp) = tests::tracepoint("sched:sched_switch") {
            let event = format!("tracepoint/config={}/", tp.id);
            let o = as_nobody(&["-e", &event, "sleep", "0.01"]);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{err}");
            assert!(
                err.contains(&format!("{event} happens in the kernel")),
                "{err}"
            );
        }
    }
    if level >= 1 {
        // Another user's process: the library's reason (ptrace access), kept.
        let o = as_nobody(&["-p", "1", "--duration", "0.1"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("observing another user's process needs ptrace access"),
            "{err}"
        );
    }
    // A tracepoint by name: tracefs is root-only or not mountable by this user; said for a shell
    // user (what to run), not in Rust API terms.
    let o = as_nobody(&["-e", "sched:sched_switch", "true"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("hint: run stat as root"), "{err}");
    assert!(!err.contains("Tracepoint {"), "{err}");
    if level >= 1 {
        let o = as_nobody(&["-a", "true"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("perf_event_paranoid is {level}")) && err.contains("hint:"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `perf stat`'s output for the same arguments (stderr), when perf is installed.
fn perf_stat(args: &[&str]) -> Option<String> {
    if !has_perf() {
        return None;
    }
    let o = Command::new("perf")
        .arg("stat")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    o.status.success().then(|| text(&o.stderr))
}

/// The line of `event` in a human table.
fn line_of<'a>(out: &'a str, event: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().nth(2) == Some(event) || l.contains(&format!(" {event} ")))
        .unwrap_or_else(|| panic!("no {event} line in:\n{out}"))
}

/// `-r N`: the means of N runs with perf's spread `( +-  1.23% )` at perf's column, the elapsed
/// line as `MEAN +- SD seconds time elapsed  ( +- P% )`, and in CSV the spread after the event.
#[test]
fn repeat_prints_means_and_spreads_as_perf_does() {
    let cmd = ["sh", "-c", "ls / > /dev/null"];
    let mut args = vec!["-r", "3", "-e", "task-clock,page-faults"];
    args.extend(cmd);
    let o = stat(&args);
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(" Performance counter stats for 'sh -c ls / > /dev/null' (3 runs):"),
        "{err}"
    );
    // task-clock varies from run to run: its spread is printed.
    let clock = line_of(&err, "task-clock");
    let at = clock
        .find("( +-")
        .unwrap_or_else(|| panic!("no spread: {clock}"));
    assert!(clock.ends_with("% )"), "{clock}");
    let elapsed = err
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .expect(&err);
    let words: Vec<&str> = elapsed.split_whitespace().collect();
    assert_eq!(words.get(1), Some(&"+-"), "{elapsed}");
    assert!(
        words[0].parse::<f64>().is_ok() && words[2].parse::<f64>().is_ok(),
        "{elapsed}"
    );
    assert!(
        !err.contains("seconds user"),
        "perf prints no user/sys with -r: {err}"
    );
    if let Some(perf) = perf_stat(&args) {
        println!("perf:\n{perf}");
        let theirs = line_of(&perf, "task-clock");
        assert_eq!(
            theirs.find("( +-"),
            Some(at),
            "ours: {clock}\nperf: {theirs}"
        );
        let perf_elapsed = perf
            .lines()
            .find(|l| l.contains("seconds time elapsed"))
            .unwrap();
        assert_eq!(
            perf_elapsed.find(" +- "),
            elapsed.find(" +- "),
            "ours: {elapsed}\nperf: {perf_elapsed}"
        );
    }
    // CSV: value,unit,event,spread,run time,% running,metric,unit.
    let mut args = vec!["-r", "3", "-x,", "-e", "page-faults"];
    args.extend(cmd);
    let o = stat(&args);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let row: Vec<&str> = err
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r.get(2) == Some(&"page-faults"))
        .expect(&err);
    assert_eq!(row.len(), 8, "{row:?}");
    assert!(
        row[3].ends_with('%') && row[3].trim_end_matches('%').parse::<f64>().is_ok(),
        "{row:?}"
    );
    let faults: f64 = row[0].parse().unwrap();
    assert!(faults > 10.0, "{row:?}");
}

/// `-I MS`: one line per event per interval while the command runs, the time first, perf's header,
/// and the last partial interval; the intervals add up to the command's total.
#[test]
fn interval_lines_as_perf_prints_them() {
    // Some 30-80 ms of shell CPU time, then a 0.3 s sleep: at least three intervals however fast
    // the CPU (60000 loop steps alone once took 86 ms, one interval).
    let busy = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.3";
    let o = stat(&["-I", "100", "-e", "task-clock", "sh", "-c", busy]);
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "{err}");
    let mut lines = err.lines().filter(|l| !l.trim().is_empty());
    assert_eq!(
        lines.next(),
        Some("#           time             counts unit events"),
        "{err}"
    );
    let mut last = 0.0;
    let mut total = 0.0;
    let mut n = 0;
    for l in lines {
        // perf prints its header again every 25 intervals (a slow, emulated CPU gets there), and an
        // interval the counter did not run in (the last, partial one in an arm64 guest) as not counted.
        if l.starts_with('#') || l.contains("<not counted>") {
            continue;
        }
        // "     0.100123456              96.42 msec task-clock   #    0.951 CPUs utilized"
        let time = &l[..16];
        let t: f64 = time
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no time in {l:?}"));
        assert!(time.starts_with(' ') && t > last, "{l:?} after {last}");
        last = t;
        let words: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(&words[2..4], ["msec", "task-clock"], "{l:?}");
        total += words[1].parse::<f64>().unwrap_or(0.0);
        n += 1;
    }
    assert!(n >= 2, "{n} intervals: {err}");
    assert!(
        !err.contains("seconds time elapsed"),
        "no summary with -I: {err}"
    );
    assert!(total > 10.0, "the intervals sum to {total} msec");
    if let Some(perf) = perf_stat(&["-I", "100", "-e", "task-clock", "sh", "-c", busy]) {
        println!("perf:\n{perf}");
        let theirs = perf.lines().find(|l| l.contains("task-clock")).unwrap();
        let ours = err.lines().find(|l| l.contains("task-clock")).unwrap();
        // The same columns: the value ends, and the event starts, where perf's do.
        assert_eq!(
            theirs.find(" msec"),
            ours.find(" msec"),
            "ours: {ours}\nperf: {theirs}"
        );
        assert_eq!(
            theirs.find("#"),
            ours.find("#"),
            "ours: {ours}\nperf: {theirs}"
        );
    }
    // CSV: the time, then the usual fields.
    let o = stat(&["-I", "100", "-x,", "-e", "task-clock", "sleep", "0.25"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows: Vec<Vec<&str>> = err.lines().map(|l| l.split(',').collect()).collect();
    assert!(rows.len() >= 2, "{err}");
    for r in &rows {
        assert_eq!(r.len(), 8, "{r:?}");
        assert!(r[0].trim().parse::<f64>().is_ok(), "{r:?}");
        assert_eq!(r[3], "task-clock", "{r:?}");
    }
    // Bad values are usage errors.
    for args in [
        &["-r", "0", "true"][..],
        &["-I", "5", "true"],
        &["-I", "100"],
    ] {
        let o = stat(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
}

/// SIGTERM (systemd's and docker's stop), SIGHUP and SIGINT sent to `stat` alone end the counting
/// promptly and the counts are written (`-o`), for a command, `-p` and `-a --duration`.
#[test]
fn sigterm_sighup_and_sigint_end_the_counting_with_the_counts_written() {
    require!(
        is_root() || paranoid() <= 0,
        Skip::Privilege,
        "system-wide counting needs perf_event_paranoid <= 0"
    );
    let bin = stat_bin();
    let dir = std::env::temp_dir().join(format!("stat-signals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (how, signal) in [
        ("cmd", "TERM"),
        ("cmd", "HUP"),
        ("cmd", "INT"),
        ("pid", "TERM"),
        ("all", "TERM"),
    ] {
        let out = dir.join(format!("{how}-{signal}.txt"));
        // What is counted would run for a minute.
        let mut target = None;
        let mut args: Vec<String> = vec!["-e".into(), "task-clock".into(), "-o".into()];
        args.push(out.to_str().unwrap().into());
        match how {
            "cmd" => args.extend(["--".into(), "sleep".into(), "60".into()]),
            "pid" => {
                let t = Command::new("sleep").arg("60").spawn().unwrap();
                args.extend(["-p".into(), t.id().to_string()]);
                target = Some(t);
            }
            _ => args.extend(["-a".into(), "--duration".into(), "60".into()]),
        }
        // Its stderr into a file: the command it runs inherits a pipe and would hold it open.
        let log = dir.join(format!("{how}-{signal}.log"));
        let mut child = Command::new(bin)
            .args(&args)
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // The output is created before the counters open: from then on, wait a little.
        let t = Instant::now();
        while !out.exists() && t.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(500));
        let sent = Instant::now();
        assert!(Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap()
            .success());
        while child.try_wait().unwrap().is_none() && sent.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let took = sent.elapsed().as_secs_f64();
        let _ = child.kill();
        let status = child.wait().unwrap();
        if let Some(mut t) = target {
            let _ = t.kill();
            let _ = t.wait();
        }
        let written = std::fs::read_to_string(&out).unwrap_or_default();
        println!(
            "{how} SIG{signal}: {status} {took:.2} s after the signal; {}\n{written}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        // Well under a second on an idle machine (printed above); the bound allows a loaded one.
        assert!(
            took < tests::PROMPT_SECS,
            "{how} SIG{signal}: {took:.2} s to end the counting"
        );
        assert!(
            written.contains("task-clock") && written.contains("seconds time elapsed"),
            "{how} SIG{signal}: the counts were not written:\n{written}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A link the user nobody planted at `-o`'s name in a sticky world-writable folder (as /tmp) is
/// replaced, never followed: the root-owned file it points to keeps its content.
#[test]
fn a_link_planted_at_the_output_is_never_followed() {
    require!(
        is_root(),
        Skip::Privilege,
        "playing the user nobody next to a root stat needs root"
    );
    require!(
        Command::new("setpriv")
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "true"
            ])
            .status()
            .is_ok_and(|s| s.success()),
        Skip::Environment,
        "setpriv (util-linux) or the user nobody is missing"
    );
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("stat-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = shared.join("counts.txt");
    let ln = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "ln",
            "-s",
        ])
        .arg(&victim)
        .arg(&out)
        .status()
        .unwrap();
    assert!(ln.success());
    let o = stat(&[
        "-e",
        "task-clock",
        "-o",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    let err = text(&o.stderr);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "the root-owned file outside -o was written through the planted link"
    );
    assert!(o.status.success(), "{err}");
    assert!(std::fs::symlink_metadata(&out)
        .unwrap()
        .file_type()
        .is_file());
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("task-clock"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every duration and number on the command line is range-checked: out of range, the message names
/// the option and the value, and the exit status is 2, never a panic.
#[test]
fn durations_and_numbers_out_of_range_exit_2_never_a_panic() {
    let bad: &[(&str, &[&str])] = &[
        (
            "--duration",
            &["1e20", "inf", "NaN", "-1", "0", "1e-300", "1e300"],
        ),
        ("-I", &["0", "9", "-1", "1e3", "18446744073709551616"]),
        ("-r", &["0", "-1", "100001", "18446744073709551616"]),
    ];
    for (flag, values) in bad {
        for v in *values {
            let o = stat(&["-e", "task-clock", flag, v, "--", "true"]);
            let err = text(&o.stderr);
            assert!(!err.contains("panicked"), "{flag} {v}: {err}");
            assert_eq!(o.status.code(), Some(2), "{flag} {v}: {err}");
            assert!(err.contains(v), "{flag} {v}: the value is named: {err}");
        }
    }
}
