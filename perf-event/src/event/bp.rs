//! Hardware breakpoints (`PERF_TYPE_BREAKPOINT`): count accesses to an address.
//!
//! The CPU has a few debug registers (4 on x86) shared by all breakpoints of a task; one more fails
//! with [`Error::NoBreakpointSlot`](crate::Error::NoBreakpointSlot). x86 has no read-only
//! breakpoints: use [`Type::Rw`].

use perf_sys as sys;

use super::Event;

/// A breakpoint on `addr`.
///
/// A debug register watches one aligned unit: on x86 the data address must be aligned to the length;
/// on arm64 the watched bytes must lie inside one aligned 8-byte doubleword (`addr % 8 + len <= 8`).
/// arm64 kernels before 6.12 (5.10 and 6.1 in the kernel matrix) accept a watchpoint that crosses
/// the doubleword, which one debug register cannot watch whole; 6.12 and later refuse it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "PERF_TYPE_BREAKPOINT")]
pub struct Breakpoint {
    /// What access triggers it.
    pub ty: Type,
    /// The address: a data address (aligned as above), or an instruction address for [`Type::X`].
    pub addr: u64,
}

/// What access triggers a breakpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Type {
    /// Reads of this many bytes (`HW_BREAKPOINT_R`); not available on x86.
    #[doc(alias = "HW_BREAKPOINT_R")]
    R(Len),
    /// Writes (`HW_BREAKPOINT_W`).
    #[doc(alias = "HW_BREAKPOINT_W")]
    W(Len),
    /// Reads and writes (`HW_BREAKPOINT_RW`).
    #[doc(alias = "HW_BREAKPOINT_RW")]
    Rw(Len),
    /// Execution (`HW_BREAKPOINT_X`), with the length this architecture requires: `sizeof(long)` on
    /// x86, 4 on Arm.
    #[doc(alias = "HW_BREAKPOINT_X")]
    X,
}

/// The length of a data breakpoint in bytes. 3, 5, 6 and 7 need Linux 4.10 and hardware support;
/// x86 takes 1, 2, 4 and 8 (aligned).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Len {
    /// 1 byte.
    _1,
    /// 2 bytes.
    _2,
    /// 3 bytes.
    _3,
    /// 4 bytes.
    _4,
    /// 5 bytes.
    _5,
    /// 6 bytes.
    _6,
    /// 7 bytes.
    _7,
    /// 8 bytes.
    _8,
}

impl Len {
    /// The length in bytes.
    pub fn bytes(self) -> u64 {
        self as u64 + 1
    }
}

/// The `bp_len` an execution breakpoint must have here.
const fn exec_len() -> u64 {
    if cfg!(any(target_arch = "aarch64", target_arch = "arm")) {
        sys::HW_BREAKPOINT_LEN_4 as u64
    } else {
        core::mem::size_of::<core::ffi::c_long>() as u64
    }
}

super::into_event!(Breakpoint, v => {
    let (bp_type, len, what) = match v.ty {
        Type::R(l) => (sys::HW_BREAKPOINT_R, l.bytes(), "r"),
        Type::W(l) => (sys::HW_BREAKPOINT_W, l.bytes(), "w"),
        Type::Rw(l) => (sys::HW_BREAKPOINT_RW, l.bytes(), "rw"),
        Type::X => (sys::HW_BREAKPOINT_X, exec_len(), "x"),
    };
    let mut e = Event::new(sys::PERF_TYPE_BREAKPOINT, 0, format!("mem:{:#x}:{what}/{len}", v.addr));
    e.bp_type = bp_type;
    e.config1 = v.addr;
    e.config2 = len;
    e
});
