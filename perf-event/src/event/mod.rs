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
pub mod sw;
pub mod tp;

use std::ffi::CString;
use std::fmt;

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
    pub(crate) modifiers: Option<Modifiers>,
    pub(crate) name: String,
}

/// Privilege and precision modifiers written after an event name (`:u`, `:k`, `:pp`, ...).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Modifiers {
    pub exclude_user: bool,
    pub exclude_kernel: bool,
    pub exclude_hv: bool,
    pub exclude_host: bool,
    pub exclude_guest: bool,
    pub precise: u8,
    pub privilege_set: bool,
}

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
        let Some(m) = self.modifiers else { return };
        if m.privilege_set {
            a.set_exclude_user(u64::from(m.exclude_user));
            a.set_exclude_kernel(u64::from(m.exclude_kernel));
            a.set_exclude_hv(u64::from(m.exclude_hv));
        }
        if m.exclude_host {
            a.set_exclude_host(1);
        }
        if m.exclude_guest {
            a.set_exclude_guest(1);
        }
        if m.precise > 0 {
            a.set_precise_ip(u64::from(m.precise.min(3)));
        }
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
