//! The copies of one event on several PMUs, counted as one: what `perf stat` prints as one line
//! for a hybrid event (`cycles` on `cpu_core` and `cpu_atom`) or an alias of several uncore
//! PMUs, and as one line per PMU with `--no-merge`.

use std::borrow::Borrow;

use super::{Counter, Scaled, Stat};
#[cfg(doc)]
use crate::config::Proc;
use crate::config::{CpuScope, Opts, Target};
use crate::error::{Error, Result};
use crate::event::spec::{EventList, EventSpec};

/// One event's counters on every PMU it was copied to, read as one count.
///
/// ```no_run
/// use perf_event::config::{Cpu, Opts, Proc};
/// use perf_event::count::MergedCounter;
/// use perf_event::event::spec::Machine;
///
/// // `cycles` is one event per core PMU on a hybrid CPU, and one event elsewhere.
/// let list = Machine::current().parse("cycles:u,instructions:u")?;
/// let counters = MergedCounter::open_list(&list, (Proc::CURRENT, Cpu::ALL), &Opts::default())?;
/// for c in &counters {
///     c.enable()?;
/// }
/// // ... the measured work ...
/// for c in &counters {
///     c.disable()?;
///     let s = c.stat()?;
///     println!("{}: {}", c.name(), s.scaled);
///     for (pmu, stat) in &s.per_pmu {
///         println!("  {}: {}", pmu.as_deref().unwrap_or("-"), stat.count);
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MergedCounter {
    name: String,
    parts: Vec<Part>,
}

#[derive(Debug)]
struct Part {
    pmu: Option<String>,
    counters: Vec<Counter>,
}

/// What [`MergedCounter::stat`] read.
#[derive(Clone, Debug, PartialEq)]
pub struct MergedStat {
    /// The raw counts, summed.
    pub count: u64,
    /// The merged count corrected for multiplexing (see [`MergedCounter::stat`]).
    pub scaled: Scaled,
    /// Each PMU's own reading (summed over its CPUs), in open order: perf's `--no-merge` view.
    pub per_pmu: Vec<(Option<String>, Stat)>,
}

impl MergedCounter {
    /// Opens every event of `copies` (one [`EventList::merged`] entry, such as `cycles` on
    /// `cpu_atom` and `cpu_core`) on `target`. With a CPU target only the copies whose PMU counts
    /// on that CPU ([`EventSpec::cpus`]) are opened: a `cpu_atom` event cannot count on a P core.
    ///
    /// # Errors
    ///
    /// As [`Counter::new`]; [`Error::NotSupported`] when no copy's PMU counts on the target CPU,
    /// or `copies` is empty.
    pub fn new<'a>(
        copies: impl IntoIterator<Item = &'a EventSpec>,
        target: impl Into<Target>,
        opts: impl Borrow<Opts>,
    ) -> Result<Self> {
        let target = target.into();
        let copies: Vec<&EventSpec> = copies.into_iter().collect();
        let name = copies
            .first()
            .map(|c| c.merge_name().to_owned())
            .unwrap_or_default();
        let mut parts = Vec::new();
        for c in &copies {
            if let (Some(cpu), Some(cpus)) = (target.cpu(), c.cpus()) {
                if !cpus.contains(&cpu) {
                    continue;
                }
            }
            let counter = Counter::new(c.event(), target.clone(), opts.borrow())?;
            parts.push(Part {
                pmu: c.pmu().map(str::to_owned),
                counters: vec![counter],
            });
        }
        if parts.is_empty() {
            return Err(no_pmu(&name, &copies, target.cpu()));
        }
        Ok(Self { name, parts })
    }

    /// Opens every copy on each of `cpus` that its PMU counts on, for `scope` ([`Proc::ALL`]
    /// for every task, a [`Proc`], a cgroup): `perf stat -a` for a hybrid event.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), for the first open that fails.
    pub fn on_cpus<'a>(
        copies: impl IntoIterator<Item = &'a EventSpec>,
        scope: impl CpuScope,
        cpus: &[u32],
        opts: impl Borrow<Opts>,
    ) -> Result<Self> {
        let copies: Vec<&EventSpec> = copies.into_iter().collect();
        let name = copies
            .first()
            .map(|c| c.merge_name().to_owned())
            .unwrap_or_default();
        let mut parts = Vec::new();
        for c in &copies {
            let mut counters = Vec::new();
            for &cpu in cpus {
                if c.cpus().is_some_and(|own| !own.contains(&cpu)) {
                    continue;
                }
                counters.push(Counter::new(c.event(), scope.on(cpu), opts.borrow())?);
            }
            if !counters.is_empty() {
                parts.push(Part {
                    pmu: c.pmu().map(str::to_owned),
                    counters,
                });
            }
        }
        if parts.is_empty() {
            return Err(no_pmu(&name, &copies, None));
        }
        Ok(Self { name, parts })
    }

    /// Opens each entry of [`EventList::merged`] on `target`, in order. Groups are not formed
    /// (open them with [`CounterGroup`](super::CounterGroup) from [`EventList::groups`]).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), for the first event that fails.
    pub fn open_list(
        list: &EventList,
        target: impl Into<Target>,
        opts: impl Borrow<Opts>,
    ) -> Result<Vec<Self>> {
        let target = target.into();
        list.merged()
            .into_iter()
            .map(|(_, copies)| Self::new(copies, target.clone(), opts.borrow()))
            .collect()
    }

    /// The name of the merged event (the text as written, e.g. `cycles:u`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every counter with its PMU.
    pub fn counters(&self) -> impl Iterator<Item = (Option<&str>, &Counter)> {
        self.parts
            .iter()
            .flat_map(|p| p.counters.iter().map(move |c| (p.pmu.as_deref(), c)))
    }

    /// Enables every counter.
    ///
    /// # Errors
    ///
    /// As [`Counter::enable`].
    pub fn enable(&self) -> Result<()> {
        self.counters().try_for_each(|(_, c)| c.enable())
    }

    /// Disables every counter.
    ///
    /// # Errors
    ///
    /// As [`Counter::disable`].
    pub fn disable(&self) -> Result<()> {
        self.counters().try_for_each(|(_, c)| c.disable())
    }

    /// Zeroes every counter.
    ///
    /// # Errors
    ///
    /// As [`Counter::reset`].
    pub fn reset(&self) -> Result<()> {
        self.counters().try_for_each(|(_, c)| c.reset())
    }

    /// Reads every counter and merges the counts.
    ///
    /// How the multiplexing correction combines: counters bound to a CPU count at the same time
    /// as each other, so each is corrected by its own `time_enabled / time_running` and the
    /// results add up. Per-task copies on core PMUs with disjoint CPUs take turns instead (the
    /// task runs on one kind of core at a time: each copy is enabled the whole time but runs only
    /// while the task is on its cores), so their running times add up against one enabled time;
    /// correcting each alone would extrapolate a P-core count over the time spent on E cores.
    ///
    /// # Errors
    ///
    /// As [`Counter::stat`].
    pub fn stat(&self) -> Result<MergedStat> {
        let mut per_pmu = Vec::with_capacity(self.parts.len());
        let mut readings = Vec::new();
        for part in &self.parts {
            let mut sum = Stat::default();
            for c in &part.counters {
                let s = c.stat()?;
                add(&mut sum, &s);
                readings.push((c.cpu().is_some(), s));
            }
            per_pmu.push((part.pmu.clone(), sum));
        }
        let (count, scaled) = merge(&readings);
        Ok(MergedStat {
            count,
            scaled,
            per_pmu,
        })
    }
}

/// Merges readings `(bound to a CPU, stat)`: the raw sum and the corrected count (see
/// [`MergedCounter::stat`]).
fn merge(readings: &[(bool, Stat)]) -> (u64, Scaled) {
    let count = readings
        .iter()
        .fold(0u64, |a, (_, s)| a.saturating_add(s.count));
    // Each CPU-bound counter is corrected alone; the per-task ones together, against the
    // longest enabled time with their running times added.
    let mut units: Vec<Scaled> = readings
        .iter()
        .filter(|(cpu, _)| *cpu)
        .map(|(_, s)| s.scaled())
        .collect();
    let task: Vec<&Stat> = readings
        .iter()
        .filter(|(cpu, _)| !cpu)
        .map(|(_, s)| s)
        .collect();
    let (mut ena, mut run) = (0u64, 0u64);
    for (_, s) in readings.iter().filter(|(cpu, _)| *cpu) {
        ena = ena.saturating_add(s.time_enabled.unwrap_or(0));
        run = run.saturating_add(s.time_running.unwrap_or(0));
    }
    if !task.is_empty() {
        let c = task.iter().fold(0u64, |a, s| a.saturating_add(s.count));
        let times: Option<Vec<(u64, u64)>> = task
            .iter()
            .map(|s| Some((s.time_enabled?, s.time_running?)))
            .collect();
        units.push(match times {
            Some(t) => {
                let e = t.iter().map(|x| x.0).max().unwrap_or(0);
                let r = t.iter().fold(0u64, |a, x| a.saturating_add(x.1)).min(e);
                ena = ena.saturating_add(e);
                run = run.saturating_add(r);
                Scaled::new(c, Some(e), Some(r))
            }
            None => Scaled::Unscaled(c),
        });
    }
    if units.iter().all(|u| matches!(u, Scaled::NotCounted)) {
        return (count, Scaled::NotCounted);
    }
    let value = units
        .iter()
        .fold(0u64, |a, u| a.saturating_add(u.value().unwrap_or(0)));
    let scaled = if units.iter().any(|u| matches!(u, Scaled::Estimate { .. })) {
        Scaled::Estimate {
            value,
            running: if ena == 0 {
                0.0
            } else {
                run as f64 / ena as f64
            },
        }
    } else if units.iter().all(|u| matches!(u, Scaled::Unscaled(_))) {
        Scaled::Unscaled(value)
    } else {
        Scaled::Exact(value)
    };
    (count, scaled)
}

/// Adds one reading to a PMU's sum (times add up over its CPUs).
fn add(sum: &mut Stat, s: &Stat) {
    let opt = |a: Option<u64>, b: Option<u64>, first: bool| match (a, b) {
        (Some(x), Some(y)) => Some(x.saturating_add(y)),
        (None, b) if first => b,
        _ => None,
    };
    let first = sum.time_enabled.is_none() && sum.count == 0 && sum.time_running.is_none();
    sum.count = sum.count.saturating_add(s.count);
    sum.time_enabled = opt(sum.time_enabled, s.time_enabled, first);
    sum.time_running = opt(sum.time_running, s.time_running, first);
    sum.lost_records = opt(sum.lost_records, s.lost_records, first);
    if first {
        sum.id = s.id;
    }
}

/// Where each copy counts, for messages: `cpu_core on 0-15, cpu_atom on 16-23`.
pub(crate) fn where_copies_count(copies: &[&EventSpec]) -> Vec<String> {
    copies
        .iter()
        .map(|c| {
            let cpus = c
                .cpus()
                .map(crate::diagnose::cpu_list)
                .unwrap_or_else(|| "any CPU".into());
            format!("{} on {cpus}", c.pmu().unwrap_or("?"))
        })
        .collect()
}

fn no_pmu(name: &str, copies: &[&EventSpec], cpu: Option<u32>) -> Error {
    let pmus = where_copies_count(copies);
    Error::NotSupported {
        event: name.into(),
        detail: match cpu {
            Some(cpu) => format!(
                "no PMU of this event counts on CPU {cpu} ({})",
                pmus.join(", ")
            ),
            None => "no event to open".into(),
        },
        source: std::io::Error::from_raw_os_error(libc::ENOENT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(count: u64, ena: u64, run: u64) -> Stat {
        Stat {
            count,
            time_enabled: Some(ena),
            time_running: Some(run),
            ..Default::default()
        }
    }

    #[test]
    fn hybrid_task_copies_take_turns() {
        // A task ran 600 ns on P cores and 400 ns on E cores: each copy was enabled 1000 ns.
        let (count, s) = merge(&[(false, st(6000, 1000, 600)), (false, st(2000, 1000, 400))]);
        assert_eq!((count, s), (8000, Scaled::Exact(8000)));
        // The P-core copy was multiplexed half of its time there.
        let (_, s) = merge(&[(false, st(3000, 1000, 300)), (false, st(2000, 1000, 400))]);
        match s {
            Scaled::Estimate { value, running } => {
                assert_eq!(value, 5000 * 1000 / 700);
                assert!((running - 0.7).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cpu_bound_counters_add_up() {
        // Two uncore PMUs counting at the same time, one multiplexed.
        let (count, s) = merge(&[(true, st(100, 1000, 1000)), (true, st(50, 1000, 500))]);
        assert_eq!(count, 150);
        assert_eq!(s.value(), Some(200));
        assert!(matches!(s, Scaled::Estimate { .. }));
        let (_, s) = merge(&[(true, st(0, 1000, 0)), (true, st(0, 1000, 0))]);
        assert_eq!(s, Scaled::NotCounted);
        let (_, s) = merge(&[(true, st(0, 1000, 0)), (true, st(7, 1000, 1000))]);
        assert_eq!(s, Scaled::Exact(7));
        let plain = Stat {
            count: 3,
            ..Default::default()
        };
        assert_eq!(
            merge(&[(false, plain.clone()), (false, plain)]).1,
            Scaled::Unscaled(6)
        );
    }

    #[test]
    fn pmu_sums() {
        let mut sum = Stat::default();
        add(&mut sum, &st(1, 10, 5));
        add(&mut sum, &st(2, 10, 10));
        assert_eq!(
            (sum.count, sum.time_enabled, sum.time_running),
            (3, Some(20), Some(15))
        );
    }
}
