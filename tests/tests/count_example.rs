//! `perf-sys`'s `count` example (`cargo run -p perf-sys --example count -- CMD`), run as a user runs
//! it: with or without `--` before the command, the command's exit status passed on, usage errors
//! exit 2.

use std::process::{Command, Output, Stdio};

use tests::Skip;

fn count(args: &[&str]) -> Option<Output> {
    if std::env::var_os("PERF_EVENT_EXAMPLES").is_some() {
        // The kernel matrix ships perf-event's examples only.
        return None;
    }
    let bin = tests::package_example_binary("perf-sys", "count");
    Some(
        Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running the count example"),
    )
}

/// The value before `name` on its line (`   103 page-faults`, `  2.41 msec task-clock`).
fn value(stdout: &str, name: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            let v = words.next()?.parse().ok()?;
            let next = words.next()?;
            let n = if next == "msec" { words.next()? } else { next };
            (n == name).then_some(v)
        })
        .unwrap_or_else(|| panic!("no {name} in:\n{stdout}"))
}

#[test]
fn counts_a_command_given_with_or_without_dashes() {
    let Some(o) = count(&["--", "sh", "-c", "exit 0"]) else {
        tests::skip(Skip::Environment, "the count example is not shipped here");
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("Performance counter stats for 'sh -c exit 0'"),
        "{out}"
    );
    assert!(value(&out, "task-clock") > 0.0, "{out}");
    assert!(value(&out, "page-faults") > 10.0, "{out}");

    let o = count(&["sh", "-c", "exit 3"]).unwrap();
    assert_eq!(o.status.code(), Some(3));
    for args in [&[][..], &["--"], &["--bogus", "true"]] {
        let o = count(args).unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("usage: count"), "{args:?}: {err}");
    }
    let o = count(&["--", "/nonexistent/command"]).unwrap();
    assert_eq!(o.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run"));
}
