//! Events: what to count.
//!
//! Every kind converts into [`Event`], which [`Counter::new`](crate::count::Counter::new) takes:
//! [`hw::Hardware`], [`sw::Software`], [`raw::Raw`], [`tp::Tracepoint`], [`bp::Breakpoint`],
//! [`dp::DynamicPmu`] and the probes in [`dp`]. Events can also be named as `perf list` and
//! `perf stat -e` name them, resolved through sysfs and tracefs ([`Event::parse`]):
//!
//! ```no_run
//! use perf_event::event::Event;
//!
//! let tsc = Event::parse("msr/tsc/")?; // a PMU event by sysfs alias
//! let faults = Event::parse("page-faults:u")?; // a software event, user space only
//! let switch = Event::parse("sched:sched_switch")?; // a tracepoint
//! let cycles = Event::parse("cpu/event=0x3c,umask=0x0/")?; // PMU format terms
//! # Ok::<(), perf_event::Error>(())
//! ```

pub mod bp;
pub mod dp;
pub mod hw;
mod name;
pub mod pmu;
pub mod raw;
pub mod spec;
pub mod sw;
pub mod tp;

use std::ffi::CString;
use std::fmt;

use perf_sys as sys;
use perf_sys::perf_event_attr;

/// An event ready to open: the `type`, `config*` and breakpoint fields of `perf_event_attr`, plus
/// what must stay alive for the open (a probe's function name or path).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Event {
    pub(crate) ty: u32,
    pub(crate) config: u64,
    pub(crate) config1: u64,
    pub(crate) config2: u64,
    pub(crate) config3: u64,
    pub(crate) config4: u64,
    pub(crate) bp_type: u32,
    /// A string the kernel reads through `config1` (kprobe function, uprobe path).
    pub(crate) config1_str: Option<CString>,
    /// Boxed: most events have none, and an [`Event`] lives in every counter.
    pub(crate) modifiers: Option<Box<Modifiers>>,
    pub(crate) name: String,
}

/// What an event's text says beyond the event itself: perf's modifiers (`:u`, `:pp`, `:D`, ...) and
/// its config terms (`/period=1000,call-graph=fp/`). Applied over the [`Opts`](crate::config::Opts)
/// when the attr is built: what the text sets wins.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Modifiers {
    /// `u`, `k` or `h` was given: the three `exclude_user/kernel/hv` bits are the ones below.
    pub privilege_set: bool,
    pub exclude_user: bool,
    pub exclude_kernel: bool,
    pub exclude_hv: bool,
    /// `G` or `H` was given: `exclude_host` and `exclude_guest` are the ones below.
    pub guest_host_set: bool,
    pub exclude_host: bool,
    pub exclude_guest: bool,
    pub exclude_idle: bool,
    pub precise: u8,
    pub pinned: bool,
    pub exclusive: bool,
    /// `S`: samples carry the counts (`PERF_SAMPLE_READ`).
    pub sample_read: bool,
    pub sample: Option<SampleRate>,
    /// `time=0|1`: `PERF_SAMPLE_TIME` off or on.
    pub time: Option<bool>,
    pub call_graph: Option<CallGraph>,
    pub stack_size: Option<u32>,
    pub max_stack: Option<u16>,
    pub inherit: Option<bool>,
    pub overwrite: Option<bool>,
    pub branch_type: Option<u64>,
    pub aux_output: bool,
    pub aux_sample_size: Option<u32>,
}

/// A sampling rate set by a `period=` or `freq=` term (the last one given wins).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SampleRate {
    Period(u64),
    Freq(u64),
}

/// How call chains are recorded (`call-graph=` term).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CallGraph {
    /// `no`: none.
    No,
    /// `fp`: kernel-walked frame pointers.
    Fp,
    /// `dwarf`: user registers and stack for offline unwinding.
    Dwarf,
    /// `lbr`: the last-branch-record call stack.
    Lbr,
}

/// The user registers perf records for `call-graph=dwarf`.
const DWARF_REGS: u64 = crate::config::RegsMask::DWARF_UNWIND.0;

impl Event {
    pub(crate) fn new(ty: u32, config: u64, name: impl Into<String>) -> Self {
        Self {
            ty,
            config,
            config1: 0,
            config2: 0,
            config3: 0,
            config4: 0,
            bp_type: 0,
            config1_str: None,
            modifiers: None,
            name: name.into(),
        }
    }

    /// Resolves an event name as `perf stat -e` takes it: `"task-clock"`, `"page-faults:u"`,
    /// `"cycles:k"`, `"sched:sched_switch"`, `"msr/tsc/"`, `"cpu/event=0x3c,umask=0x0/u"`, or a
    /// PMU alias alone (`"tsc"`). See [`pmu`] for the sysfs part.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`](crate::Error::Parse) naming the missing PMU, format term, alias or
    /// tracepoint.
    pub fn parse(name: &str) -> crate::Result<Self> {
        name::parse(name)
    }

    /// The kernel's PMU type number (`perf_event_attr.type`).
    pub fn ty(&self) -> u32 {
        self.ty
    }

    /// `perf_event_attr.config`.
    pub fn config(&self) -> u64 {
        self.config
    }

    /// A readable name of the event, used in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets `config4`, a PMU-specific field (Linux 6.19). Older kernels refuse a non-zero value with
    /// [`Error::KernelTooOld`](crate::Error::KernelTooOld).
    pub fn with_config4(mut self, config4: u64) -> Self {
        self.config4 = config4;
        self
    }

    pub(crate) fn apply(&self, a: &mut perf_event_attr) {
        a.type_ = self.ty;
        a.config = self.config;
        a.__bindgen_anon_3.config1 = match &self.config1_str {
            // The pointer stays valid as long as this event, which the counter keeps.
            Some(s) => s.as_ptr() as usize as u64,
            None => self.config1,
        };
        a.__bindgen_anon_4.config2 = self.config2;
        a.config3 = self.config3;
        a.config4 = self.config4;
        a.bp_type = self.bp_type;
    }

    pub(crate) fn apply_modifiers(&self, a: &mut perf_event_attr) {
        let Some(m) = self.modifiers.as_deref().copied() else {
            return;
        };
        let on = u64::from;
        if m.privilege_set {
            a.set_exclude_user(on(m.exclude_user));
            a.set_exclude_kernel(on(m.exclude_kernel));
            a.set_exclude_hv(on(m.exclude_hv));
        }
        if m.guest_host_set {
            a.set_exclude_host(on(m.exclude_host));
            a.set_exclude_guest(on(m.exclude_guest));
        }
        if m.exclude_idle {
            a.set_exclude_idle(1);
        }
        if m.precise > 0 {
            a.set_precise_ip(u64::from(m.precise.min(3)));
        }
        if m.pinned {
            a.set_pinned(1);
        }
        if m.exclusive {
            a.set_exclusive(1);
        }
        let mut st = a.sample_type;
        let bit = |st: &mut u64, b: u32, set: bool| {
            if set {
                *st |= u64::from(b);
            } else {
                *st &= !u64::from(b);
            }
        };
        if m.sample_read {
            bit(&mut st, sys::PERF_SAMPLE_READ, true);
        }
        match m.sample {
            Some(SampleRate::Period(p)) => {
                a.set_freq(0);
                a.__bindgen_anon_1.sample_period = p;
            }
            Some(SampleRate::Freq(f)) => {
                a.set_freq(1);
                a.__bindgen_anon_1.sample_freq = f;
            }
            None => {}
        }
        if let Some(t) = m.time {
            bit(&mut st, sys::PERF_SAMPLE_TIME, t);
        }
        match m.call_graph {
            Some(CallGraph::No) => bit(&mut st, sys::PERF_SAMPLE_CALLCHAIN, false),
            Some(CallGraph::Fp) => bit(&mut st, sys::PERF_SAMPLE_CALLCHAIN, true),
            Some(CallGraph::Dwarf) => {
                bit(&mut st, sys::PERF_SAMPLE_CALLCHAIN, true);
                bit(&mut st, sys::PERF_SAMPLE_REGS_USER, true);
                bit(&mut st, sys::PERF_SAMPLE_STACK_USER, true);
                a.set_exclude_callchain_user(1);
                a.sample_regs_user = DWARF_REGS;
                a.sample_stack_user = m.stack_size.unwrap_or(8192);
            }
            Some(CallGraph::Lbr) => {
                bit(&mut st, sys::PERF_SAMPLE_CALLCHAIN, true);
                bit(&mut st, sys::PERF_SAMPLE_BRANCH_STACK, true);
                a.branch_sample_type = u64::from(
                    sys::PERF_SAMPLE_BRANCH_USER
                        | sys::PERF_SAMPLE_BRANCH_CALL_STACK
                        | sys::PERF_SAMPLE_BRANCH_NO_FLAGS
                        | sys::PERF_SAMPLE_BRANCH_NO_CYCLES,
                );
            }
            None => {}
        }
        if let Some(n) = m.max_stack {
            a.sample_max_stack = n;
        }
        if let Some(i) = m.inherit {
            a.set_inherit(on(i));
        }
        if let Some(o) = m.overwrite {
            a.set_write_backward(on(o));
        }
        if let Some(b) = m.branch_type {
            bit(&mut st, sys::PERF_SAMPLE_BRANCH_STACK, true);
            a.branch_sample_type = b;
        }
        if m.aux_output {
            a.set_aux_output(1);
        }
        if let Some(n) = m.aux_sample_size {
            bit(&mut st, sys::PERF_SAMPLE_AUX, true);
            a.aux_sample_size = n;
        }
        a.sample_type = st;
    }

    /// The `perf_event_attr` that [`Counter::new`](crate::count::Counter::new) would open for this
    /// event with `opts`: useful to check what a name resolves to, or to hand the attr to other
    /// tools.
    ///
    /// ```
    /// use perf_event::config::Opts;
    /// use perf_event::event::Event;
    ///
    /// let attr = Event::parse("page-faults:u")?.to_attr(&Opts::default());
    /// assert_eq!((attr.type_, attr.config), (1, 2));
    /// assert_eq!(attr.exclude_kernel(), 1);
    /// # Ok::<(), perf_event::Error>(())
    /// ```
    #[doc(alias = "perf_event_attr")]
    pub fn to_attr(&self, opts: &crate::config::Opts) -> perf_event_attr {
        crate::config::attr::build(self, opts)
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("name", &self.name)
            .field("ty", &self.ty)
            .field("config", &format_args!("{:#x}", self.config))
            .field("config1", &format_args!("{:#x}", self.config1))
            .field("config2", &format_args!("{:#x}", self.config2))
            .field("config3", &format_args!("{:#x}", self.config3))
            .field("config4", &format_args!("{:#x}", self.config4))
            .field("bp_type", &self.bp_type)
            .field("config1_str", &self.config1_str)
            .finish()
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl std::str::FromStr for Event {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        Self::parse(s)
    }
}

impl TryFrom<&str> for Event {
    type Error = crate::Error;

    fn try_from(s: &str) -> crate::Result<Self> {
        Self::parse(s)
    }
}

impl TryFrom<&String> for Event {
    type Error = crate::Error;

    fn try_from(s: &String) -> crate::Result<Self> {
        Self::parse(s)
    }
}

impl From<&Event> for Event {
    fn from(e: &Event) -> Self {
        e.clone()
    }
}

/// Implements `From<T>` and `From<&T>` for [`Event`].
macro_rules! into_event {
    ($ty:ty, $v:ident => $body:expr) => {
        impl From<&$ty> for $crate::event::Event {
            fn from($v: &$ty) -> Self {
                $body
            }
        }
        impl From<$ty> for $crate::event::Event {
            fn from(v: $ty) -> Self {
                Self::from(&v)
            }
        }
    };
}
pub(crate) use into_event;
