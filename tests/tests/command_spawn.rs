//! `perf_event::command::spawn`: counters that start at a command's exec and follow its children,
//! and nothing of this process (before or after the spawn, on any thread).

use std::process::Command;
use std::time::Duration;

use perf_event::command;
use perf_event::config::{Cpu, Opts, SampleOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::Error;

fn user_opts() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o
}

/// The shell and its two children are counted; this process's own work meanwhile, and a command
/// it spawns afterwards, are not.
#[test]
fn counts_the_command_and_its_children_only() {
    // A shell whose children each burn ~100 ms of CPU.
    let burn = "i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done";
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("sh -c '{burn}'; sh -c '{burn}'")]);
    let (mut child, clock) = command::spawn(&mut cmd, |exec| {
        Counter::new(
            Software::TaskClock,
            (exec.target(), Cpu::ALL),
            exec.opts(&user_opts()),
        )
    })
    .unwrap();
    // This thread works meanwhile, then spawns a command four times the size: neither counts
    // (the counters live on spawn's helper thread, which is gone).
    std::hint::black_box(tests::busy_cpu(Duration::from_millis(200)));
    let other = Command::new("sh")
        .args(["-c", &[burn; 8].join("; ")])
        .status()
        .unwrap();
    assert!(other.success());
    assert!(child.wait().unwrap().success());
    let ns = clock.stat().unwrap().count;
    println!("the command's task-clock: {} ms", ns / 1_000_000);
    // The children's loops are counted (each takes tens of ms at least).
    assert!(
        ns > 10_000_000,
        "only {ns} ns counted: the children were not followed"
    );
    let (mut alone, solo) = command::spawn_counted(
        Command::new("sh").args(["-c", &format!("sh -c '{burn}'; sh -c '{burn}'")]),
        Software::TaskClock,
        &user_opts(),
    )
    .unwrap();
    assert!(alone.wait().unwrap().success());
    let quiet = solo.stat().unwrap().count;
    // The same command, with nothing else spawned: the two counts are of the same work; the other
    // command (4 times this one) would make the first count 5 times this one. The same loops' CPU
    // time varies with what else runs (145 ms against 81 ms seen under two CPU hogs), so the bound
    // sits between: 3 times.
    println!("the same command alone: {} ms", quiet / 1_000_000);
    // On an emulated CPU (the kernel matrix's TCG guests) the same loops take from one to two times as
    // long from run to run (8.3 s vs 4.6 s seen on 5.10), which hides a 1.5 times larger command: the
    // ratio is checked on real CPUs only.
    assert!(
        tests::emulated() || (ns as f64) < quiet as f64 * 3.0,
        "{ns} ns with another command spawned afterwards vs {quiet} ns alone: it was counted"
    );
}

/// A program that cannot run, and `open`'s own error, are errors of `spawn`.
#[test]
fn a_missing_program_and_an_open_error_are_reported() {
    let mut cmd = Command::new("/nonexistent/program");
    let e = command::spawn(&mut cmd, |exec| {
        Counter::new(
            Software::PageFault,
            (exec.target(), Cpu::ALL),
            exec.opts(&user_opts()),
        )
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("cannot run /nonexistent/program: "),
        "{msg}"
    );
    // open's own error comes back as it was, and nothing is spawned.
    let mut cmd = Command::new("true");
    let e = command::spawn(&mut cmd, |exec| {
        let mut o = exec.opts(&user_opts());
        o.sample_on = SampleOn::Freq(0);
        Counter::new(Software::PageFault, (exec.target(), Cpu::ALL), o)
    })
    .unwrap_err();
    assert!(matches!(e, Error::InvalidOption { .. }), "{e:?}");
}

/// A group follows the command too: the leader with `FromExec::opts`, a member with
/// `FromExec::sibling_opts`; both count the command's children.
#[test]
fn a_group_follows_the_command() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "ls / > /dev/null; ls / > /dev/null"]);
    let mut member = perf_event::config::sibling::Opts::default();
    member.exclude.kernel = true;
    member.enable = true;
    let (mut child, group) = command::spawn(&mut cmd, |exec| {
        let mut g = perf_event::count::CounterGroup::new(
            Software::TaskClock,
            (exec.target(), Cpu::ALL),
            exec.opts(&user_opts()),
        )?;
        g.add(Software::PageFault, exec.sibling_opts(&member))?;
        Ok::<_, Error>(g)
    })
    .unwrap();
    assert!(child.wait().unwrap().success());
    let leader = group.leader().stat().unwrap().count;
    let faults = group.siblings()[0].stat().unwrap().count;
    println!("task-clock {leader} ns, page faults {faults}");
    // Three execs' worth of page faults (the shell and two ls): far more than 10.
    assert!(leader > 0 && faults > 10, "{leader} ns, {faults} faults");
}
