//! [`Sampler`]: the ring buffer of one counter (and of counters attached to it), with its controls.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use perf_core::{Data, Ring, RingMode};
use perf_sys as sys;
use sys::perf_event_attr;

use super::iter::Iter;
use super::record::{Priv, Record};
use super::Parser;
use crate::count::{Counter, Stat};
use crate::error::{Error, Result};

const FORMAT_LOST: u64 = sys::PERF_FORMAT_LOST as u64;
const FORMAT_GROUP: u64 = sys::PERF_FORMAT_GROUP as u64;
const IDENTIFIER: u64 = sys::PERF_SAMPLE_IDENTIFIER as u64;

/// Lost data, as counted so far; see [`Sampler::lost`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LostCounts {
    /// Records the kernel dropped because the ring was full: the sum of the `PERF_RECORD_LOST`
    /// records read so far.
    #[doc(alias = "PERF_RECORD_LOST")]
    pub lost_records: u64,
    /// Samples dropped before reaching the ring (`PERF_RECORD_LOST_SAMPLES`, e.g. by PEBS): the sum
    /// of those records read so far. Since Linux 4.2.
    #[doc(alias = "PERF_RECORD_LOST_SAMPLES")]
    pub lost_samples: u64,
    /// The kernel's own count of lost records for this counter (`PERF_FORMAT_LOST`, read now), when
    /// the counter's `stat_format` asked for it. Since Linux 6.0.
    #[doc(alias = "PERF_FORMAT_LOST")]
    pub format_lost: Option<u64>,
}

/// The ring buffer of a sampling counter: 2^n data pages the kernel writes records into.
///
/// Made by [`Counter::sampler`]. A counter has at most one `Sampler` at a time, and a `Sampler`
/// reads its ring from one iterator at a time (each read locks the ring briefly), so the ring has
/// one consumer. The sampler holds its own duplicate of the counter's fd, so it may outlive the
/// [`Counter`]; it is `Send` and `Sync`.
pub struct Sampler {
    file: File,
    attr: perf_event_attr,
    parser: Parser,
    ring: Mutex<Ring<Data>>,
    mode: RingMode,
    pub(super) aux_mapped: AtomicBool,
    lost_records: AtomicU64,
    lost_samples: AtomicU64,
    /// The counter's "has a sampler" flag, cleared when this sampler goes.
    claim: Arc<AtomicBool>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("file", &self.file)
            .field("mode", &self.mode)
            .field("parser", &self.parser)
            .finish_non_exhaustive()
    }
}

impl Counter {
    /// Maps the counter's ring buffer with 2^`exp` data pages and returns its [`Sampler`].
    ///
    /// A counter opened with `write_backward` gets an overwrite ring (a flight recorder): read it
    /// with [`Sampler::newest`]. The memory counts against `perf_event_mlock_kb` (per CPU), then
    /// `RLIMIT_MEMLOCK`.
    ///
    /// # Errors
    ///
    /// [`Error::SamplerExists`] if this counter already has a sampler (one consumer per ring);
    /// [`Error::Ring`] with perf-core's explanation: `MapMemory` (the locked-memory budget, with the
    /// current `perf_event_mlock_kb` and `RLIMIT_MEMLOCK`), `MapBusy` (the counter's output was
    /// redirected to another ring with [`Sampler::attach`]), `BadRingSize` (`exp` too large).
    pub fn sampler(&self, exp: u8) -> Result<Sampler> {
        let claim = Arc::clone(&self.sampler_claim);
        if claim.swap(true, Ordering::AcqRel) {
            return Err(Error::SamplerExists);
        }
        let made = (|| {
            if self.redirected.load(Ordering::Acquire) {
                // Older kernels map a redirected counter (the ring it writes into, a second consumer
                // of it); newer ones refuse with EBUSY. Refuse alike everywhere.
                return Err(Error::Ring(perf_core::Error::MapBusy {
                    area: "data",
                    source: std::io::Error::from_raw_os_error(libc::EBUSY),
                }));
            }
            let pages = 1u64
                .checked_shl(u32::from(exp))
                .filter(|_| exp < 40)
                .ok_or(Error::Ring(perf_core::Error::BadRingSize {
                    area: "data",
                    size: u64::MAX,
                }))?;
            let file = self
                .file()
                .try_clone()
                .map_err(|e| Error::io("duplicating the counter's fd", e))?;
            let mode = if self.attr().write_backward() != 0 {
                RingMode::Overwrite
            } else {
                RingMode::Normal
            };
            let ring = Ring::map(file.as_fd(), pages, mode)?;
            Ok(Sampler::from_parts(
                file,
                *self.attr(),
                ring,
                Arc::clone(&claim),
            ))
        })();
        if made.is_err() {
            claim.store(false, Ordering::Release);
        }
        made
    }
}

impl Sampler {
    /// A sampler over a ring already made (a mapping, or simulated memory in tests).
    pub(crate) fn from_parts(
        file: File,
        attr: perf_event_attr,
        ring: Ring<Data>,
        claim: Arc<AtomicBool>,
    ) -> Self {
        Sampler {
            file,
            parser: Parser::from_attr(&attr),
            mode: ring.mode(),
            attr,
            ring: Mutex::new(ring),
            aux_mapped: AtomicBool::new(false),
            lost_records: AtomicU64::new(0),
            lost_samples: AtomicU64::new(0),
            claim,
        }
    }

    /// Locks the ring (recovering from a panic in a closure that held it: the ring's tail is
    /// published on unwind, so its state is consistent).
    pub(crate) fn ring(&self) -> MutexGuard<'_, Ring<Data>> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record parser for this sampler's counter.
    pub fn parser(&self) -> &Parser {
        &self.parser
    }

    /// The `perf_event_attr` of the counter.
    pub fn attr(&self) -> &perf_event_attr {
        &self.attr
    }

    /// Normal, or overwrite (`write_backward`).
    pub fn mode(&self) -> RingMode {
        self.mode
    }

    /// Iterates over the records in the ring, oldest first, as owned `(Priv, Record)` pairs.
    ///
    /// The iterator never blocks: it ends when the ring is empty (call `iter()` again later, or use
    /// [`Iter::next_timeout`] to wait). See [`Iter::into_cow`] for the zero-copy form.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// Adds a counter's records to this ring (`PERF_EVENT_IOC_SET_OUTPUT`): a shared ring.
    ///
    /// Both counters must record `PERF_SAMPLE_IDENTIFIER` (`record_id_format.id` / the
    /// `identifier` bit) with the same record layout, so that every record says which counter
    /// wrote it: compare [`RecordId::id`](super::record::RecordId::id) with
    /// [`Counter::id`]. Both must be on the same CPU (or both on any CPU); the attached counter can
    /// no longer be mapped itself (EBUSY).
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] when the layouts differ or lack the identifier; [`Error::Io`] when the
    /// kernel refuses (`EINVAL`: different CPU or task, or the counter already has its own ring).
    #[doc(alias = "PERF_EVENT_IOC_SET_OUTPUT")]
    pub fn attach(&self, counter: &Counter) -> Result<()> {
        if self.attr.sample_type & IDENTIFIER == 0 || counter.attr().sample_type & IDENTIFIER == 0 {
            return Err(Error::Sampling(
                "a shared ring needs PERF_SAMPLE_IDENTIFIER on every counter \
                 (set opts.record_id_format.id or attr.sample_type |= PERF_SAMPLE_IDENTIFIER)"
                    .into(),
            ));
        }
        if Parser::from_attr(counter.attr()) != self.parser {
            return Err(Error::Sampling(
                "a shared ring needs the same sample_format, record_id_format and stat_format on \
                 every counter, so that one parser reads all records"
                    .into(),
            ));
        }
        sys::ioctl::set_output(counter.fd(), Some(self.file.as_fd())).map_err(|e| {
            Error::io(
                "PERF_EVENT_IOC_SET_OUTPUT (both counters must be on the same CPU, or both per task)",
                e,
            )
        })?;
        counter.redirected.store(true, Ordering::Release);
        Ok(())
    }

    /// Pauses the ring's output (`PERF_EVENT_IOC_PAUSE_OUTPUT`): the counter keeps counting,
    /// records are dropped (and counted as lost). Since Linux 4.7.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_PAUSE_OUTPUT")]
    pub fn pause(&self) -> Result<()> {
        sys::ioctl::pause_output(self.fd(), true)
            .map_err(|e| Error::io("PERF_EVENT_IOC_PAUSE_OUTPUT", e))
    }

    /// Resumes the ring's output after [`pause`](Self::pause). Since Linux 4.7.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    pub fn resume(&self) -> Result<()> {
        sys::ioctl::pause_output(self.fd(), false)
            .map_err(|e| Error::io("PERF_EVENT_IOC_PAUSE_OUTPUT", e))
    }

    /// Enables the counter (`PERF_EVENT_IOC_ENABLE`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_ENABLE")]
    pub fn enable(&self) -> Result<()> {
        sys::ioctl::enable(self.fd()).map_err(|e| Error::io("PERF_EVENT_IOC_ENABLE", e))
    }

    /// Disables the counter (`PERF_EVENT_IOC_DISABLE`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_DISABLE")]
    pub fn disable(&self) -> Result<()> {
        sys::ioctl::disable(self.fd()).map_err(|e| Error::io("PERF_EVENT_IOC_DISABLE", e))
    }

    /// Enables the counter for `overflows` more overflows (samples), after which it disables
    /// itself (`PERF_EVENT_IOC_REFRESH`). Refused on inherited counters.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_REFRESH")]
    pub fn refresh(&self, overflows: u32) -> Result<()> {
        sys::ioctl::refresh(self.fd(), overflows)
            .map_err(|e| Error::io("PERF_EVENT_IOC_REFRESH", e))
    }

    /// Samples every `period` events from the next overflow on (`PERF_EVENT_IOC_PERIOD`).
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] on a counter that samples at a frequency (use
    /// [`set_frequency`](Self::set_frequency)) or for 0; [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_PERIOD")]
    pub fn set_period(&self, period: u64) -> Result<()> {
        if self.attr.freq() != 0 {
            return Err(Error::Sampling(
                "this counter samples at a frequency (SampleOn::Freq); use set_frequency".into(),
            ));
        }
        self.period_ioctl(period)
    }

    /// Samples `hz` times a second from the next overflow on (`PERF_EVENT_IOC_PERIOD` on a
    /// frequency counter); at most `kernel.perf_event_max_sample_rate`.
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] on a counter with a fixed period (use [`set_period`](Self::set_period))
    /// or for 0; [`Error::Io`] if the ioctl fails (`EINVAL` above the maximum rate).
    pub fn set_frequency(&self, hz: u64) -> Result<()> {
        if self.attr.freq() == 0 {
            return Err(Error::Sampling(
                "this counter samples with a fixed period (SampleOn::Count); use set_period".into(),
            ));
        }
        self.period_ioctl(hz)
    }

    fn period_ioctl(&self, value: u64) -> Result<()> {
        if value == 0 {
            return Err(Error::Sampling(
                "a sample period or frequency of 0 is refused by the kernel".into(),
            ));
        }
        sys::ioctl::period(self.fd(), value).map_err(|e| Error::io("PERF_EVENT_IOC_PERIOD", e))
    }

    /// Nanoseconds the counter was enabled, from the mmap page (seqlock-consistent, as of the
    /// page's last update: when the counter was last scheduled in or out).
    ///
    /// Do not call it from inside a [`CowIter`](super::CowIter) closure: the closure holds the ring.
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] if the page's sequence lock never settles.
    pub fn counter_time_enabled(&self) -> Result<u64> {
        Ok(self.ring().page().snapshot()?.time_enabled)
    }

    /// Nanoseconds the counter was running (on the PMU), from the mmap page; see
    /// [`counter_time_enabled`](Self::counter_time_enabled).
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] if the page's sequence lock never settles.
    pub fn counter_time_running(&self) -> Result<u64> {
        Ok(self.ring().page().snapshot()?.time_running)
    }

    /// Reads the counter (`read(2)` on the sampler's fd): the count, and the lost-record count when
    /// `stat_format.lost` is set.
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] for a group read format (read the group through its [`Counter`]s);
    /// [`Error::Io`] / [`Error::ShortRead`] if the read fails.
    pub fn stat(&self) -> Result<Stat> {
        if self.attr.read_format & FORMAT_GROUP != 0 {
            return Err(Error::Sampling(
                "the counter reads as a group; read it with CounterGroup::stat".into(),
            ));
        }
        let want = Stat::read_size(self.attr.read_format, 1);
        let mut buf = [0u8; 64];
        let dst = buf.get_mut(..want).ok_or(Error::ShortRead {
            expected: want,
            got: 64,
        })?;
        let got = rustix::io::read(&self.file, &mut *dst)
            .map_err(|e| Error::io("reading a perf counter", e.into()))?;
        if got != want {
            return Err(Error::ShortRead {
                expected: want,
                got,
            });
        }
        Ok(Stat::decode_single(dst, self.attr.read_format))
    }

    /// Lost data so far: the `PERF_RECORD_LOST` and `PERF_RECORD_LOST_SAMPLES` counts read by this
    /// sampler's iterators, and the kernel's `PERF_FORMAT_LOST` count when the read format has it.
    ///
    /// # Errors
    ///
    /// As [`stat`](Self::stat), when the read format has `PERF_FORMAT_LOST`.
    pub fn lost(&self) -> Result<LostCounts> {
        let format_lost = if self.attr.read_format & FORMAT_LOST != 0 {
            self.stat()?.lost_records
        } else {
            None
        };
        Ok(LostCounts {
            lost_records: self.lost_records.load(Ordering::Relaxed),
            lost_samples: self.lost_samples.load(Ordering::Relaxed),
            format_lost,
        })
    }

    /// Adds a record's lost counts to the totals.
    #[inline]
    pub(crate) fn account(&self, record: &Record) {
        match record {
            Record::LostRecords(l) => {
                self.lost_records
                    .fetch_add(l.lost_records, Ordering::Relaxed);
            }
            Record::LostSamples(l) => {
                self.lost_samples
                    .fetch_add(l.lost_samples, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Adds raw lost counts (the zero-copy path, which does not build records).
    #[inline]
    pub(crate) fn account_raw(&self, record_type: u32, count: u64) {
        if record_type == sys::PERF_RECORD_LOST {
            self.lost_records.fetch_add(count, Ordering::Relaxed);
        } else if record_type == sys::PERF_RECORD_LOST_SAMPLES {
            self.lost_samples.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// The newest records of an overwrite ring (a counter opened with `write_backward`), newest
    /// first, at most `n`: those written since the previous call (or since the ring was made).
    ///
    /// Pauses the output around the read (`PERF_EVENT_IOC_PAUSE_OUTPUT`), so the kernel does not
    /// write while we read; records made meanwhile are counted as lost. Since Linux 4.7.
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] (`RingMode`) on a normal ring; [`Error::Io`] if pausing fails.
    pub fn newest(&self, n: usize) -> Result<Vec<(Priv, Record)>> {
        self.pause()?;
        let out = (|| -> Result<Vec<(Priv, Record)>> {
            let mut ring = self.ring();
            let mut out = Vec::new();
            for chunk in ring.backward_snapshot()?.take(n) {
                let (p, r) = self.parser.parse_chunk(chunk?);
                out.push((p, r));
            }
            Ok(out)
        })();
        let resumed = self.resume();
        let out = out?;
        resumed?;
        Ok(out)
    }
}

impl AsFd for Sampler {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Sampler {
    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.claim.store(false, Ordering::Release);
    }
}
