//! A finished capture names its kernel frames from only the `/proc/kallsyms` symbols that name
//! them (`KernelSymbols::read_only_for`, one pass at the end): each one as the whole file names
//! its address. A command spending its time in system calls (`dd` between `/dev/zero` and
//! `/dev/null`) gives kernel frames all over the image.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{require_sampling, scratch};
use perf_profile::aggregate::{Frame, FrameId};
use perf_profile::maps::KernelSymbols;
use perf_profile::{Options, Profiler, Target};
use tests::Skip;

#[test]
fn a_finished_captures_kernel_frames_are_named_as_the_whole_kallsyms_names_them() {
    require_sampling!();
    if let Some(why) = KernelSymbols::load().hidden() {
        return tests::skip(Skip::Privilege, why);
    }
    let dir = scratch("kernel-names");
    let mut cmd = Command::new("dd");
    cmd.args(["if=/dev/zero", "of=/dev/null", "bs=512", "count=400000"])
        .stderr(Stdio::null());
    let mut opts = Options::default();
    opts.frequency = 999;
    let mut p = Profiler::start(Target::Command(cmd), &opts).unwrap();
    while p
        .child_mut()
        .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    {
        p.poll(Duration::from_millis(50)).unwrap();
    }
    let profile = p.finish().unwrap();
    let whole = KernelSymbols::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap());
    let mut named = 0;
    for (i, f) in profile.stacks().frames().iter().enumerate() {
        let Frame::Kernel { addr } = *f else {
            continue;
        };
        let Some(s) = whole.find(addr) else {
            continue;
        };
        // A module or BPF program (un)loaded since the capture's end names its addresses
        // differently: the kernel image's only.
        if s.module.is_some() {
            continue;
        }
        let lines = profile.lines(FrameId(i as u32));
        assert_eq!(
            lines
                .iter()
                .map(|l| l.function.as_str())
                .collect::<Vec<_>>(),
            [s.name],
            "{addr:#x}"
        );
        named += 1;
    }
    assert!(
        named > 0,
        "no kernel frame in a profile of dd's system calls"
    );
    println!("{named} kernel frames named as /proc/kallsyms names them");
    let _ = std::fs::remove_dir_all(&dir);
}
