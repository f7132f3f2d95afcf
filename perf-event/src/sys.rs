//! Facts about the running system that the API and the error messages need: online CPUs, the kernel
//! version, `perf_event_paranoid` and the PMUs in sysfs (tracefs is found in `event::tp`).

use std::fs;

use crate::error::{Error, Result};

/// Where the kernel lists event sources (PMUs).
pub(crate) const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// The CPUs that are online now, from `/sys/devices/system/cpu/online` (e.g. `0-3,5`).
///
/// # Errors
///
/// [`Error::Io`] when the file cannot be read, [`Error::Parse`] when its content is not a CPU list.
pub fn online_cpus() -> Result<Vec<u32>> {
    const PATH: &str = "/sys/devices/system/cpu/online";
    let text = fs::read_to_string(PATH).map_err(|e| Error::io(format!("reading {PATH}"), e))?;
    parse_cpu_list(text.trim()).ok_or_else(|| Error::Parse {
        input: text.trim().to_owned(),
        reason: format!("{PATH} is not a CPU list"),
    })
}

/// Parses a kernel CPU list (`0-3,5,7-8`).
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// `/proc/sys/kernel/perf_event_paranoid`, or `None` when unreadable.
pub(crate) fn paranoid() -> Option<i32> {
    fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `/proc/sys/kernel/pid_max`, or `None` when unreadable.
pub(crate) fn pid_max() -> Option<u32> {
    fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Every PMU in sysfs with its type number.
pub(crate) fn pmus() -> Vec<(String, Option<u32>)> {
    let Ok(dir) = fs::read_dir(PMU_DIR) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Option<u32>)> = dir
        .filter_map(|e| e.ok())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let ty = fs::read_to_string(e.path().join("type"))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            (name, ty)
        })
        .collect();
    out.sort();
    out
}

/// Whether sysfs shows a hardware CPU PMU (`cpu`, `cpu_core`, `cpu_atom`, `armv8_*`, ...).
pub(crate) fn has_cpu_pmu() -> bool {
    pmus().iter().any(|(n, _)| is_cpu_pmu(n))
}

pub(crate) fn is_cpu_pmu(name: &str) -> bool {
    name == "cpu"
        || name.starts_with("cpu_")
        || name.starts_with("armv")
        || name == "cpum_cf"
        || name.starts_with("power")
}

/// The name of the PMU whose type number is `ty`.
pub(crate) fn pmu_name(ty: u32) -> Option<String> {
    pmus()
        .into_iter()
        .find(|(_, t)| *t == Some(ty))
        .map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5,7-8"), Some(vec![0, 1, 2, 3, 5, 7, 8]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }
}
