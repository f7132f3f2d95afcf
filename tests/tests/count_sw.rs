//! Software events count what they should, on this kernel.

use std::time::Duration;

use perf_event::config::{Cpu, Opts, Proc};
use perf_event::count::{Counter, Scaled};
use perf_event::event::sw::Software;
use perf_event::event::Event;
use tests::{busy_loop, is_root, require, thread_cpu_time, touch_pages, Skip};

fn user_only() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o
}

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);

#[test]
fn page_faults_equal_pages_touched_in_user_space() {
    for ev in [Software::PageFault, Software::MinorPageFault] {
        let c = Counter::new(ev, ME, user_only()).unwrap();
        c.enable().unwrap();
        touch_pages(100);
        c.disable().unwrap();
        assert_eq!(c.stat().unwrap().count, 100, "{ev:?}");
    }
}

#[test]
fn task_clock_matches_thread_cpu_time() {
    let mut opts = user_only();
    opts.exclude.kernel = false;
    opts.stat_format.time_enabled = true;
    opts.stat_format.time_running = true;
    let c = Counter::new(Software::TaskClock, ME, &opts).unwrap();
    let t0 = thread_cpu_time();
    c.enable().unwrap();
    busy_loop(Duration::from_millis(50));
    c.disable().unwrap();
    let cpu = (thread_cpu_time() - t0).as_nanos() as f64;
    let s = c.stat().unwrap();
    let ratio = s.count as f64 / cpu;
    assert!(
        (0.9..=1.05).contains(&ratio),
        "task-clock {} vs cpu time {cpu}",
        s.count
    );
    assert_eq!(s.scaled(), Scaled::Exact(s.count));
    assert!(s.time_enabled.unwrap() >= s.count);
}

#[test]
fn context_switches_of_a_sleeping_loop_count_with_the_kernel() {
    require!(
        is_root() || tests::paranoid() <= 1,
        Skip::Privilege,
        "counting kernel space needs paranoid <= 1"
    );
    let c = Counter::new(Software::CtxSwitch, ME, Opts::default()).unwrap();
    c.enable().unwrap();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(1));
    }
    c.disable().unwrap();
    let n = c.stat().unwrap().count;
    assert!((10..=20).contains(&n), "{n} switches for 10 sleeps");

    // The same with exclude_kernel counts nothing: switches happen in the kernel.
    let u = Counter::new(Software::CtxSwitch, ME, user_only()).unwrap();
    u.enable().unwrap();
    std::thread::sleep(Duration::from_millis(1));
    u.disable().unwrap();
    assert_eq!(u.stat().unwrap().count, 0);
}

#[test]
fn every_software_event_opens_and_the_quiet_ones_stay_zero() {
    for ev in Software::ALL {
        let c = Counter::new(ev, ME, user_only()).unwrap_or_else(|e| panic!("{ev:?}: {e}"));
        c.enable().unwrap();
        touch_pages(4);
        c.disable().unwrap();
        let n = c.stat().unwrap().count;
        match ev {
            Software::Dummy
            | Software::BpfOutput
            | Software::AlignFault
            | Software::EmuFault
            | Software::CgroupSwitch
            | Software::CtxSwitch
            | Software::CpuMigration
            | Software::MajorPageFault => assert_eq!(n, 0, "{ev:?}"),
            Software::PageFault | Software::MinorPageFault => assert_eq!(n, 4, "{ev:?}"),
            Software::CpuClock | Software::TaskClock => assert!(n > 0, "{ev:?}"),
        }
    }
}

#[test]
fn names_with_modifiers_resolve_to_the_same_counts() {
    // "page-faults:u" excludes the kernel by itself, whatever the options say.
    let c = Counter::new("page-faults:u", ME, Opts::default()).unwrap();
    assert_eq!(c.attr().exclude_kernel(), 1);
    assert_eq!(c.attr().exclude_user(), 0);
    c.enable().unwrap();
    touch_pages(37);
    c.disable().unwrap();
    assert_eq!(c.stat().unwrap().count, 37);
    let t = Event::parse("task-clock").unwrap();
    assert_eq!((t.ty(), t.config()), (1, Software::TaskClock.config()));
}

#[test]
fn stat_format_fields_come_back_and_id_matches_the_ioctl() {
    let mut o = user_only();
    o.stat_format.id = true;
    o.stat_format.time_enabled = true;
    o.stat_format.time_running = true;
    o.stat_format.lost_records = true;
    let c = Counter::new(Software::PageFault, ME, &o).unwrap();
    c.enable().unwrap();
    touch_pages(3);
    c.disable().unwrap();
    let s = c.stat().unwrap();
    assert_eq!(s.count, 3);
    assert_eq!(s.id, Some(c.id().unwrap()));
    assert_eq!(s.lost_records, Some(0));
    assert!(s.time_running.unwrap() > 0);
}

#[test]
fn enable_all_and_disable_all_fence_every_counter() {
    let mut o = user_only();
    o.enable = true;
    let c = Counter::new(Software::PageFault, ME, &o).unwrap();
    Counter::disable_all().unwrap();
    touch_pages(10);
    Counter::enable_all().unwrap();
    touch_pages(5);
    c.disable().unwrap();
    assert_eq!(c.stat().unwrap().count, 5);
}
