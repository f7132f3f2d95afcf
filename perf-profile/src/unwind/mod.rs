//! Unwinding: a sample's call chain as frames, leaf first.
//!
//! With `-g fp` the kernel walks the frame pointers at the sample and writes the chain into the
//! sample (`PERF_SAMPLE_CALLCHAIN`): kernel frames, then user frames, each part introduced by a
//! `PERF_CONTEXT_*` marker. This module splits it at the markers. Every frame but the first of
//! each part is a return address, which points after the call: one is subtracted so that it names
//! the calling instruction (and its line), as perf and samply do.
//!
//! With `-g dwarf` ([`dwarf`], x86_64 and aarch64) the kernel part of the chain still comes from
//! the kernel; the user part is unwound here from a copy of the user stack with framehop.

use perf_event::perf_sys as sys;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod dwarf;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) mod elf;

/// Where a frame's code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    /// User space.
    User,
    /// The kernel.
    Kernel,
}

/// One frame of a call chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawFrame {
    /// The instruction's address: the sampled one, or a return address minus one.
    pub addr: u64,
    /// User or kernel.
    pub context: Context,
}

/// The frames of `chain` (the sample's `PERF_SAMPLE_CALLCHAIN`, leaf first), appended to `out`.
/// `ip` and `cpumode_kernel` describe the sample when it has no call chain (one frame).
#[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
pub fn frames_from_call_chain(
    chain: Option<&[u64]>,
    ip: Option<u64>,
    cpumode_kernel: bool,
    out: &mut Vec<RawFrame>,
) {
    let default = if cpumode_kernel {
        Context::Kernel
    } else {
        Context::User
    };
    let Some(chain) = chain.filter(|c| !c.is_empty()) else {
        if let Some(addr) = ip {
            out.push(RawFrame {
                addr,
                context: default,
            });
        }
        return;
    };
    let mut context = Some(default);
    let mut first = true;
    for &ip in chain {
        if ip >= sys::PERF_CONTEXT_MAX {
            context = match ip {
                x if x == sys::PERF_CONTEXT_KERNEL => Some(Context::Kernel),
                x if x == sys::PERF_CONTEXT_USER => Some(Context::User),
                // Hypervisor and guest frames are not ours to name.
                _ => None,
            };
            first = true;
            continue;
        }
        let Some(context) = context else {
            continue;
        };
        let addr = if first { ip } else { ip.saturating_sub(1) };
        first = false;
        // Some kernels end a chain with a zero (an unwinder that gave up).
        if ip == 0 {
            continue;
        }
        out.push(RawFrame { addr, context });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = sys::PERF_CONTEXT_KERNEL;
    const U: u64 = sys::PERF_CONTEXT_USER;

    #[test]
    fn kernel_then_user_with_return_addresses_adjusted() {
        let mut out = Vec::new();
        frames_from_call_chain(
            Some(&[K, 0xffff_0010, 0xffff_0100, U, 0x1000, 0x2000, 0]),
            None,
            true,
            &mut out,
        );
        let f = |addr, context| RawFrame { addr, context };
        assert_eq!(
            out,
            [
                f(0xffff_0010, Context::Kernel),
                f(0xffff_00ff, Context::Kernel),
                f(0x1000, Context::User),
                f(0x1fff, Context::User),
            ]
        );
    }

    #[test]
    fn no_chain_is_the_ip_alone_and_guest_frames_are_dropped() {
        let mut out = Vec::new();
        frames_from_call_chain(None, Some(0x42), false, &mut out);
        assert_eq!(
            out,
            [RawFrame {
                addr: 0x42,
                context: Context::User
            }]
        );
        out.clear();
        let guest = sys::PERF_CONTEXT_GUEST_KERNEL;
        frames_from_call_chain(Some(&[guest, 0x99, U, 0x10]), None, false, &mut out);
        assert_eq!(
            out,
            [RawFrame {
                addr: 0x10,
                context: Context::User
            }]
        );
    }
}
