//! perf-event-open 0.5's paths and method names on the sampler, for code written against that
//! crate: the `auxiliary` and `rb` modules, and [`Sampler::enable_counter_with`] and
//! [`Sampler::sample_on`] (deprecated spellings of [`Sampler::refresh`] and
//! [`Sampler::set_period`]/[`Sampler::set_frequency`]). See the crate docs' "Migrating from
//! perf-event-open" section.

use super::{CowChunk, Sampler};
use crate::error::Result;

/// The AUX area of a sampler (perf-event-open 0.5's path for [`AuxTracer`](super::AuxTracer)).
pub mod auxiliary {
    pub use super::super::AuxTracer;

    /// The AUX area's iterators (perf-event-open 0.5's paths).
    pub mod iter {
        pub use super::super::super::AsyncAuxCowIter as AsyncCowIter;
        pub use super::super::super::AsyncAuxIter as AsyncIter;
        pub use super::super::super::AuxCowIter as CowIter;
        pub use super::super::super::AuxIter as Iter;
    }
}

/// The ring's record bytes (perf-event-open 0.5's path for [`CowChunk`](super::CowChunk)).
pub mod rb {
    pub use super::super::CowChunk;
}

impl Sampler {
    /// Enables the counter for `max_samples` more samples, after which it disables itself
    /// (`PERF_EVENT_IOC_REFRESH`): perf-event-open 0.5's name for [`refresh`](Self::refresh).
    ///
    /// # Errors
    ///
    /// As [`refresh`](Self::refresh).
    #[deprecated(note = "perf-event-open 0.5's name: use `Sampler::refresh`")]
    #[doc(alias = "PERF_EVENT_IOC_REFRESH")]
    pub fn enable_counter_with(&self, max_samples: u32) -> Result<()> {
        self.refresh(max_samples)
    }

    /// Sets the sample period, or the frequency on a counter opened with
    /// [`SampleOn::Freq`](crate::config::SampleOn::Freq) (`PERF_EVENT_IOC_PERIOD`):
    /// perf-event-open 0.5's one method for [`set_period`](Self::set_period) and
    /// [`set_frequency`](Self::set_frequency).
    ///
    /// # Errors
    ///
    /// As [`set_period`](Self::set_period) or [`set_frequency`](Self::set_frequency): 0, a period of
    /// 2^63 or more and a frequency above `kernel.perf_event_max_sample_rate` are refused before
    /// the ioctl.
    #[deprecated(
        note = "perf-event-open 0.5's name: use `Sampler::set_period` or `Sampler::set_frequency`"
    )]
    #[doc(alias = "PERF_EVENT_IOC_PERIOD")]
    pub fn sample_on(&self, freq_or_count: u64) -> Result<()> {
        if self.attr().freq() != 0 {
            self.set_frequency(freq_or_count)
        } else {
            self.set_period(freq_or_count)
        }
    }
}

impl CowChunk<'_> {
    /// The record's bytes, copied out of the ring (perf-event-open 0.5's `into_owned`).
    pub fn into_owned(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
