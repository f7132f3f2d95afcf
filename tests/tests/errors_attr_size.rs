//! A field past the running kernel's `perf_event_attr` is refused with `E2BIG`, and the kernel
//! writes its own attr size back: the error names that size, the fields past it, the Linux version
//! each needs and the running kernel. (Kernels older than 5.10, outside the matrix, are simulated
//! in perf-event's unit tests of the diagnosis.)

use perf_event::config::{Cpu, Opts, Proc};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::event::Event;
use perf_event::perf_sys::{self, perf_event_attr};
use perf_event::Error;
use tests::Skip;

fn running() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = r
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// The size of this kernel's `perf_event_attr` by its version, when that is before `config4`
/// (Linux 6.19): `PERF_ATTR_SIZE_VER6` (5.5), `VER7` (5.13), `VER8` (6.3). The matrix boots 5.10,
/// 6.1, 6.12 and 7.2.
fn attr_size_before_config4() -> Option<u32> {
    match running() {
        v if v >= (6, 19) => None,
        v if v >= (6, 3) => Some(136),
        v if v >= (5, 13) => Some(128),
        v if v >= (5, 5) => Some(120),
        _ => None,
    }
}

#[test]
fn the_kernel_writes_its_attr_size_back_on_e2big() {
    let Some(size) = attr_size_before_config4() else {
        tests::skip(
            Skip::Environment,
            "this kernel has config4 (or predates 5.5)",
        );
        return;
    };
    let mut a = perf_event_attr {
        type_: perf_sys::PERF_TYPE_SOFTWARE,
        size: core::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(perf_sys::PERF_COUNT_SW_DUMMY),
        config4: 1,
        ..Default::default()
    };
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    let e = perf_sys::perf_event_open_mut(&mut a, 0, -1, None, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::E2BIG));
    assert_eq!(a.size, size, "the kernel's own size, written back");
}

#[test]
fn a_field_past_the_kernels_attr_names_the_size_the_field_and_the_kernel() {
    let Some(size) = attr_size_before_config4() else {
        tests::skip(
            Skip::Environment,
            "this kernel has config4 (or predates 5.5)",
        );
        return;
    };
    let mut o = Opts::default();
    o.exclude.kernel = true;
    let e = Counter::new(
        Event::from(Software::Dummy).with_config4(1),
        (Proc::CURRENT, Cpu::ALL),
        o,
    )
    .unwrap_err();
    let msg = e.to_string();
    println!("{msg}");
    assert!(matches!(e, Error::KernelTooOld { .. }), "{msg}");
    assert_eq!(e.raw_os_error(), Some(libc::E2BIG), "{msg}");
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for part in [
        "config4 requires Linux 6.19",
        &format!("this kernel is {}", release.trim()),
        &format!("its perf_event_attr has {size} bytes"),
    ] {
        assert!(msg.contains(part), "lacks {part:?}: {msg}");
    }
    // Inside the matrix's range: no word about older kernels.
    assert!(!msg.contains("5.10 and newer"), "{msg}");
}
