//! A sample's call chain split at the kernel's context markers: [`CallChain`].

use perf_sys::{
    PERF_CONTEXT_GUEST, PERF_CONTEXT_GUEST_KERNEL, PERF_CONTEXT_GUEST_USER, PERF_CONTEXT_HV,
    PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER, PERF_CONTEXT_USER_DEFERRED,
};

/// One part of a call chain (`PERF_SAMPLE_CALLCHAIN`): the instruction pointers the kernel wrote
/// after one `PERF_CONTEXT_*` marker, as perf-event-open 0.5 names them.
///
/// [`Sample::call_chain`](super::Sample::call_chain) keeps the kernel's flat `Vec<u64>`, markers
/// included; [`CallChain::split`] (or [`Sample::call_chain_parts`](super::Sample::call_chain_parts))
/// makes the parts.
#[doc(alias = "perf_callchain_context")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CallChain {
    /// After `PERF_CONTEXT_USER`: user-space frames.
    #[doc(alias = "PERF_CONTEXT_USER")]
    User(Vec<u64>),
    /// `PERF_CONTEXT_USER_DEFERRED` and its cookie: the user frames come later, in a
    /// [`CallChainDeferred`](super::CallChainDeferred) record with this cookie. Since Linux 6.19.
    #[doc(alias = "PERF_CONTEXT_USER_DEFERRED")]
    UserDeferred {
        /// Matches [`CallChainDeferred::cookie`](super::CallChainDeferred::cookie).
        cookie: u64,
    },
    /// After `PERF_CONTEXT_KERNEL`: kernel frames.
    #[doc(alias = "PERF_CONTEXT_KERNEL")]
    Kernel(Vec<u64>),
    /// After `PERF_CONTEXT_HV`: hypervisor frames.
    #[doc(alias = "PERF_CONTEXT_HV")]
    Hv(Vec<u64>),
    /// After `PERF_CONTEXT_GUEST`.
    #[doc(alias = "PERF_CONTEXT_GUEST")]
    Guest(Vec<u64>),
    /// After `PERF_CONTEXT_GUEST_USER`: a guest's user frames.
    #[doc(alias = "PERF_CONTEXT_GUEST_USER")]
    GuestUser(Vec<u64>),
    /// After `PERF_CONTEXT_GUEST_KERNEL`: a guest's kernel frames.
    #[doc(alias = "PERF_CONTEXT_GUEST_KERNEL")]
    GuestKernel(Vec<u64>),
    /// Frames before any marker, or a marker this crate does not know (kept as the first value),
    /// and the frames after it. A `PERF_CONTEXT_USER_DEFERRED` without its cookie (a truncated
    /// chain) is kept here too.
    Unknown(Vec<u64>),
}

impl CallChain {
    /// Splits a call chain as the kernel writes it (instruction pointers, each run preceded by a
    /// `PERF_CONTEXT_*` marker) into its parts, in order. Nothing is dropped: every value of
    /// `ips` but the known markers (and a deferred marker's cookie, which becomes
    /// [`UserDeferred`](Self::UserDeferred)) is in exactly one part.
    pub fn split(ips: &[u64]) -> Vec<CallChain> {
        let mut parts = Vec::new();
        let mut rest = ips;
        while let Some((&first, tail)) = rest.split_first() {
            if first == PERF_CONTEXT_USER_DEFERRED {
                if let Some((&cookie, tail)) = tail.split_first() {
                    parts.push(CallChain::UserDeferred { cookie });
                    rest = tail;
                    continue;
                }
            }
            let known = first >= PERF_CONTEXT_MAX
                && matches!(
                    first,
                    PERF_CONTEXT_USER
                        | PERF_CONTEXT_KERNEL
                        | PERF_CONTEXT_HV
                        | PERF_CONTEXT_GUEST
                        | PERF_CONTEXT_GUEST_USER
                        | PERF_CONTEXT_GUEST_KERNEL
                );
            // The frames of this part: up to the next marker.
            let body = if known { tail } else { rest };
            let skip = usize::from(!known);
            let end = body
                .iter()
                .skip(skip)
                .position(|&ip| ip >= PERF_CONTEXT_MAX)
                .map_or(body.len(), |p| p + skip);
            let frames = body[..end].to_vec();
            parts.push(match first {
                PERF_CONTEXT_USER => CallChain::User(frames),
                PERF_CONTEXT_KERNEL => CallChain::Kernel(frames),
                PERF_CONTEXT_HV => CallChain::Hv(frames),
                PERF_CONTEXT_GUEST => CallChain::Guest(frames),
                PERF_CONTEXT_GUEST_USER => CallChain::GuestUser(frames),
                PERF_CONTEXT_GUEST_KERNEL => CallChain::GuestKernel(frames),
                _ => CallChain::Unknown(frames),
            });
            rest = &body[end..];
        }
        parts
    }
}

impl super::Sample {
    /// [`call_chain`](Self::call_chain) split at its context markers ([`CallChain::split`]);
    /// `None` without `PERF_SAMPLE_CALLCHAIN`.
    pub fn call_chain_parts(&self) -> Option<Vec<CallChain>> {
        self.call_chain.as_deref().map(CallChain::split)
    }
}

#[cfg(test)]
mod tests {
    use super::CallChain::{self, *};
    use super::*;

    #[test]
    fn each_marker_starts_a_part() {
        let ips = [
            PERF_CONTEXT_KERNEL,
            0xffff_1000,
            0xffff_2000,
            PERF_CONTEXT_USER,
            0x40_1000,
            PERF_CONTEXT_GUEST_KERNEL,
            PERF_CONTEXT_GUEST_USER,
            0x1,
        ];
        assert_eq!(
            CallChain::split(&ips),
            [
                Kernel(vec![0xffff_1000, 0xffff_2000]),
                User(vec![0x40_1000]),
                GuestKernel(vec![]),
                GuestUser(vec![0x1]),
            ]
        );
    }

    #[test]
    fn a_deferred_marker_carries_its_cookie() {
        let ips = [
            PERF_CONTEXT_KERNEL,
            0xffff_1000,
            PERF_CONTEXT_USER_DEFERRED,
            7,
        ];
        assert_eq!(
            CallChain::split(&ips),
            [Kernel(vec![0xffff_1000]), UserDeferred { cookie: 7 }]
        );
        // Truncated: the marker without its cookie is kept, not dropped.
        assert_eq!(
            CallChain::split(&[PERF_CONTEXT_USER_DEFERRED]),
            [Unknown(vec![PERF_CONTEXT_USER_DEFERRED])]
        );
    }

    #[test]
    fn frames_before_a_marker_and_unknown_markers_are_kept() {
        let odd = PERF_CONTEXT_MAX + 1; // in the marker range, but no known context
        let ips = [0x10, 0x20, odd, 0x30, PERF_CONTEXT_HV, 0x40];
        assert_eq!(
            CallChain::split(&ips),
            [
                Unknown(vec![0x10, 0x20]),
                Unknown(vec![odd, 0x30]),
                Hv(vec![0x40])
            ]
        );
        assert_eq!(CallChain::split(&[]), []);
    }
}
