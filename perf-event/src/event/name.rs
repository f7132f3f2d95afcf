//! Event names as `perf stat -e` takes them.

use super::hw::Hardware;
use super::pmu::Pmu;
use super::sw::Software;
use super::tp::Tracepoint;
use super::{Event, Modifiers};
use crate::error::{Error, Result};

pub(super) fn parse(input: &str) -> Result<Event> {
    let s = input.trim();
    let err = |reason: String| Error::Parse {
        input: input.into(),
        reason,
    };
    if s.is_empty() {
        return Err(err("empty event name".into()));
    }
    // pmu/terms/ with optional modifiers after the last slash ("cpu/event=0x3c/u", "msr/tsc/:k").
    if let Some((pmu, rest)) = s.split_once('/') {
        let (terms, mods) = rest
            .rsplit_once('/')
            .ok_or_else(|| err("a PMU event is written `pmu/terms/`".into()))?;
        let mut e = Pmu::by_name(pmu)?.event(terms)?;
        let mods = mods.trim_start_matches(':');
        if !mods.is_empty() {
            e.modifiers =
                Some(modifiers(mods).ok_or_else(|| err(format!("bad modifiers {mods:?}")))?);
        }
        e.name = s.to_owned();
        return Ok(e);
    }
    // name[:modifiers], where the name may itself be `system:event`.
    let (base, mods) = match s.rsplit_once(':') {
        Some((b, m)) if !b.is_empty() && modifiers(m).is_some() => (b, Some(m)),
        _ => (s, None),
    };
    let mut e = named(base).map_err(|e| match e {
        Error::Parse { reason, .. } => err(reason),
        e => e,
    })?;
    if let Some(m) = mods {
        e.modifiers = modifiers(m);
    }
    e.name = s.to_owned();
    Ok(e)
}

fn named(name: &str) -> Result<Event> {
    if let Some(sw) = Software::ALL
        .iter()
        .find(|s| s.perf_name() == name)
        .copied()
        .or(match name {
            "faults" => Some(Software::PageFault),
            "cs" => Some(Software::CtxSwitch),
            "migrations" => Some(Software::CpuMigration),
            "page-faults-min" => Some(Software::MinorPageFault),
            _ => None,
        })
    {
        return Ok(sw.into());
    }
    let hw = match name {
        "cycles" | "cpu-cycles" => Some(Hardware::CpuCycle),
        "instructions" => Some(Hardware::Instr),
        "cache-references" => Some(Hardware::CacheAccess),
        "cache-misses" => Some(Hardware::CacheMiss),
        "branches" | "branch-instructions" => Some(Hardware::BranchInstr),
        "branch-misses" => Some(Hardware::BranchMiss),
        "bus-cycles" => Some(Hardware::BusCycle),
        "stalled-cycles-frontend" | "idle-cycles-frontend" => Some(Hardware::FrontendStalledCycle),
        "stalled-cycles-backend" | "idle-cycles-backend" => Some(Hardware::BackendStalledCycle),
        "ref-cycles" => Some(Hardware::RefCpuCycle),
        _ => None,
    };
    if let Some(hw) = hw {
        return Ok(hw.into());
    }
    if name.contains(':') {
        return Tracepoint::by_name(name).map(|tp| {
            let mut e = Event::from(tp);
            e.name = name.to_owned();
            e
        });
    }
    // A PMU alias alone ("tsc"): the first PMU that has it, hardware PMUs first as perf does.
    let mut pmus = crate::sys::pmus();
    pmus.sort_by_key(|(n, _)| !crate::sys::is_cpu_pmu(n));
    for (pmu, _) in pmus {
        if let Ok(p) = Pmu::by_name(&pmu) {
            if p.alias(name).is_some() {
                return p.event(name);
            }
        }
    }
    Err(Error::Parse {
        input: name.into(),
        reason: "not a known hardware or software event, `system:tracepoint`, `pmu/terms/`, or \
                 an event alias of any PMU in sysfs"
            .into(),
    })
}

/// Parses perf's modifier letters: `u` `k` `h` (count only those levels), `H` host only, `G` guest
/// only, `p` precision (repeatable).
fn modifiers(m: &str) -> Option<Modifiers> {
    if m.is_empty() {
        return None;
    }
    let mut r = Modifiers::default();
    let (mut u, mut k, mut h) = (false, false, false);
    for c in m.chars() {
        match c {
            'u' => u = true,
            'k' => k = true,
            'h' => h = true,
            'H' => r.exclude_guest = true,
            'G' => r.exclude_host = true,
            'p' => r.precise += 1,
            _ => return None,
        }
    }
    if u || k || h {
        r.privilege_set = true;
        r.exclude_user = !u;
        r.exclude_kernel = !k;
        r.exclude_hv = !h;
    }
    (r.precise <= 3).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_sys as sys;

    #[test]
    fn software_names_and_modifiers() {
        let e = parse("page-faults:u").unwrap();
        assert_eq!(e.ty, sys::PERF_TYPE_SOFTWARE);
        assert_eq!(e.config, u64::from(sys::PERF_COUNT_SW_PAGE_FAULTS));
        let m = e.modifiers.unwrap();
        assert!(!m.exclude_user && m.exclude_kernel && m.exclude_hv);
        let t = parse("task-clock").unwrap();
        assert_eq!(t.config, u64::from(sys::PERF_COUNT_SW_TASK_CLOCK));
        assert!(t.modifiers.is_none());
        assert_eq!(parse("cycles:ppk").unwrap().modifiers.unwrap().precise, 2);
        assert!(parse("no-such-event-name").is_err());
        assert!(parse("page-faults:x").is_err());
    }
}
