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
