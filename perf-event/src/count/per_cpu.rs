//! The same event (or group) on every online CPU.

use std::borrow::Borrow;

use super::{Counter, CounterGroup, Stat};
use crate::config::{online_cpus, CpuScope, Opts};
use crate::error::{Error, Result};
use crate::event::Event;

/// One counter (or group) per CPU, enabled and disabled together, read per CPU or summed.
///
/// ```no_run
/// use perf_event::config::{Opts, Proc};
/// use perf_event::count::PerCpu;
/// use perf_event::event::sw::Software;
///
/// // System-wide: every task, on every online CPU (needs privilege).
/// let set = PerCpu::counters(Software::CpuClock, Proc::ALL, &Opts::default())?;
/// set.enable()?;
/// std::thread::sleep(std::time::Duration::from_millis(10));
/// set.disable()?;
/// for (cpu, stat) in set.stats()? {
///     println!("cpu{cpu}: {} ns", stat.count);
/// }
/// # Ok::<(), perf_event::Error>(())
/// ```
#[derive(Debug)]
pub struct PerCpu<T> {
    items: Vec<(u32, T)>,
}

impl<T> PerCpu<T> {
    /// The CPUs and their counters (or groups).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.items.iter().map(|(c, t)| (*c, t))
    }

    /// Mutable access, e.g. to read groups.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.items.iter_mut().map(|(c, t)| (*c, t))
    }

    /// The CPUs covered.
    pub fn cpus(&self) -> Vec<u32> {
        self.items.iter().map(|(c, _)| *c).collect()
    }
}

impl<T> PerCpu<T> {
    /// A set of what was opened on each CPU, in CPU order as given.
    pub(crate) fn from_items(items: Vec<(u32, T)>) -> Self {
        Self { items }
    }
}

impl PerCpu<Counter> {
    /// Opens `event` on every online CPU for `scope`: `Proc::ALL` (every task), a `Proc`, or a
    /// `Cgroup`.
    ///
    /// # Errors
    ///
    /// As [`Counter::new`], for the first CPU that fails; [`online_cpus`] errors.
    pub fn counters<E>(event: E, scope: impl CpuScope, opts: impl Borrow<Opts>) -> Result<Self>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        let event: Event = event.try_into()?;
        let cpus = online_cpus()?;
        Self::counters_on(&event, &cpus, scope, opts)
    }

    /// Like [`counters`](Self::counters) on the given CPUs.
    ///
    /// # Errors
    ///
    /// As [`counters`](Self::counters).
    pub fn counters_on(
        event: &Event,
        cpus: &[u32],
        scope: impl CpuScope,
        opts: impl Borrow<Opts>,
    ) -> Result<Self> {
        let items = cpus
            .iter()
            .map(|&cpu| Ok((cpu, Counter::new(event, scope.on(cpu), opts.borrow())?)))
            .collect::<Result<_>>()?;
        Ok(Self { items })
    }

    /// Enables every CPU's counter.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn enable(&self) -> Result<()> {
        self.items.iter().try_for_each(|(_, c)| c.enable())
    }

    /// Disables every CPU's counter.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn disable(&self) -> Result<()> {
        self.items.iter().try_for_each(|(_, c)| c.disable())
    }

    /// Zeroes every CPU's counter.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn reset(&self) -> Result<()> {
        self.items.iter().try_for_each(|(_, c)| c.reset())
    }

    /// Reads every CPU's counter.
    ///
    /// # Errors
    ///
    /// The first read error.
    pub fn stats(&self) -> Result<Vec<(u32, Stat)>> {
        self.items
            .iter()
            .map(|(cpu, c)| Ok((*cpu, c.stat()?)))
            .collect()
    }

    /// The sum over CPUs: counts, times and lost records added (`id` is `None`). For multiplexed
    /// counters, sum [`Stat::scaled`] per CPU instead.
    ///
    /// # Errors
    ///
    /// The first read error.
    pub fn sum(&self) -> Result<Stat> {
        let mut total = Stat::default();
        for (_, c) in &self.items {
            let s = c.stat()?;
            total.count += s.count;
            let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (None, b) => b,
                (a, None) => a,
                (Some(a), Some(b)) => Some(a + b),
            };
            total.time_enabled = add(total.time_enabled, s.time_enabled);
            total.time_running = add(total.time_running, s.time_running);
            total.lost_records = add(total.lost_records, s.lost_records);
        }
        Ok(total)
    }
}

impl PerCpu<CounterGroup> {
    /// Builds a group on every online CPU with `open(cpu)`.
    ///
    /// # Errors
    ///
    /// The first error of `open`; [`online_cpus`] errors.
    pub fn groups(mut open: impl FnMut(u32) -> Result<CounterGroup>) -> Result<Self> {
        let items = online_cpus()?
            .into_iter()
            .map(|cpu| Ok((cpu, open(cpu)?)))
            .collect::<Result<_>>()?;
        Ok(Self { items })
    }

    /// Enables every CPU's group.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn enable(&self) -> Result<()> {
        self.items.iter().try_for_each(|(_, g)| g.enable())
    }

    /// Disables every CPU's group.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn disable(&self) -> Result<()> {
        self.items.iter().try_for_each(|(_, g)| g.disable())
    }

    /// Zeroes every CPU's group.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn reset(&self) -> Result<()> {
        self.items.iter().try_for_each(|(_, g)| g.reset())
    }

    /// Per member, the sum of its counts over every CPU (the leader first).
    ///
    /// # Errors
    ///
    /// The first read error.
    pub fn sum(&mut self) -> Result<Vec<u64>> {
        let mut total: Vec<u64> = Vec::new();
        for (_, g) in &mut self.items {
            let s = g.stat()?;
            if total.len() < s.len() {
                total.resize(s.len(), 0);
            }
            for (t, m) in total.iter_mut().zip(s.iter()) {
                *t += m.count;
            }
        }
        Ok(total)
    }
}
