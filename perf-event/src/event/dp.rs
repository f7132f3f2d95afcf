//! Dynamic PMUs: any PMU by its sysfs type number, and the kprobe/uprobe PMUs.
//!
//! Probes name a kernel function or a file through a pointer in `config1`; the [`Event`] owns the
//! string, and the [`Counter`](crate::count::Counter) keeps the event, so the pointer is valid for
//! the open (and any later `modify_attributes`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::pmu::Pmu;
use super::Event;
use crate::error::{Error, Result};

/// An event of any PMU, by type number (`/sys/bus/event_source/devices/<pmu>/type`). For
/// `config4` (Linux 6.19) use [`Event::with_config4`] on the converted event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DynamicPmu {
    /// The PMU type number.
    pub ty: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `config3`. Since Linux 6.3.
    pub config3: u64,
}

super::into_event!(DynamicPmu, v => {
    let name = crate::sys::pmu_name(v.ty).unwrap_or_else(|| format!("type {}", v.ty));
    let mut e = Event::new(v.ty, v.config, format!("{name}/config={:#x}/", v.config));
    e.config1 = v.config1;
    e.config2 = v.config2;
    e.config3 = v.config3;
    e
});

fn probe_pmu(pmu: &str) -> Result<Pmu> {
    Pmu::by_name(pmu).map_err(|e| match e {
        Error::Parse { input, reason } => Error::Parse {
            input,
            reason: format!(
                "{reason}; the {pmu} PMU needs a kernel built with {}",
                if pmu == "kprobe" {
                    "CONFIG_KPROBE_EVENTS"
                } else {
                    "CONFIG_UPROBE_EVENTS"
                }
            ),
        },
        e => e,
    })
}

/// Sets the `retprobe` format bit (`format/retprobe`, e.g. `config:0`).
fn retprobe(pmu: &Pmu, e: &mut Event) -> Result<()> {
    let (_, bits, _) = pmu
        .format("retprobe")
        .and_then(|f| f.place(1))
        .ok_or_else(|| Error::Parse {
            input: e.name.clone(),
            reason: format!("PMU {:?} has no usable `retprobe` format", pmu.name()),
        })?;
    e.config |= bits;
    Ok(())
}

fn cstring(input: &str, bytes: &[u8]) -> Result<CString> {
    CString::new(bytes).map_err(|_| Error::Parse {
        input: input.into(),
        reason: "contains a NUL byte".into(),
    })
}

/// A kernel probe (kprobe PMU): counts entries to a kernel function or address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kprobe {
    /// `name + offset`.
    Symbol {
        /// The kernel symbol.
        name: CString,
        /// Offset into the function.
        offset: u64,
    },
    /// A kernel address.
    Addr(u64),
}

/// A kernel return probe (kprobe PMU, `retprobe` bit): counts returns from a kernel function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kretprobe {
    /// `name + offset`.
    Symbol {
        /// The kernel symbol.
        name: CString,
        /// Offset into the function.
        offset: u64,
    },
    /// A kernel address.
    Addr(u64),
}

fn kprobe_event(ret: bool, sym: Option<(&CString, u64)>, addr: u64) -> Result<Event> {
    let pmu = probe_pmu("kprobe")?;
    let name = match sym {
        Some((n, o)) => format!("kprobe {}+{o:#x}", n.to_string_lossy()),
        None => format!("kprobe {addr:#x}"),
    };
    let mut e = Event::new(pmu.ty(), 0, name);
    if ret {
        retprobe(&pmu, &mut e)?;
    }
    match sym {
        Some((n, offset)) => {
            e.config1_str = Some(n.clone());
            e.config2 = offset;
        }
        None => e.config2 = addr,
    }
    Ok(e)
}

impl TryFrom<&Kprobe> for Event {
    type Error = Error;
    fn try_from(v: &Kprobe) -> Result<Self> {
        match v {
            Kprobe::Symbol { name, offset } => kprobe_event(false, Some((name, *offset)), 0),
            Kprobe::Addr(a) => kprobe_event(false, None, *a),
        }
    }
}
impl TryFrom<Kprobe> for Event {
    type Error = Error;
    fn try_from(v: Kprobe) -> Result<Self> {
        Self::try_from(&v)
    }
}
impl TryFrom<&Kretprobe> for Event {
    type Error = Error;
    fn try_from(v: &Kretprobe) -> Result<Self> {
        match v {
            Kretprobe::Symbol { name, offset } => kprobe_event(true, Some((name, *offset)), 0),
            Kretprobe::Addr(a) => kprobe_event(true, None, *a),
        }
    }
}
impl TryFrom<Kretprobe> for Event {
    type Error = Error;
    fn try_from(v: Kretprobe) -> Result<Self> {
        Self::try_from(&v)
    }
}

/// A user-space probe (uprobe PMU): counts executions of the instruction at `offset` in the file
/// `path`, in every process that maps it.
///
/// The offset is a file offset: for an address in a running process,
/// `addr - mapping start + mapping file offset` from `/proc/<pid>/maps`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Uprobe {
    /// The executable or library.
    pub path: CString,
    /// The file offset of the probed instruction.
    pub offset: u64,
    /// Offset of an SDT semaphore (reference counter) the kernel increments while the probe is
    /// active, set through the PMU's `ref_ctr_offset` format (Linux 4.20).
    pub ref_ctr_offset: Option<u64>,
}

/// A user-space return probe (uprobe PMU, `retprobe` bit): counts returns from the function at
/// `offset` in `path`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Uretprobe {
    /// The executable or library.
    pub path: CString,
    /// The file offset of the function.
    pub offset: u64,
    /// As [`Uprobe::ref_ctr_offset`].
    pub ref_ctr_offset: Option<u64>,
}

impl Uprobe {
    /// A probe at file offset `offset` of `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] when the path contains a NUL byte.
    pub fn new(path: impl AsRef<Path>, offset: u64) -> Result<Self> {
        let p = path.as_ref();
        Ok(Self {
            path: cstring(&p.to_string_lossy(), p.as_os_str().as_bytes())?,
            offset,
            ref_ctr_offset: None,
        })
    }
}

impl Uretprobe {
    /// A return probe on the function at file offset `offset` of `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] when the path contains a NUL byte.
    pub fn new(path: impl AsRef<Path>, offset: u64) -> Result<Self> {
        let u = Uprobe::new(path, offset)?;
        Ok(Self {
            path: u.path,
            offset,
            ref_ctr_offset: None,
        })
    }
}

fn uprobe_event(ret: bool, path: &CString, offset: u64, ref_ctr: Option<u64>) -> Result<Event> {
    let pmu = probe_pmu("uprobe")?;
    let kind = if ret { "uretprobe" } else { "uprobe" };
    let mut e = Event::new(
        pmu.ty(),
        0,
        format!("{kind} {}+{offset:#x}", path.to_string_lossy()),
    );
    if ret {
        retprobe(&pmu, &mut e)?;
    }
    e.config1_str = Some(path.clone());
    e.config2 = offset;
    if let Some(r) = ref_ctr {
        let (field, bits, _) = pmu
            .format("ref_ctr_offset")
            .and_then(|f| f.place(r))
            .ok_or_else(|| Error::Parse {
                input: e.name.clone(),
                reason: "the uprobe PMU has no `ref_ctr_offset` format that fits this offset \
                         (needs Linux 4.20)"
                    .into(),
            })?;
        match field {
            0 => e.config |= bits,
            2 => e.config2 |= bits,
            3 => e.config3 |= bits,
            _ => e.config4 |= bits,
        }
    }
    Ok(e)
}

impl TryFrom<&Uprobe> for Event {
    type Error = Error;
    fn try_from(v: &Uprobe) -> Result<Self> {
        uprobe_event(false, &v.path, v.offset, v.ref_ctr_offset)
    }
}
impl TryFrom<Uprobe> for Event {
    type Error = Error;
    fn try_from(v: Uprobe) -> Result<Self> {
        Self::try_from(&v)
    }
}
impl TryFrom<&Uretprobe> for Event {
    type Error = Error;
    fn try_from(v: &Uretprobe) -> Result<Self> {
        uprobe_event(true, &v.path, v.offset, v.ref_ctr_offset)
    }
}
impl TryFrom<Uretprobe> for Event {
    type Error = Error;
    fn try_from(v: Uretprobe) -> Result<Self> {
        Self::try_from(&v)
    }
}
