//! Groups: events scheduled on the PMU together and read in one `read(2)`.

use std::borrow::Borrow;
use std::sync::Arc;

use perf_sys as sys;
use sys::perf_event_attr;

use super::{read_errno, Counter, GroupStat, Stat};
use crate::config::{attr, sibling, Opts, Target};
use crate::error::{Error, Result};
use crate::event::Event;

const GROUP: u64 = sys::PERF_FORMAT_GROUP as u64;

/// A group leader and its members: on the PMU together (so ratios between them are exact), enabled,
/// disabled and reset together, read together in one syscall.
///
/// ```no_run
/// use perf_event::config::{sibling, Cpu, Opts, Proc};
/// use perf_event::count::CounterGroup;
/// use perf_event::event::sw::Software;
///
/// let mut group = CounterGroup::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), Opts::default())?;
/// group.add(Software::PageFault, sibling::Opts::default())?;
/// group.enable()?;
/// let v = vec![0u8; 1 << 20];
/// group.disable()?;
/// let stat = group.stat()?;
/// println!("{} ns, {} faults", stat.count(0).unwrap(), stat.count(1).unwrap());
/// # drop(v);
/// # Ok::<(), perf_event::Error>(())
/// ```
#[derive(Debug)]
pub struct CounterGroup {
    leader: Counter,
    siblings: Vec<Arc<Counter>>,
    buf: Vec<u8>,
}

impl CounterGroup {
    /// Opens a group leader. The read format gets `siblings` (group read) and `id` added, so that
    /// [`stat`](Self::stat) can read and match every member.
    ///
    /// # Errors
    ///
    /// As [`Counter::new`].
    pub fn new<E>(event: E, target: impl Into<Target>, opts: impl Borrow<Opts>) -> Result<Self>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        let mut opts = opts.borrow().clone();
        opts.stat_format.siblings = true;
        opts.stat_format.id = true;
        Ok(Self::from(Counter::new(event, target, opts)?))
    }

    /// Makes an open counter the leader of a new group. A group read ([`stat`](Self::stat)) needs
    /// the leader opened with `stat_format.siblings`.
    pub fn from(leader: Counter) -> Self {
        let size = Stat::read_size(leader.attr.read_format | GROUP, 1);
        Self {
            leader,
            siblings: Vec::new(),
            buf: vec![0; size],
        }
    }

    /// The leader.
    pub fn leader(&self) -> &Counter {
        &self.leader
    }

    /// The members added so far, in order.
    pub fn siblings(&self) -> &[Arc<Counter>] {
        &self.siblings
    }

    /// Number of events, the leader included.
    pub fn len(&self) -> usize {
        1 + self.siblings.len()
    }

    /// Always `false`: a group has its leader.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Adds a member on the leader's target.
    ///
    /// # Errors
    ///
    /// As [`Counter::new`]; `EINVAL` (diagnosed) when the event cannot join this group.
    pub fn add<E>(&mut self, event: E, opts: impl Borrow<sibling::Opts>) -> Result<Arc<Counter>>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        self.add_with(event, opts, |_| {})
    }

    /// Like [`add`](Self::add), editing the raw attr before the open.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add).
    pub fn add_with<E>(
        &mut self,
        event: E,
        opts: impl Borrow<sibling::Opts>,
        edit: impl FnOnce(&mut perf_event_attr),
    ) -> Result<Arc<Counter>>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        let event = event.try_into()?;
        let opts = opts.borrow().to_opts();
        let mut a = attr::build(&event, &opts);
        let default_lost = attr::add_default_lost(&mut a, &opts, super::format_lost_refused());
        edit(&mut a);
        let default_lost = default_lost && a.read_format & super::FORMAT_LOST != 0;
        let target = self.leader.target.clone();
        let leader = Some(self.leader.fd());
        let member = match Counter::open(event, a, target, leader, default_lost) {
            Ok(m) => Arc::new(m),
            Err(e) => return Err(super::group_fit::explain_refused_member(self, e, &a)),
        };
        self.siblings.push(Arc::clone(&member));
        let size = Stat::read_size(self.leader.attr.read_format | GROUP, self.len());
        self.buf.resize(size, 0);
        Ok(member)
    }

    /// Enables the whole group (`PERF_EVENT_IOC_ENABLE` with `PERF_IOC_FLAG_GROUP`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    pub fn enable(&self) -> Result<()> {
        sys::ioctl::enable_group(self.leader.fd())
            .map_err(|e| self.leader.ioctl_error("PERF_EVENT_IOC_ENABLE (group)", e))
    }

    /// Disables the whole group.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    pub fn disable(&self) -> Result<()> {
        sys::ioctl::disable_group(self.leader.fd())
            .map_err(|e| self.leader.ioctl_error("PERF_EVENT_IOC_DISABLE (group)", e))
    }

    /// Zeroes every member's count.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    pub fn reset(&self) -> Result<()> {
        sys::ioctl::reset_group(self.leader.fd())
            .map_err(|e| self.leader.ioctl_error("PERF_EVENT_IOC_RESET (group)", e))
    }

    /// Same as [`reset`](Self::reset).
    ///
    /// # Errors
    ///
    /// As [`reset`](Self::reset).
    pub fn clear_count(&self) -> Result<()> {
        self.reset()
    }

    /// Reads every member in one `read(2)` into the group's buffer, sized when members were added:
    /// no allocation. Members come in the order they were added, the leader first.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] when the leader was opened without `stat_format.siblings`;
    /// [`Error::PinnedCounterInError`], [`Error::ShortRead`] or [`Error::Io`] as for
    /// [`Counter::stat`].
    #[inline]
    pub fn stat(&mut self) -> Result<GroupStat<'_>> {
        let rf = self.leader.attr.read_format;
        if rf & GROUP == 0 {
            return Err(no_group_format());
        }
        // rustix issues the syscall directly (no libc cancellation-point wrapper).
        let got = rustix::io::read(&self.leader.file, &mut self.buf[..]).map_err(read_errno)?;
        let want = self.buf.len();
        if got != want {
            return Err(super::short(got, want));
        }
        // `ok_or_else`: an eager `ok_or(Error)` built the error on every read and dropped it (an
        // out-of-line `drop_in_place::<Error>`) when the decode succeeded.
        GroupStat::decode(&self.buf, rf).ok_or_else(|| member_count_mismatch(want, got))
    }
}

/// The group read's member count does not fit the bytes read (a member added or closed by another
/// handle on the same fds).
#[cold]
fn member_count_mismatch(expected: usize, got: usize) -> Error {
    Error::ShortRead { expected, got }
}

#[cold]
fn no_group_format() -> Error {
    Error::Parse {
        input: "CounterGroup::stat".into(),
        reason: "the leader was opened without `stat_format.siblings`: open it with \
                 `CounterGroup::new` or set the option"
            .into(),
    }
}
