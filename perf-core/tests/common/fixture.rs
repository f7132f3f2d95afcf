//! The captured fixtures (see `examples/capture_fixtures.rs`), embedded so the tests run under Miri.

use std::collections::HashMap;

use perf_core::{ParseConfig, ParseFields};

pub struct Fixture {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    pub cfg: ParseConfig,
    pub facts: HashMap<&'static str, &'static str>,
}

fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).expect("hex"),
        None => s.parse().expect("number"),
    }
}

fn kv(text: &'static str) -> HashMap<&'static str, &'static str> {
    text.lines().filter_map(|l| l.split_once('=')).collect()
}

impl Fixture {
    fn new(
        name: &'static str,
        bin: &'static [u8],
        layout: &'static str,
        facts: &'static str,
    ) -> Self {
        let l = kv(layout);
        let cfg = ParseConfig::new(ParseFields {
            sample_type: num(l["sample_type"]),
            read_format: num(l["read_format"]),
            branch_sample_type: num(l["branch_sample_type"]),
            sample_regs_user: num(l["sample_regs_user"]),
            sample_regs_intr: num(l["sample_regs_intr"]),
            sample_id_all: num(l["sample_id_all"]) != 0,
            build_id: num(l["build_id"]) != 0,
        });
        Fixture {
            name,
            bytes: bin.to_vec(),
            cfg,
            facts: kv(facts),
        }
    }

    pub fn fact(&self, key: &str) -> u64 {
        num(self
            .facts
            .get(key)
            .unwrap_or_else(|| panic!("{}: no fact {key}", self.name)))
    }
}

macro_rules! fixture {
    ($name:literal) => {
        Fixture::new(
            $name,
            include_bytes!(concat!("../fixtures/", $name, ".bin")),
            include_str!(concat!("../fixtures/", $name, ".layout")),
            include_str!(concat!("../fixtures/", $name, ".facts")),
        )
    };
}

pub fn page_faults() -> Fixture {
    fixture!("page_faults")
}
pub fn page_faults_group() -> Fixture {
    fixture!("page_faults_group")
}
pub fn tracepoint() -> Fixture {
    fixture!("tracepoint")
}
pub fn sched_switch() -> Fixture {
    fixture!("sched_switch")
}
pub fn sideband() -> Fixture {
    fixture!("sideband")
}
pub fn switch_cpu_wide() -> Fixture {
    fixture!("switch_cpu_wide")
}
pub fn lost() -> Fixture {
    fixture!("lost")
}

pub fn all() -> Vec<Fixture> {
    vec![
        page_faults(),
        page_faults_group(),
        tracepoint(),
        sched_switch(),
        sideband(),
        switch_cpu_wide(),
        lost(),
    ]
}
