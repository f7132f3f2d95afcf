//! Section 5, user-space counter read (`rdpmc` through the mmap page) against `read(2)`, on a hardware
//! instructions counter; where there is no hardware PMU (most VMs) the row says so. Also the preflight's
//! probe of a mapping's capability bits.

use std::hint::black_box;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

use perf_core::{Capabilities, MappedPage};
use perf_sys as sys;

use crate::{interleave, median, skip_row, Len, Row};

fn open(type_: u32, config: u64) -> std::io::Result<OwnedFd> {
    let mut attr = sys::perf_event_attr {
        type_,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    sys::perf_event_open(&attr, 0, -1, None, sys::PERF_FLAG_FD_CLOEXEC as u64)
}

/// `cap_user_rdpmc` / `cap_user_time` of a page-faults counter's mapping and, when one opens, a hardware
/// instructions counter's.
pub fn probe_caps() -> String {
    let caps = |type_: u32, config: u64| -> String {
        let fd = match open(type_, config) {
            Ok(fd) => fd,
            Err(e) => return format!("cannot open ({e})"),
        };
        match MappedPage::map(fd.as_fd()).and_then(|m| m.page().snapshot()) {
            Ok(s) => format!(
                "cap_user_rdpmc={} cap_user_time={} index={}",
                u8::from(s.capabilities.contains(Capabilities::USER_RDPMC)),
                u8::from(s.capabilities.contains(Capabilities::USER_TIME)),
                s.index
            ),
            Err(e) => format!("cannot map ({e})"),
        }
    };
    format!(
        "software page-faults: {}; hardware instructions: {}",
        caps(
            sys::PERF_TYPE_SOFTWARE,
            sys::PERF_COUNT_SW_PAGE_FAULTS as u64
        ),
        caps(
            sys::PERF_TYPE_HARDWARE,
            sys::PERF_COUNT_HW_INSTRUCTIONS as u64
        )
    )
}

/// Runs section 5.
pub fn run(len: Len, rows: &mut Vec<Row>) {
    let section = "5 rdpmc (user-space read) vs read(2)";
    if !tests::has_hardware_pmu() {
        skip_row(
            rows,
            section,
            "no PMU here (no hardware CPU PMU; cap_user_rdpmc=0)",
        );
        return;
    }
    let fd = match open(
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_INSTRUCTIONS as u64,
    ) {
        Ok(fd) => fd,
        Err(e) => return skip_row(rows, section, &format!("no PMU here (instructions: {e})")),
    };
    let map = match MappedPage::map(fd.as_fd()) {
        Ok(m) => m,
        Err(e) => return skip_row(rows, section, &format!("cannot map the page ({e})")),
    };
    let page = map.page();
    if !matches!(page.read_self(), Ok(Some(_))) {
        return skip_row(
            rows,
            section,
            "no PMU here (read_self: cap_user_rdpmc=0 or index 0)",
        );
    }
    let iters = len.pick(5_000, 200_000, 1_000_000);
    let rounds = len.pick(3, 9, 15);
    let raw = fd.as_raw_fd();
    let samples = interleave(2, rounds, |i| {
        let t = Instant::now();
        for _ in 0..iters {
            if i == 0 {
                let mut v = 0u64;
                // SAFETY: reads 8 bytes into a u64.
                black_box(unsafe { libc::read(raw, (&mut v as *mut u64).cast(), 8) });
            } else {
                black_box(page.read_self().ok());
            }
        }
        t.elapsed().as_nanos() as f64 / iters as f64
    });
    let base = median(&samples[0]);
    for (name, s) in ["raw read(2)", "perf-core UserPage::read_self"]
        .into_iter()
        .zip(samples)
    {
        rows.push(Row {
            section: section.into(),
            name: name.into(),
            samples: s,
            unit: "ns/read",
            base: Some(base),
            note: String::new(),
        });
    }
}
