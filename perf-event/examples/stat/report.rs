//! The counts as `perf stat` prints them: the human table, CSV (`-x SEP`) and JSON (`--json`).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

/// What kind of event a row is, for its metric (the comment column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// task-clock or cpu-clock: nanoseconds, shown in msec with "CPUs utilized".
    Clock,
    Cycles,
    Instructions,
    Branches,
    BranchMisses,
    Other,
}

/// The value of a row.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    /// Counted: the count corrected for multiplexing, and the summed times (ns).
    Counted {
        scaled: f64,
        enabled: u64,
        running: u64,
    },
    /// Opened but never on the PMU (or never enabled): nothing to show.
    NotCounted { enabled: u64, running: u64 },
    /// The event does not exist here (e.g. hardware events in a VM without a PMU).
    NotSupported,
    /// The kernel refused the event for lack of permission.
    NotPermitted,
}

impl Value {
    /// From summed raw values: scaled by `enabled / running` when the event was multiplexed.
    pub fn from_sums(count: u64, enabled: u64, running: u64) -> Self {
        if enabled == 0 || running == 0 {
            return Self::NotCounted { enabled, running };
        }
        let scaled = if running < enabled {
            count as f64 * enabled as f64 / running as f64
        } else {
            count as f64
        };
        Self::Counted {
            scaled,
            enabled,
            running,
        }
    }

    /// The value of two per-PMU copies of one event together (see [`merge`]).
    pub fn plus(self, other: Self) -> Self {
        use Value::*;
        match (self, other) {
            (
                Counted {
                    scaled,
                    enabled,
                    running,
                },
                Counted {
                    scaled: s2,
                    enabled: e2,
                    running: r2,
                },
            ) => Counted {
                scaled: scaled + s2,
                enabled: enabled.saturating_add(e2),
                running: running.saturating_add(r2),
            },
            (
                Counted {
                    scaled,
                    enabled,
                    running,
                },
                NotCounted {
                    enabled: e2,
                    running: r2,
                },
            )
            | (
                NotCounted {
                    enabled: e2,
                    running: r2,
                },
                Counted {
                    scaled,
                    enabled,
                    running,
                },
            ) => Counted {
                scaled,
                enabled: enabled.saturating_add(e2),
                running: running.saturating_add(r2),
            },
            (
                NotCounted { enabled, running },
                NotCounted {
                    enabled: e2,
                    running: r2,
                },
            ) => NotCounted {
                enabled: enabled.saturating_add(e2),
                running: running.saturating_add(r2),
            },
            (v @ (Counted { .. } | NotCounted { .. }), NotSupported | NotPermitted)
            | (NotSupported | NotPermitted, v @ (Counted { .. } | NotCounted { .. })) => v,
            (NotPermitted, _) | (_, NotPermitted) => NotPermitted,
            (NotSupported, NotSupported) => NotSupported,
        }
    }

    /// The count since `before` (an earlier read of the same counters): `-I`'s interval value.
    /// Counts scaled for multiplexing subtract as scaled values.
    pub fn minus(self, before: Self) -> Self {
        let (s0, e0, r0) = match before {
            Self::Counted {
                scaled,
                enabled,
                running,
            } => (scaled, enabled, running),
            Self::NotCounted { enabled, running } => (0.0, enabled, running),
            Self::NotSupported | Self::NotPermitted => (0.0, 0, 0),
        };
        match self {
            Self::Counted {
                scaled,
                enabled,
                running,
            } => {
                let (enabled, running) = (enabled.saturating_sub(e0), running.saturating_sub(r0));
                if enabled == 0 || running == 0 {
                    Self::NotCounted { enabled, running }
                } else {
                    Self::Counted {
                        scaled: (scaled - s0).max(0.0),
                        enabled,
                        running,
                    }
                }
            }
            Self::NotCounted { enabled, running } => Self::NotCounted {
                enabled: enabled.saturating_sub(e0),
                running: running.saturating_sub(r0),
            },
            v => v,
        }
    }

    fn counted(&self) -> Option<f64> {
        match *self {
            Self::Counted { scaled, .. } => Some(scaled),
            _ => None,
        }
    }

    /// (time running, percentage running) as perf's CSV and JSON give them.
    fn run_pct(&self) -> (u64, f64) {
        match *self {
            Self::Counted {
                enabled, running, ..
            }
            | Self::NotCounted { enabled, running } => {
                let pct = if enabled == 0 {
                    100.0
                } else {
                    (running as f64 * 100.0 / enabled as f64).min(100.0)
                };
                (running, pct)
            }
            Self::NotSupported | Self::NotPermitted => (0, 100.0),
        }
    }
}

/// One event line.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub kind: Kind,
    pub value: Value,
}

/// What says which rows are one event counted on several PMUs: the name to print for their sum
/// (the event as written: [`EventSpec::merge_name`], with the `:u` of a user-space-only fallback)
/// and the row's PMU.
///
/// [`EventSpec::merge_name`]: perf_event::event::spec::EventSpec::merge_name
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeKey {
    pub name: String,
    pub pmu: Option<String>,
}

/// Sums, as `perf stat` does without `--no-merge`, the rows of one event counted once per PMU (a
/// hybrid CPU's `cycles` on `cpu_core` and `cpu_atom`, a wildcard PMU's copies): rows whose keys
/// have the same name and different PMUs become one row named by the key, where the first of them
/// was. Counts add after each row's multiplexing correction, and so do their times (perf's
/// `enabled`/`running` of a merged event are the sums). A row that counted wins over one that was
/// not supported or not permitted on its PMU. `keys[i]` is the key of `rows[i]`.
pub fn merge(rows: Vec<Row>, keys: &[MergeKey]) -> Vec<Row> {
    // Each output row, its key's name, and the PMUs summed into it (none: it takes no others).
    let mut out: Vec<(Row, &str, Vec<&str>)> = Vec::with_capacity(rows.len());
    for (row, key) in rows.into_iter().zip(keys) {
        let pmu = key.pmu.as_deref();
        let into = pmu.and_then(|p| {
            out.iter().position(|(_, name, pmus)| {
                *name == key.name && !pmus.is_empty() && !pmus.contains(&p)
            })
        });
        match (into, pmu) {
            (Some(i), Some(p)) => {
                let (merged, _, pmus) = &mut out[i];
                pmus.push(p);
                merged.name.clone_from(&key.name);
                merged.value = merged.value.plus(row.value);
            }
            _ => out.push((row, &key.name, pmu.into_iter().collect())),
        }
    }
    out.into_iter().map(|(row, _, _)| row).collect()
}

/// Everything printed.
#[derive(Debug)]
pub struct Report {
    /// What was measured: `'CMD ARGS'`, `'system wide'`, `process id '42'`.
    pub title: String,
    pub rows: Vec<Row>,
    pub elapsed: Duration,
    /// User and system CPU seconds of what ran, when known.
    pub user_sys: Option<(f64, f64)>,
    /// With `-r`: the means of several runs (the rows and `elapsed` hold the means).
    pub runs: Option<Runs>,
}

/// The spread of `-r N` runs, as perf prints it.
#[derive(Debug)]
pub struct Runs {
    pub count: usize,
    /// Per row: the standard deviation of the mean in percent of the mean (0 when not counted).
    pub noise: Vec<f64>,
    /// The standard deviation of the mean elapsed time, in seconds.
    pub elapsed_sd: f64,
}

/// Mean and standard deviation of the mean, as perf's `stddev_stats` computes them (the sample
/// variance over n - 1, divided by n).
pub fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// The report of several runs (`-r`): each row's mean and spread, the mean elapsed time. `runs`
/// holds each run's rows (the same events in the same order) and elapsed time.
pub fn repeated(title: String, runs: &[(Vec<Row>, Duration)]) -> Report {
    let times: Vec<f64> = runs.iter().map(|(_, e)| e.as_secs_f64()).collect();
    let (elapsed, elapsed_sd) = mean_and_sd(&times);
    let first = runs.first().map(|(r, _)| r.clone()).unwrap_or_default();
    let mut rows = Vec::with_capacity(first.len());
    let mut noise = Vec::with_capacity(first.len());
    for (i, row) in first.into_iter().enumerate() {
        let values: Vec<Value> = runs
            .iter()
            .filter_map(|(r, _)| r.get(i))
            .map(|r| r.value)
            .collect();
        let counted: Vec<(f64, u64, u64)> = values
            .iter()
            .filter_map(|v| match *v {
                Value::Counted {
                    scaled,
                    enabled,
                    running,
                } => Some((scaled, enabled, running)),
                _ => None,
            })
            .collect();
        if counted.len() != values.len() || counted.is_empty() {
            // Not counted in some run: shown as the first run showed it.
            noise.push(0.0);
            rows.push(row);
            continue;
        }
        let n = counted.len() as u64;
        let scaled: Vec<f64> = counted.iter().map(|c| c.0).collect();
        let (mean, sd) = mean_and_sd(&scaled);
        noise.push(if mean == 0.0 { 0.0 } else { 100.0 * sd / mean });
        rows.push(Row {
            value: Value::Counted {
                scaled: mean,
                enabled: counted.iter().map(|c| c.1).sum::<u64>() / n,
                running: counted.iter().map(|c| c.2).sum::<u64>() / n,
            },
            ..row
        });
    }
    Report {
        title,
        rows,
        elapsed: Duration::from_secs_f64(elapsed),
        user_sys: None,
        runs: Some(Runs {
            count: runs.len(),
            noise,
            elapsed_sd,
        }),
    }
}

/// perf's digits for a spread: none above 1, else enough to show its first digit.
fn precision(x: f64) -> usize {
    if x > 1.0 || x <= 0.0 || !x.is_finite() {
        return 0;
    }
    (-x.log10()).ceil() as usize
}

/// A metric of the comment column: value, unit, and whether it is a percentage.
struct Metric {
    value: f64,
    unit: String,
    percent: bool,
    /// Digits after the point: perf prints insn per cycle with 2, its other ratios with 3.
    decimals: usize,
}

impl Report {
    fn total(&self, kind: Kind) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.kind == kind)
            .and_then(|r| r.value.counted())
    }

    fn metric(&self, row: &Row) -> Option<Metric> {
        let count = row.value.counted()?;
        let clock = self.total(Kind::Clock).filter(|&c| c > 0.0);
        let plain = |value: f64, unit: &str| Metric {
            value,
            unit: unit.into(),
            percent: false,
            decimals: 3,
        };
        match row.kind {
            Kind::Clock => {
                let wall = self.elapsed.as_nanos() as f64;
                (wall > 0.0).then(|| plain(count / wall, "CPUs utilized"))
            }
            Kind::Cycles => clock.map(|c| plain(count / c, "GHz")),
            Kind::Instructions => self
                .total(Kind::Cycles)
                .filter(|&c| c > 0.0)
                .map(|c| Metric {
                    decimals: 2,
                    ..plain(count / c, "insn per cycle")
                }),
            Kind::BranchMisses => self
                .total(Kind::Branches)
                .filter(|&b| b > 0.0)
                .map(|b| Metric {
                    value: count * 100.0 / b,
                    unit: "of all branches".into(),
                    percent: true,
                    decimals: 2,
                }),
            Kind::Branches | Kind::Other => clock.map(|c| {
                let per_sec = count * 1e9 / c;
                let (v, unit) = if per_sec >= 1e9 {
                    (per_sec / 1e9, "G/sec")
                } else if per_sec >= 1e6 {
                    (per_sec / 1e6, "M/sec")
                } else if per_sec >= 1e3 {
                    (per_sec / 1e3, "K/sec")
                } else {
                    (per_sec, "/sec")
                };
                plain(v, unit)
            }),
        }
    }

    /// The value column and its unit.
    fn value_text(row: &Row, json: bool) -> (String, &'static str) {
        match row.value {
            Value::Counted { scaled, .. } if row.kind == Kind::Clock => {
                let ms = scaled / 1e6;
                let text = if json {
                    format!("{ms:.6}")
                } else {
                    format!("{ms:.2}")
                };
                (text, "msec")
            }
            Value::Counted { scaled, .. } => {
                let n = scaled.round();
                let text = if json {
                    format!("{n:.6}")
                } else {
                    format!("{n:.0}")
                };
                (text, "")
            }
            Value::NotCounted { .. } | Value::NotPermitted if row.kind == Kind::Clock => {
                ("<not counted>".into(), "msec")
            }
            Value::NotCounted { .. } | Value::NotPermitted => ("<not counted>".into(), ""),
            Value::NotSupported => ("<not supported>".into(), ""),
        }
    }

    /// The human table, as `perf stat` prints it.
    pub fn human(&self) -> String {
        let runs = self
            .runs
            .as_ref()
            .map_or_else(String::new, |r| format!(" ({} runs)", r.count));
        let mut s = format!("\n Performance counter stats for {}{runs}:\n\n", self.title);
        for (i, row) in self.rows.iter().enumerate() {
            let mut line = self.row_line(row);
            // perf: "  ( +-  1.23% )" after the metric column, when the runs varied.
            if let Some(pct) = self
                .runs
                .as_ref()
                .and_then(|r| r.noise.get(i))
                .filter(|p| **p != 0.0)
            {
                let _ = write!(
                    line,
                    "{:width$}  ( +-{pct:6.2}% )",
                    "",
                    width = 91 - line.len().min(91)
                );
            }
            s.push_str(&line);
            s.push('\n');
        }
        match &self.runs {
            Some(r) => {
                let p = precision(r.elapsed_sd) + 2;
                let avg = self.elapsed.as_secs_f64();
                let _ = write!(
                    s,
                    "\n {avg:>17.p$} +- {:.p$} seconds time elapsed",
                    r.elapsed_sd
                );
                if avg > 0.0 && r.elapsed_sd > 0.0 {
                    let _ = write!(s, "  ( +-{:6.2}% )", 100.0 * r.elapsed_sd / avg);
                }
                s.push('\n');
            }
            None => {
                let _ = write!(
                    s,
                    "\n{:>18.9} seconds time elapsed\n",
                    self.elapsed.as_secs_f64()
                );
                if let Some((user, sys)) = self.user_sys {
                    let _ = write!(s, "\n{user:>18.9} seconds user\n{sys:>18.9} seconds sys\n");
                }
            }
        }
        s.push('\n');
        s
    }

    /// One row of the human table (no line end, trailing blanks trimmed).
    fn row_line(&self, row: &Row) -> String {
        {
            let (value, unit) = Self::value_text(row, false);
            let mut line = format!("{value:>18} {unit:<4} {:<33}", row.name);
            if !line.ends_with(' ') {
                line.push(' ');
            }
            match self.metric(row) {
                Some(m) if m.percent => {
                    let _ = write!(line, "# {:>7.2}% {:<23}", m.value, m.unit);
                }
                // perf: "#    1.234 GHz", "#    2.26  insn per cycle".
                Some(m) if m.decimals == 2 => {
                    let _ = write!(line, "# {:>7.2}  {:<23}", m.value, m.unit);
                }
                Some(m) => {
                    let _ = write!(line, "# {:>8.3} {:<23}", m.value, m.unit);
                }
                None => {}
            }
            let multiplexed = match row.value {
                Value::Counted {
                    enabled, running, ..
                } => running < enabled,
                _ => false,
            };
            if multiplexed {
                let (_, pct) = row.value.run_pct();
                let _ = write!(
                    line,
                    "{:width$}  ({pct:.2}%)",
                    "",
                    width = 91 - line.len().min(91)
                );
            }
            line.truncate(line.trim_end().len());
            line
        }
    }

    /// The `-I` lines of one interval ending `at` seconds after the start, as perf prints them:
    /// the time, then the row (`sep`: CSV fields); `header` first when asked.
    pub fn interval(&self, at: f64, csv: Option<&str>, header: bool) -> String {
        let mut s = String::new();
        if header && csv.is_none() {
            s.push_str("#           time             counts unit events\n");
        }
        let time = format!("{at:>16.9}");
        match csv {
            Some(sep) => {
                for line in self.csv(sep).lines() {
                    let _ = writeln!(s, "{time}{sep}{line}");
                }
            }
            None => {
                for row in &self.rows {
                    let _ = writeln!(s, "{time} {}", self.row_line(row));
                }
            }
        }
        s
    }

    /// CSV with separator `sep`: value, unit, event, run time, % running, metric value, metric unit.
    pub fn csv(&self, sep: &str) -> String {
        let mut s = String::new();
        for (i, row) in self.rows.iter().enumerate() {
            let (value, unit) = Self::value_text(row, false);
            let (run, pct) = row.value.run_pct();
            let (mv, mu) = match self.metric(row) {
                Some(m) if m.percent => (format!("{:.2}", m.value), m.unit),
                Some(m) => (format!("{:.*}", m.decimals, m.value), m.unit),
                None => (String::new(), String::new()),
            };
            // With -r, perf's spread follows the event: "4.61%".
            let noise = self
                .runs
                .as_ref()
                .map(|r| format!("{:.2}%", r.noise.get(i).copied().unwrap_or(0.0)));
            let fields = [value, unit.to_owned(), row.name.clone()]
                .into_iter()
                .chain(noise)
                .chain([run.to_string(), format!("{pct:.2}"), mv, mu])
                .collect::<Vec<_>>();
            s.push_str(&fields.join(sep));
            s.push('\n');
        }
        s
    }

    /// One JSON object per line, with perf's keys.
    pub fn json(&self) -> String {
        let mut s = String::new();
        for (i, row) in self.rows.iter().enumerate() {
            let (value, unit) = Self::value_text(row, true);
            let (run, pct) = row.value.run_pct();
            let (mv, mu) = self
                .metric(row)
                .map_or((0.0, String::new()), |m| (m.value, m.unit));
            // With -r, perf's spread follows the event: "variance" : 8.28.
            let variance = self.runs.as_ref().map_or_else(String::new, |r| {
                format!(
                    "\"variance\" : {:.2}, ",
                    r.noise.get(i).copied().unwrap_or(0.0)
                )
            });
            let _ = writeln!(
                s,
                "{{\"counter-value\" : {}, \"unit\" : {}, \"event\" : {}, {variance}\"event-runtime\" : \
                 {run}, \"pcnt-running\" : {pct:.2}, \"metric-value\" : {mv:.6}, \"metric-unit\" : {}}}",
                json_str(&value),
                json_str(unit),
                json_str(&row.name),
                json_str(&mu),
            );
        }
        s
    }

    /// Writes the format asked for.
    pub fn write(&self, out: &mut dyn Write, csv: Option<&str>, json: bool) -> io::Result<()> {
        let text = match (csv, json) {
            (Some(sep), _) => self.csv(sep),
            (None, true) => self.json(),
            (None, false) => self.human(),
        };
        out.write_all(text.as_bytes())?;
        out.flush()
    }
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, kind: Kind, value: Value) -> Row {
        Row {
            name: name.into(),
            kind,
            value,
        }
    }

    fn key(name: &str, pmu: Option<&str>) -> MergeKey {
        MergeKey {
            name: name.into(),
            pmu: pmu.map(String::from),
        }
    }

    fn counted(scaled: f64, enabled: u64, running: u64) -> Value {
        Value::Counted {
            scaled,
            enabled,
            running,
        }
    }

    fn show(rows: &[Row]) -> Vec<String> {
        rows.iter()
            .map(|r| match r.value {
                Value::Counted {
                    scaled,
                    enabled,
                    running,
                } => format!("{} {scaled} {enabled}/{running}", r.name),
                Value::NotCounted { enabled, running } => {
                    format!("{} not-counted {enabled}/{running}", r.name)
                }
                Value::NotSupported => format!("{} not-supported", r.name),
                Value::NotPermitted => format!("{} not-permitted", r.name),
            })
            .collect()
    }

    /// `-e cycles,instructions` on an Alder Lake: one copy per core PMU, summed per event where
    /// its first copy was; the cycles metric (GHz) then uses the sum.
    #[test]
    fn hybrid_copies_sum_to_one_row() {
        let rows = vec![
            row(
                "task-clock",
                Kind::Clock,
                counted(2e6, 2_000_000, 2_000_000),
            ),
            row("cpu_atom/cycles/", Kind::Cycles, counted(1000.0, 300, 300)),
            row("cpu_core/cycles/", Kind::Cycles, counted(3000.0, 700, 700)),
            row(
                "cpu_atom/instructions/",
                Kind::Instructions,
                counted(500.0, 300, 300),
            ),
            row(
                "cpu_core/instructions/",
                Kind::Instructions,
                counted(7000.0, 700, 700),
            ),
        ];
        let keys = [
            key("task-clock", None),
            key("cycles", Some("cpu_atom")),
            key("cycles", Some("cpu_core")),
            key("instructions", Some("cpu_atom")),
            key("instructions", Some("cpu_core")),
        ];
        let merged = merge(rows.clone(), &keys);
        assert_eq!(
            show(&merged),
            [
                "task-clock 2000000 2000000/2000000",
                "cycles 4000 1000/1000",
                "instructions 7500 1000/1000",
            ]
        );
        assert_eq!(merged[1].kind, Kind::Cycles);
        let r = Report {
            title: "'true'".into(),
            rows: merged,
            elapsed: Duration::from_millis(2),
            user_sys: None,
            runs: None,
        };
        // 7500 instructions / 4000 cycles, from the sums.
        let ipc = r.metric(&r.rows[2]).unwrap();
        assert!((ipc.value - 1.875).abs() < 1e-9, "{}", ipc.value);
        // --no-merge: the rows as they were.
        assert_eq!(show(&rows).len(), 5);
    }

    /// Groups split per PMU (`{cycles,instructions}`: the cpu_atom group, then the cpu_core one):
    /// the copies are not adjacent, and still sum, in the order of their first copies.
    #[test]
    fn split_groups_merge_in_first_order() {
        let rows = vec![
            row("cpu_atom/cycles/", Kind::Cycles, counted(10.0, 5, 5)),
            row(
                "cpu_atom/instructions/",
                Kind::Instructions,
                counted(20.0, 5, 5),
            ),
            row("cpu_core/cycles/", Kind::Cycles, counted(30.0, 5, 5)),
            row(
                "cpu_core/instructions/",
                Kind::Instructions,
                counted(40.0, 5, 5),
            ),
        ];
        let keys = [
            key("cycles", Some("cpu_atom")),
            key("instructions", Some("cpu_atom")),
            key("cycles", Some("cpu_core")),
            key("instructions", Some("cpu_core")),
        ];
        assert_eq!(
            show(&merge(rows, &keys)),
            ["cycles 40 10/10", "instructions 60 10/10"]
        );
    }

    /// Multiplexed copies add their corrected counts, and their times; a copy that did not count
    /// or is not supported on its PMU adds nothing but its times.
    #[test]
    fn values_add_as_perf_adds_them() {
        let rows = vec![
            // 100 counted in half the time: 200.
            row(
                "cpu_core/cycles/",
                Kind::Cycles,
                Value::from_sums(100, 10, 5),
            ),
            row(
                "cpu_atom/cycles/",
                Kind::Cycles,
                Value::from_sums(50, 10, 10),
            ),
            row(
                "cpu_core/branches/",
                Kind::Branches,
                Value::NotCounted {
                    enabled: 4,
                    running: 0,
                },
            ),
            row("cpu_atom/branches/", Kind::Branches, Value::NotSupported),
            row(
                "cpu_core/topdown-retiring/",
                Kind::Other,
                Value::NotSupported,
            ),
            row(
                "cpu_atom/topdown-retiring/",
                Kind::Other,
                Value::NotSupported,
            ),
            row("cpu_core/r1a8/", Kind::Other, Value::NotPermitted),
            row("cpu_atom/r1a8/", Kind::Other, counted(9.0, 3, 3)),
        ];
        let keys = [
            key("cycles", Some("cpu_core")),
            key("cycles", Some("cpu_atom")),
            key("branches", Some("cpu_core")),
            key("branches", Some("cpu_atom")),
            key("topdown-retiring", Some("cpu_core")),
            key("topdown-retiring", Some("cpu_atom")),
            key("r1a8", Some("cpu_core")),
            key("r1a8", Some("cpu_atom")),
        ];
        assert_eq!(
            show(&merge(rows, &keys)),
            [
                "cycles 250 20/15",
                "branches not-counted 4/0",
                "topdown-retiring not-supported",
                "r1a8 9 3/3",
            ]
        );
    }

    /// Only copies on different PMUs merge: the same event written twice, or twice on one PMU,
    /// keeps its rows (perf too), and events without a PMU (software, legacy) never merge.
    #[test]
    fn only_copies_on_different_pmus_merge() {
        let rows = vec![
            row("page-faults", Kind::Other, counted(1.0, 1, 1)),
            row("page-faults", Kind::Other, counted(2.0, 1, 1)),
            row("cpu_core/cycles/", Kind::Cycles, counted(3.0, 1, 1)),
            row("cpu_core/cycles/", Kind::Cycles, counted(4.0, 1, 1)),
            row("cpu_atom/cycles/", Kind::Cycles, counted(5.0, 1, 1)),
        ];
        let keys = [
            key("page-faults", None),
            key("page-faults", None),
            key("cpu_core/cycles/", Some("cpu_core")),
            key("cpu_core/cycles/", Some("cpu_core")),
            key("cycles", Some("cpu_atom")),
        ];
        assert_eq!(
            show(&merge(rows, &keys)),
            [
                "page-faults 1 1/1",
                "page-faults 2 1/1",
                "cpu_core/cycles/ 3 1/1",
                "cpu_core/cycles/ 4 1/1",
                "cpu_atom/cycles/ 5 1/1",
            ]
        );
    }

    /// A user-space-only fallback's `:u` stays on the merged name (the key carries it).
    #[test]
    fn user_only_suffix_is_kept() {
        let rows = vec![
            row("cpu_core/cycles/:u", Kind::Cycles, counted(3.0, 1, 1)),
            row("cpu_atom/cycles/:u", Kind::Cycles, counted(4.0, 1, 1)),
        ];
        let keys = [
            key("cycles:u", Some("cpu_core")),
            key("cycles:u", Some("cpu_atom")),
        ];
        assert_eq!(show(&merge(rows, &keys)), ["cycles:u 7 2/2"]);
    }

    /// perf's `stddev_stats`: the standard deviation of the mean (sample variance / n), and the
    /// spread in percent of the mean per row.
    #[test]
    fn repeated_runs_average_with_perfs_spread() {
        let (mean, sd) = mean_and_sd(&[1.0, 2.0, 3.0]);
        assert_eq!(mean, 2.0);
        assert!((sd - (1.0f64 / 3.0).sqrt()).abs() < 1e-12, "{sd}");
        assert_eq!(mean_and_sd(&[5.0]), (5.0, 0.0));
        let run = |faults: f64, ms: u64| {
            (
                vec![
                    row("page-faults", Kind::Other, counted(faults, 10, 10)),
                    row("cycles", Kind::Cycles, Value::NotSupported),
                ],
                Duration::from_millis(ms),
            )
        };
        let r = repeated(
            "'true'".into(),
            &[run(100.0, 2), run(110.0, 4), run(120.0, 6)],
        );
        let runs = r.runs.as_ref().unwrap();
        assert_eq!(runs.count, 3);
        // sd of the mean: sqrt(100 / 3) = 5.7735; 5.7735 / 110 = 5.25%.
        assert!((runs.noise[0] - 5.2486).abs() < 1e-3, "{:?}", runs.noise);
        assert_eq!(runs.noise[1], 0.0);
        assert_eq!(r.elapsed, Duration::from_millis(4));
        let text = r.human();
        assert!(text.contains("'true' (3 runs):"), "{text}");
        assert!(
            text.contains("page-faults") && text.contains("( +-  5.25% )"),
            "{text}"
        );
        // sd 0.00115 s: 3 digits to its first one, plus 2, as perf.
        assert!(
            text.contains("\n           0.00400 +- 0.00115 seconds time elapsed  ( +- 28.87% )\n"),
            "{text}"
        );
        assert!(
            r.csv(",").starts_with("110,,page-faults,5.25%,10,100.00,"),
            "{}",
            r.csv(",")
        );
        assert!(
            r.json()
                .contains("\"event\" : \"page-faults\", \"variance\" : 5.25, \"event-runtime\""),
            "{}",
            r.json()
        );
    }
}
