//! A sample's call chain as the kernel writes it ([`CallChains`]) and its parts between the
//! kernel's context markers ([`CallChain`]).

use perf_sys::{
    PERF_CONTEXT_GUEST, PERF_CONTEXT_GUEST_KERNEL, PERF_CONTEXT_GUEST_USER, PERF_CONTEXT_HV,
    PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER, PERF_CONTEXT_USER_DEFERRED,
};

/// One part of a call chain (`PERF_SAMPLE_CALLCHAIN`): the instruction pointers the kernel wrote
/// after one `PERF_CONTEXT_*` marker, as perf-event-open 0.5 names them.
///
/// Iterating [`Sample::call_chain`](super::Sample::call_chain) ([`CallChains::iter`]) yields them,
/// as 0.5.1's `Vec<CallChain>` did; [`CallChain::split`] makes them from any kernel call chain.
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
        Parts { rest: ips }.collect()
    }

    /// The first part of `rest` and what follows it; `None` when `rest` is empty.
    fn first(rest: &[u64]) -> Option<(CallChain, &[u64])> {
        let (&first, tail) = rest.split_first()?;
        if first == PERF_CONTEXT_USER_DEFERRED {
            if let Some((&cookie, tail)) = tail.split_first() {
                return Some((CallChain::UserDeferred { cookie }, tail));
            }
        }
        {
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
            let part = match first {
                PERF_CONTEXT_USER => CallChain::User(frames),
                PERF_CONTEXT_KERNEL => CallChain::Kernel(frames),
                PERF_CONTEXT_HV => CallChain::Hv(frames),
                PERF_CONTEXT_GUEST => CallChain::Guest(frames),
                PERF_CONTEXT_GUEST_USER => CallChain::GuestUser(frames),
                PERF_CONTEXT_GUEST_KERNEL => CallChain::GuestKernel(frames),
                _ => CallChain::Unknown(frames),
            };
            Some((part, &body[end..]))
        }
    }
}

/// A sample's call chain (`PERF_SAMPLE_CALLCHAIN`), kept as the kernel wrote it: instruction
/// pointers, each run preceded by a `PERF_CONTEXT_*` marker.
///
/// Iterating it yields its parts, perf-event-open 0.5's [`CallChain`]s (`for part in &chain`,
/// `chain.iter()`), each made as it is reached; [`ips`](Self::ips) is the kernel's form, markers
/// in place, which a profiler walks without allocating. Parsing a sample allocates once for its
/// chain, not once per context.
///
/// ```
/// use perf_event::sample::record::{CallChain, CallChains};
/// use perf_event::perf_sys::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};
///
/// let chain = CallChains::from(vec![PERF_CONTEXT_KERNEL, 0xffff_1000, PERF_CONTEXT_USER, 0x40_1000]);
/// assert!(chain.iter().any(|part| matches!(part, CallChain::User(ips) if ips == [0x40_1000])));
/// let frames: Vec<u64> = chain.ips().iter().copied().filter(|&ip| ip < PERF_CONTEXT_MAX).collect();
/// assert_eq!(frames, [0xffff_1000, 0x40_1000]);
/// ```
#[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct CallChains(Vec<u64>);

impl CallChains {
    /// The instruction pointers and `PERF_CONTEXT_*` markers, as the kernel wrote them.
    pub fn ips(&self) -> &[u64] {
        &self.0
    }

    /// [`ips`](Self::ips), owned.
    pub fn into_ips(self) -> Vec<u64> {
        self.0
    }

    /// The parts, in order ([`CallChain::split`]).
    pub fn iter(&self) -> Parts<'_> {
        Parts { rest: &self.0 }
    }

    /// The parts collected, 0.5.1's `Vec<CallChain>`.
    pub fn to_vec(&self) -> Vec<CallChain> {
        self.iter().collect()
    }

    /// Whether the kernel wrote no value (no part either).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<u64>> for CallChains {
    fn from(ips: Vec<u64>) -> Self {
        Self(ips)
    }
}

impl From<CallChains> for Vec<CallChain> {
    fn from(chain: CallChains) -> Self {
        chain.to_vec()
    }
}

impl<'a> IntoIterator for &'a CallChains {
    type Item = CallChain;
    type IntoIter = Parts<'a>;
    fn into_iter(self) -> Parts<'a> {
        self.iter()
    }
}

impl IntoIterator for CallChains {
    type Item = CallChain;
    type IntoIter = std::vec::IntoIter<CallChain>;
    fn into_iter(self) -> Self::IntoIter {
        self.to_vec().into_iter()
    }
}

/// The parts of a [`CallChains`], in order ([`CallChains::iter`]).
#[derive(Clone, Debug)]
pub struct Parts<'a> {
    rest: &'a [u64],
}

impl Iterator for Parts<'_> {
    type Item = CallChain;
    fn next(&mut self) -> Option<CallChain> {
        let (part, rest) = CallChain::first(self.rest)?;
        self.rest = rest;
        Some(part)
    }
}

impl std::iter::FusedIterator for Parts<'_> {}

impl super::Sample {
    /// [`call_chain`](Self::call_chain)'s parts collected ([`CallChains::to_vec`]); `None` without
    /// `PERF_SAMPLE_CALLCHAIN`.
    pub fn call_chain_parts(&self) -> Option<Vec<CallChain>> {
        self.call_chain.as_ref().map(CallChains::to_vec)
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
    fn a_samples_chain_iterates_as_its_parts_and_keeps_the_kernels_form() {
        let ips = vec![
            PERF_CONTEXT_KERNEL,
            0xffff_1000,
            PERF_CONTEXT_USER_DEFERRED,
            7,
        ];
        let chain = CallChains::from(ips.clone());
        let parts = [Kernel(vec![0xffff_1000]), UserDeferred { cookie: 7 }];
        assert_eq!(chain.iter().collect::<Vec<_>>(), parts);
        assert_eq!((&chain).into_iter().collect::<Vec<_>>(), parts);
        assert_eq!(chain.to_vec(), parts);
        assert_eq!(chain.ips(), ips);
        assert!(chain
            .iter()
            .any(|it| matches!(it, CallChain::UserDeferred { cookie: _ })));
        assert_eq!(chain.clone().into_iter().collect::<Vec<_>>(), parts);
        assert_eq!(chain.into_ips(), ips);
        assert_eq!(CallChains::default().iter().next(), None);
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
