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
        let mut s = format!("\n Performance counter stats for {}:\n\n", self.title);
        for row in &self.rows {
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
            s.push_str(line.trim_end());
            s.push('\n');
        }
        let _ = write!(
            s,
            "\n{:>18.9} seconds time elapsed\n",
            self.elapsed.as_secs_f64()
        );
        if let Some((user, sys)) = self.user_sys {
            let _ = write!(s, "\n{user:>18.9} seconds user\n{sys:>18.9} seconds sys\n");
        }
        s.push('\n');
        s
    }

    /// CSV with separator `sep`: value, unit, event, run time, % running, metric value, metric unit.
    pub fn csv(&self, sep: &str) -> String {
        let mut s = String::new();
        for row in &self.rows {
            let (value, unit) = Self::value_text(row, false);
            let (run, pct) = row.value.run_pct();
            let (mv, mu) = match self.metric(row) {
                Some(m) if m.percent => (format!("{:.2}", m.value), m.unit),
                Some(m) => (format!("{:.*}", m.decimals, m.value), m.unit),
                None => (String::new(), String::new()),
            };
            let fields = [
                value,
                unit.to_owned(),
                row.name.clone(),
                run.to_string(),
                format!("{pct:.2}"),
                mv,
                mu,
            ];
            s.push_str(&fields.join(sep));
            s.push('\n');
        }
        s
    }

    /// One JSON object per line, with perf's keys.
    pub fn json(&self) -> String {
        let mut s = String::new();
        for row in &self.rows {
            let (value, unit) = Self::value_text(row, true);
            let (run, pct) = row.value.run_pct();
            let (mv, mu) = self
                .metric(row)
                .map_or((0.0, String::new()), |m| (m.value, m.unit));
            let _ = writeln!(
                s,
                "{{\"counter-value\" : {}, \"unit\" : {}, \"event\" : {}, \"event-runtime\" : {run}, \
                 \"pcnt-running\" : {pct:.2}, \"metric-value\" : {mv:.6}, \"metric-unit\" : {}}}",
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
}
