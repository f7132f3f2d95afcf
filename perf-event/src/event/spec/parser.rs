//! The event-list parser: a hand-written recursive descent over the text, keeping the byte
//! offset of every token so errors point at it.

use std::fs;
use std::path::Path;

use perf_sys as sys;

use super::glob;
use super::json;
use super::modifiers::ModState;
use super::suggest::{self, did_you_mean};
use super::symbols::{self, CacheError};
use super::{EventList, EventSpec, Machine, ParseError, Tool};
use crate::event::pmu::Pmu;
use crate::event::{CallGraph, Event, Modifiers, SampleRate};

const MODIFIER_LETTERS: &str = "ukhIpPGHSDeWb";

type Result<T> = std::result::Result<T, ParseError>;

pub(super) fn parse(m: &Machine, text: &str, split: bool) -> Result<EventList> {
    let mut p = Parser::new(m, text);
    p.split = split;
    p.list()?;
    Ok(p.finish())
}

/// `pmu/terms/` for one PMU already chosen ([`Pmu::event`]).
pub(super) fn parse_pmu_terms(m: &Machine, pmu: &Pmu, terms: &str) -> Result<EventList> {
    let text = format!("{}/{terms}/", pmu.name());
    let mut p = Parser::new(m, &text);
    p.i = pmu.name().len() + 1;
    let list = p.terms()?;
    let e = p.pmu_event(pmu, &list)?;
    p.out.push(e);
    p.i = text.len();
    p.finish_event(0, &text)?;
    Ok(p.finish())
}

struct Parser<'a> {
    m: &'a Machine,
    s: &'a str,
    b: &'a [u8],
    i: usize,
    out: Vec<EventSpec>,
    groups: Vec<std::ops::Range<usize>>,
    core: Option<Vec<Pmu>>,
    /// Copy legacy events to every core PMU of a hybrid CPU.
    split: bool,
}

/// A term as written: `key[=value]`.
#[derive(Clone, Debug)]
struct Term {
    key: String,
    value: Option<Value>,
    pos: usize,
    vpos: usize,
}

#[derive(Clone, Debug)]
enum Value {
    Num(u64),
    Str(String),
}

/// What an event's config terms ask beyond the attr fields.
#[derive(Default)]
struct Extra {
    name: Option<String>,
    max_events: Option<u64>,
    per_core: bool,
    metric_id: Option<String>,
}

/// Which config terms an event kind takes.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Ctx {
    Pmu,
    Legacy,
    Tracepoint,
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || matches!(c, b'_' | b'*' | b'?' | b'[')
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'*' | b'?' | b'[' | b']' | b'.' | b'-' | b'!')
}

fn is_term_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')
}

impl<'a> Parser<'a> {
    fn new(m: &'a Machine, s: &'a str) -> Self {
        Self {
            m,
            s,
            b: s.as_bytes(),
            i: 0,
            out: Vec::new(),
            groups: Vec::new(),
            core: None,
            split: true,
        }
    }

    fn err(&self, pos: usize, msg: impl Into<String>) -> ParseError {
        ParseError::new(self.s, pos, msg)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(|c| c == b' ' || c == b'\t') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn finish(self) -> EventList {
        let mut list = EventList {
            events: self.out,
            groups: self.groups,
        };
        seal(&mut list);
        list
    }

    /// The core PMUs, read once per parse.
    fn core_pmus(&mut self) -> Vec<Pmu> {
        if self.core.is_none() {
            self.core = Some(self.m.core_pmus());
        }
        self.core.clone().unwrap_or_default()
    }

    /// Core PMUs to copy a legacy event to: several, and the kernel takes extended types.
    fn hybrid_pmus(&mut self) -> Vec<Pmu> {
        let core = self.core_pmus();
        if self.split && core.len() > 1 && self.m.supports_extended_type() {
            core
        } else {
            Vec::new()
        }
    }

    // list := item (',' item)*
    fn list(&mut self) -> Result<()> {
        loop {
            self.ws();
            if self.peek().is_none() {
                let msg = if self.i == 0 {
                    "no event given"
                } else {
                    "an event must follow ','"
                };
                return Err(self.err(self.i, msg));
            }
            if self.peek() == Some(b'{') {
                self.group()?;
            } else {
                self.event()?;
            }
            self.ws();
            match self.peek() {
                None => return Ok(()),
                Some(b',') => self.i += 1,
                Some(c) => {
                    return Err(
                        self.err(self.i, format!("unexpected '{}' after an event", c as char))
                    )
                }
            }
        }
    }

    // group := '{' event (',' event)* '}' [':' modifiers]
    fn group(&mut self) -> Result<()> {
        let open = self.i;
        self.i += 1;
        let first = self.out.len();
        loop {
            self.ws();
            match self.peek() {
                None => return Err(self.err(open, "group not closed by '}'")),
                Some(b'{') => return Err(self.err(self.i, "groups do not nest")),
                Some(b'}') if self.out.len() == first => {
                    return Err(self.err(self.i, "empty group"))
                }
                _ => {}
            }
            self.event()?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                None => return Err(self.err(open, "group not closed by '}'")),
                Some(c) => {
                    return Err(self.err(self.i, format!("unexpected '{}' in a group", c as char)))
                }
            }
        }
        if self.eat(b':') {
            self.ws();
            let (letters, pos) = self.modifier_letters();
            let n = self.out.len() - first;
            for k in 0..n {
                let e = &mut self.out[first + k];
                e.mods.apply(letters, false, k == 0).map_err(|off| {
                    ParseError::new(self.s, pos + off, bad_modifier(letters, off))
                })?;
            }
        }
        self.split_hybrid_group(first);
        Ok(())
    }

    /// Makes `out[first..]` a group, or one group per core PMU when its events were copied to
    /// several (a group can only hold events of one PMU, plus software events).
    fn split_hybrid_group(&mut self, first: usize) {
        let members: Vec<EventSpec> = self.out.drain(first..).collect();
        // The PMUs of per-PMU copies (name differs from the merge name); members of one of
        // them go to its group, the others (software events) to the first.
        let mut pmus: Vec<String> = Vec::new();
        for e in &members {
            if let Some(p) = e.pmu.as_ref().filter(|_| e.name != e.merge_name) {
                if !pmus.contains(p) {
                    pmus.push(p.clone());
                }
            }
        }
        let parts: Vec<Vec<EventSpec>> = if pmus.len() > 1 {
            let mut parts: Vec<Vec<EventSpec>> = vec![Vec::new(); pmus.len()];
            for e in members {
                let k = e
                    .pmu
                    .as_ref()
                    .and_then(|p| pmus.iter().position(|q| q == p))
                    .unwrap_or(0);
                parts[k].push(e);
            }
            parts
        } else {
            vec![members]
        };
        for mut part in parts {
            if part.is_empty() {
                continue;
            }
            let g = self.groups.len();
            let start = self.out.len();
            for (k, e) in part.iter_mut().enumerate() {
                e.group = Some(g);
                e.leader = k == 0;
            }
            self.out.extend(part);
            self.groups.push(start..self.out.len());
        }
    }

    /// Reads modifier letters (possibly none); returns them and their offset.
    fn modifier_letters(&mut self) -> (&'a str, usize) {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.i += 1;
        }
        (&self.s[start..self.i], start)
    }

    fn apply_own_modifiers(&mut self, first: usize, letters: &str, pos: usize) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        for e in &mut self.out[first..] {
            e.mods
                .apply(letters, true, true)
                .map_err(|off| ParseError::new(self.s, pos + off, bad_modifier(letters, off)))?;
        }
        Ok(())
    }

    /// One event (which may expand to several: hybrid copies, wildcards, tracepoint globs).
    fn event(&mut self) -> Result<()> {
        self.ws();
        let start = self.i;
        let first = self.out.len();
        let rest = &self.s[self.i..];
        if rest.starts_with("mem:") {
            self.breakpoint()?;
        } else if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.numeric()?;
        } else if self.peek().is_some_and(is_name_start) {
            self.named()?;
        } else {
            let msg = match self.peek() {
                Some(c) => format!("unexpected '{}': an event name was expected", c as char),
                None => "an event name was expected".into(),
            };
            return Err(self.err(self.i, msg));
        }
        let text = self.s[start..self.i].trim_end().to_owned();
        self.finish_event(first, &text)
    }

    /// Names the events `out[first..]` made from `text`, and checks what follows.
    fn finish_event(&mut self, first: usize, text: &str) -> Result<()> {
        let n = self.out.len() - first;
        for e in &mut self.out[first..] {
            if e.merge_name.is_empty() {
                e.merge_name = text.to_owned();
            }
            if e.name.is_empty() {
                e.name = match (&e.pmu, n > 1 || e.merge_name != text) {
                    (Some(p), true) if !text.starts_with(p.as_str()) => format!("{p}/{text}/"),
                    _ => text.to_owned(),
                };
            }
        }
        self.ws();
        match self.peek() {
            None | Some(b',') | Some(b'}') => Ok(()),
            Some(c) => Err(self.err(
                self.i,
                format!("unexpected '{}' after the event", c as char),
            )),
        }
    }

    /// Optional `:modifiers` after an event that is not written with slashes.
    fn colon_modifiers(&mut self, first: usize) -> Result<()> {
        let save = self.i;
        if self.eat(b':') {
            self.ws();
            let (letters, pos) = self.modifier_letters();
            self.apply_own_modifiers(first, letters, pos)?;
        } else {
            self.i = save;
        }
        Ok(())
    }

    /// Modifiers directly after a closing slash (`msr/tsc/uk`).
    fn slash_modifiers(&mut self, first: usize) -> Result<()> {
        let (letters, pos) = self.modifier_letters();
        self.apply_own_modifiers(first, letters, pos)
    }

    fn push(&mut self, event: Event) -> &mut EventSpec {
        self.out.push(EventSpec {
            event,
            name: String::new(),
            merge_name: String::new(),
            pmu: None,
            cpus: None,
            scale: None,
            unit: None,
            group: None,
            leader: false,
            mods: ModState::DEFAULT,
            max_events: None,
            per_core: false,
            metric_id: None,
            tool: None,
        });
        let last = self.out.len() - 1;
        &mut self.out[last]
    }

    /// A legacy hardware, cache or raw event: one event, or one per core PMU on a hybrid CPU.
    fn push_core(&mut self, ty: u32, config: u64, extra: &Modifiers, x: &Extra, fields: &[u64; 5]) {
        let hybrid = self.hybrid_pmus();
        if hybrid.is_empty() {
            let mut e = Event::new(ty, config, "");
            set_fields(&mut e, fields, config);
            e.modifiers = Some(Box::new(*extra));
            let s = self.push(e);
            apply_extra(s, x);
            return;
        }
        for pmu in hybrid {
            let (t, c) = if ty == sys::PERF_TYPE_RAW {
                (pmu.ty(), config)
            } else {
                (ty, config | u64::from(pmu.ty()) << sys::PERF_PMU_TYPE_SHIFT)
            };
            let mut e = Event::new(t, c, "");
            set_fields(&mut e, fields, c);
            e.modifiers = Some(Box::new(*extra));
            let cpus = pmu.cpus();
            let s = self.push(e);
            s.pmu = Some(pmu.name().to_owned());
            s.cpus = cpus;
            apply_extra(s, x);
        }
    }

    // mem:ADDR[/LEN][:ACCESS][[:]MODIFIERS]
    fn breakpoint(&mut self) -> Result<()> {
        let first = self.out.len();
        self.i += 4;
        self.ws();
        let apos = self.i;
        let addr = self
            .number()?
            .ok_or_else(|| self.err(apos, "a breakpoint address was expected"))?;
        let mut len = 0;
        if self.eat(b'/') {
            self.ws();
            let lpos = self.i;
            len = self
                .number()?
                .ok_or_else(|| self.err(lpos, "a breakpoint length was expected"))?;
        }
        let mut bp_type = 0u32;
        let save = self.i;
        if self.eat(b':') {
            self.ws();
            let tpos = self.i;
            while let Some(c @ (b'r' | b'w' | b'x')) = self.peek() {
                let bit = match c {
                    b'r' => sys::HW_BREAKPOINT_R,
                    b'w' => sys::HW_BREAKPOINT_W,
                    _ => sys::HW_BREAKPOINT_X,
                };
                if bp_type & bit != 0 {
                    return Err(self.err(self.i, format!("'{}' given twice", c as char)));
                }
                bp_type |= bit;
                self.i += 1;
            }
            let _ = tpos;
            // Modifiers follow the access directly or after another colon.
            let save2 = self.i;
            if !self.eat(b':') {
                self.i = save2;
            }
            self.ws();
            let (letters, pos) = self.modifier_letters();
            if bp_type == 0 && letters.is_empty() {
                return Err(self.err(
                    pos,
                    "breakpoint access 'r', 'w', 'x' or modifiers were expected",
                ));
            }
            let ty = if bp_type == 0 {
                sys::HW_BREAKPOINT_R | sys::HW_BREAKPOINT_W
            } else {
                bp_type
            };
            self.push_breakpoint(addr, len, ty);
            return self.apply_own_modifiers(first, letters, pos);
        }
        self.i = save;
        self.push_breakpoint(addr, len, sys::HW_BREAKPOINT_R | sys::HW_BREAKPOINT_W);
        Ok(())
    }

    fn push_breakpoint(&mut self, addr: u64, len: u64, ty: u32) {
        let len = match len {
            0 if ty == sys::HW_BREAKPOINT_X => std::mem::size_of::<std::ffi::c_long>() as u64,
            0 => u64::from(sys::HW_BREAKPOINT_LEN_4),
            l => l,
        };
        let mut e = Event::new(sys::PERF_TYPE_BREAKPOINT, 0, "");
        e.bp_type = ty;
        e.config1 = addr;
        e.config2 = len;
        self.push(e);
    }

    // TYPE:CONFIG[/terms/][modifiers] or TYPE:CONFIG[:modifiers]
    fn numeric(&mut self) -> Result<()> {
        let first = self.out.len();
        let tpos = self.i;
        let ty = self.number()?.unwrap_or_default();
        let ty = u32::try_from(ty).map_err(|_| self.err(tpos, "a PMU type is 32 bits"))?;
        if !self.eat(b':') {
            return Err(self.err(self.i, "a numeric event is written TYPE:CONFIG"));
        }
        self.ws();
        let cpos = self.i;
        let config = self
            .number()?
            .ok_or_else(|| self.err(cpos, "a config number was expected"))?;
        self.legacy_tail(first, ty, config, false)
    }

    /// After a legacy event: optional `/config-terms/` then modifiers, or `:modifiers`.
    fn legacy_tail(&mut self, first: usize, ty: u32, config: u64, core: bool) -> Result<()> {
        if self.peek() == Some(b'/') {
            self.i += 1;
            let terms = self.terms()?;
            let mut fields = [config, 0, 0, 0, 0];
            let mut mods = Modifiers::default();
            let mut x = Extra::default();
            for t in &terms {
                if !self.config_term(t, Ctx::Legacy, &mut fields, &mut mods, &mut x)? {
                    let near = did_you_mean(&t.key, CONFIG_TERMS.iter().copied());
                    return Err(self
                        .err(t.pos, format!("unknown term '{}'{near}", t.key))
                        .with_help(
                            "valid terms: config,config1,config2,config3,name,period,freq,\
                         branch_type,time,call-graph,stack-size,no-inherit,inherit,max-stack,\
                         nr,no-overwrite,overwrite,driver-config,percore,aux-output,\
                         aux-sample-size,metric-id",
                        ));
                }
            }
            let config = fields[0];
            if core {
                self.push_core(ty, config, &mods, &x, &fields);
            } else {
                let mut e = Event::new(ty, config, "");
                set_fields(&mut e, &fields, config);
                e.modifiers = Some(Box::new(mods));
                let s = self.push(e);
                apply_extra(s, &x);
            }
            return self.slash_modifiers(first);
        }
        if core {
            self.push_core(
                ty,
                config,
                &Modifiers::default(),
                &Extra::default(),
                &[config, 0, 0, 0, 0],
            );
        } else {
            self.push(Event::new(ty, config, ""));
        }
        self.colon_modifiers(first)
    }

    fn name_token(&mut self) -> (&'a str, usize) {
        let start = self.i;
        while self.peek().is_some_and(is_name_char) {
            self.i += 1;
        }
        (&self.s[start..self.i], start)
    }

    fn named(&mut self) -> Result<()> {
        let first = self.out.len();
        let (name, pos) = self.name_token();
        if let Some(c) = symbols::hardware(name) {
            return self.legacy_tail(first, sys::PERF_TYPE_HARDWARE, u64::from(c), true);
        }
        if let Some(c) = symbols::software(name) {
            return self.legacy_tail(first, sys::PERF_TYPE_SOFTWARE, u64::from(c), false);
        }
        if let Some(tool) = tool(name) {
            self.legacy_tail(
                first,
                sys::PERF_TYPE_SOFTWARE,
                u64::from(sys::PERF_COUNT_SW_DUMMY),
                false,
            )?;
            for e in &mut self.out[first..] {
                e.tool = Some(tool);
            }
            return Ok(());
        }
        match symbols::cache(name) {
            Ok(c) => return self.legacy_tail(first, sys::PERF_TYPE_HW_CACHE, c, true),
            Err(CacheError::BadOp) => {
                return Err(self
                    .err(pos, format!("the cache of '{name}' has no such operation"))
                    .with_help(
                        "L1-icache has loads and prefetches; iTLB and branch have loads only",
                    ))
            }
            Err(CacheError::NotCache) => {}
        }
        if let Some(hex) = name.strip_prefix('r') {
            if !hex.is_empty() && hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                let config = u64::from_str_radix(hex, 16)
                    .map_err(|_| self.err(pos + 1, "a raw event is at most 64 bits"))?;
                return self.legacy_tail(first, sys::PERF_TYPE_RAW, config, true);
            }
        }
        if self.peek() == Some(b'/') {
            return self.pmu_slash(name, pos);
        }
        // A sysfs alias of any PMU.
        let pmus = self.m.pmus();
        let with_alias: Vec<&Pmu> = pmus.iter().filter(|p| p.alias(name).is_some()).collect();
        if !with_alias.is_empty() {
            for pmu in with_alias {
                let term = Term {
                    key: name.to_owned(),
                    value: None,
                    pos,
                    vpos: pos,
                };
                let e = self.pmu_event(pmu, &[term])?;
                self.out.push(e);
            }
            return self.colon_modifiers(first);
        }
        // An event of the kernel's JSON table for this CPU model.
        let hits = json::find(self.m.json_events(), name);
        if !hits.is_empty() {
            for hit in hits {
                for pmu in self.json_pmus(hit) {
                    let term = Term {
                        key: name.to_owned(),
                        value: None,
                        pos,
                        vpos: pos,
                    };
                    let e = self.pmu_event(&pmu, &[term])?;
                    self.out.push(e);
                }
            }
            if self.out.len() > first {
                return self.colon_modifiers(first);
            }
        }
        let save = self.i;
        if self.eat(b':') {
            self.ws();
            return self.tracepoint(name, pos, first);
        }
        self.i = save;
        let near = did_you_mean(name, self.event_names().iter().map(String::as_str));
        Err(self
            .err(pos, format!("unknown event '{name}'{near}"))
            .with_help(
                "not a hardware, software or cache event, a raw event (rNNN), an event alias of a \
             PMU, `pmu/terms/`, `system:tracepoint` or `mem:ADDR`; `perf list` shows them",
            ))
    }

    /// Every name an event can have here, for "did you mean": the fixed names, cache events as
    /// `perf list` prints them, the PMUs' aliases and this CPU's JSON events.
    fn event_names(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (names, _, _) in symbols::HARDWARE.iter().chain(symbols::SOFTWARE) {
            v.extend(names.iter().map(|n| (*n).to_owned()));
        }
        v.extend(symbols::TOOL.iter().map(|(n, _)| (*n).to_owned()));
        for (names, _, ops) in symbols::CACHES {
            let ty = names[0];
            for (op, has) in ["load", "store", "prefetch"].iter().zip(ops) {
                if *has {
                    let plural = if *op == "prefetch" { "prefetches" } else { "s" };
                    let ops = if plural == "s" {
                        format!("{op}s")
                    } else {
                        plural.to_owned()
                    };
                    v.push(format!("{ty}-{ops}"));
                    v.push(format!("{ty}-{op}-misses"));
                }
            }
        }
        for p in self.m.pmus().iter() {
            v.extend(p.events());
        }
        v.extend(self.m.json_events().iter().map(|e| e.name.to_owned()));
        v
    }

    // system:event[/terms/][modifiers] or system:event[:modifiers]
    fn tracepoint(&mut self, system: &str, spos: usize, first: usize) -> Result<()> {
        let (event, epos) = self.name_token();
        if event.is_empty() {
            return Err(self.err(epos, "a tracepoint name was expected after 'system:'"));
        }
        let root = match self.m.tracefs_root() {
            Ok(root) => root,
            Err(why) => return Err(self.err(spos, format!("cannot look up the tracepoint: {why}"))),
        };
        let found = find_tracepoints(&root, system, event).map_err(|msg| self.err(spos, msg))?;
        let mut mods = Modifiers::default();
        let mut x = Extra::default();
        let slash = self.peek() == Some(b'/');
        if slash {
            self.i += 1;
            let terms = self.terms()?;
            let mut fields = [0u64; 5];
            for t in &terms {
                if !self.config_term(t, Ctx::Tracepoint, &mut fields, &mut mods, &mut x)? {
                    let near = did_you_mean(&t.key, TRACEPOINT_TERMS.iter().copied());
                    return Err(self
                        .err(t.pos, format!("unknown term '{}'{near}", t.key))
                        .with_help(
                        "a tracepoint takes: call-graph,stack-size,no-inherit,inherit,max-stack,\
                         nr,no-overwrite,overwrite,aux-output,aux-sample-size",
                    ));
                }
            }
        }
        for (name, id) in found {
            let mut e = Event::new(sys::PERF_TYPE_TRACEPOINT, id, "");
            e.modifiers = Some(Box::new(mods));
            let glob = glob::is_glob(system) || glob::is_glob(event);
            let s = self.push(e);
            if glob {
                s.name = name;
            }
            apply_extra(s, &x);
        }
        if slash {
            self.slash_modifiers(first)
        } else {
            self.colon_modifiers(first)
        }
    }

    // pmu/terms/modifiers: one PMU, PMUs matched by suffix or wildcard, or a legacy name.
    fn pmu_slash(&mut self, name: &str, pos: usize) -> Result<()> {
        let first = self.out.len();
        self.i += 1;
        let terms = self.terms()?;
        let text_end = self.i;
        let mut matched = Vec::new();
        if let Some(p) = Pmu::try_in_dir(self.m.pmu_root(), name) {
            matched.push(p);
        } else {
            for p in self.m.pmus() {
                if pmu_matches(name, p.name()) {
                    matched.push(p);
                }
            }
        }
        if matched.is_empty() {
            // An alias written with terms (`tsc/period=10/`)?
            let pmus = self.m.pmus();
            let with_alias: Vec<&Pmu> = pmus.iter().filter(|p| p.alias(name).is_some()).collect();
            if with_alias.is_empty() {
                let names: Vec<String> =
                    self.m.pmus().iter().map(|p| p.name().to_owned()).collect();
                let mut help = format!("this system has: {}", names.join(" "));
                if crate::sys::is_cpu_pmu(name) && !self.m.pmus().iter().any(Pmu::is_core) {
                    help.push_str(" (no hardware PMU; this looks like a virtual machine)");
                }
                let near = did_you_mean(name, names.iter().map(String::as_str));
                return Err(self
                    .err(pos, format!("no PMU named {name:?}{near}"))
                    .with_help(help));
            }
            let mut all = vec![Term {
                key: name.to_owned(),
                value: None,
                pos,
                vpos: pos,
            }];
            all.extend(terms);
            for pmu in with_alias {
                let e = self.pmu_event(pmu, &all)?;
                self.out.push(e);
            }
            return self.slash_modifiers(first);
        }
        let exact = matched.len() == 1 && matched[0].name() == name;
        let text = self.s[pos..text_end].to_owned();
        let mut first_err = None;
        for pmu in &matched {
            match self.pmu_event(pmu, &terms) {
                Ok(mut e) => {
                    if !exact {
                        e.merge_name = text.clone();
                        if e.name.is_empty() {
                            let inner = &text[name.len()..];
                            e.name = format!("{}{inner}", pmu.name());
                        }
                    }
                    self.out.push(e);
                }
                Err(e) if exact => return Err(e),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if self.out.len() == first {
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        self.slash_modifiers(first)
    }

    /// Builds the event of `terms` on `pmu`, as perf does: aliases expanded in place, then the
    /// config terms, then the format terms OR-ed into their fields.
    fn pmu_event(&mut self, pmu: &Pmu, terms: &[Term]) -> Result<EventSpec> {
        let mut expanded = Vec::new();
        let (mut scale, mut unit) = (None, None);
        self.expand_aliases(pmu, terms, &mut expanded, &mut scale, &mut unit, 0)?;
        let mut fields = [0u64; 5];
        let mut mods = Modifiers::default();
        let mut x = Extra::default();
        let mut legacy: Option<(u32, u64)> = None;
        let mut format_terms = Vec::new();
        for t in &expanded {
            if self.config_term(t, Ctx::Pmu, &mut fields, &mut mods, &mut x)? {
                continue;
            }
            if let Some(f) = pmu.format(&t.key) {
                format_terms.push((t, f));
                continue;
            }
            if pmu.is_core() && t.value.is_none() {
                if let Some(c) = symbols::hardware(&t.key) {
                    legacy = Some((sys::PERF_TYPE_HARDWARE, u64::from(c)));
                    continue;
                }
                if let Ok(c) = symbols::cache(&t.key) {
                    legacy = Some((sys::PERF_TYPE_HW_CACHE, c));
                    continue;
                }
            }
            let mut valid = pmu.formats();
            valid.extend(
                [
                    "config",
                    "config1",
                    "config2",
                    "config3",
                    "name",
                    "period",
                    "freq",
                    "percore",
                    "metric-id",
                ]
                .iter()
                .map(|s| s.to_string()),
            );
            let mut names = valid.clone();
            names.extend(pmu.events());
            let near = did_you_mean(&t.key, names.iter().map(String::as_str));
            return Err(self
                .err(
                    t.pos,
                    format!("unknown term '{}' for pmu '{}'{near}", t.key, pmu.name()),
                )
                .with_help(format!("valid terms: {}", valid.join(","))));
        }
        for (t, f) in format_terms {
            let v = match &t.value {
                None => 1,
                Some(Value::Num(n)) => *n,
                Some(Value::Str(s)) if s == "?" => {
                    return Err(self.err(
                        t.pos,
                        format!(
                            "the alias needs a value for '{}' ({}={}=N)",
                            t.key,
                            pmu.name(),
                            t.key
                        ),
                    ))
                }
                Some(Value::Str(_)) => return Err(self.err(t.vpos, "expected numeric value")),
            };
            let (field, bits, _) = f.place(v).ok_or_else(|| {
                let width: u32 = f.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum();
                let max = if width >= 64 {
                    u64::MAX
                } else {
                    (1u64 << width) - 1
                };
                self.err(
                    t.vpos,
                    format!("value too big for format, maximum is {max}"),
                )
            })?;
            if let Some(f) = fields.get_mut(usize::from(field)) {
                *f |= bits;
            }
        }
        let (ty, config) = match legacy {
            Some((ty, c)) => {
                let c = if self.core_pmus().len() > 1 && self.m.supports_extended_type() {
                    c | u64::from(pmu.ty()) << sys::PERF_PMU_TYPE_SHIFT
                } else {
                    c
                };
                (ty, c)
            }
            None => (pmu.ty(), fields[0]),
        };
        let mut e = Event::new(ty, config, "");
        set_fields(&mut e, &fields, config);
        e.modifiers = Some(Box::new(mods));
        let spec = EventSpec {
            event: e,
            name: String::new(),
            merge_name: String::new(),
            pmu: Some(pmu.name().to_owned()),
            cpus: pmu.cpus(),
            scale,
            unit,
            group: None,
            leader: false,
            mods: ModState::DEFAULT,
            max_events: None,
            per_core: false,
            metric_id: None,
            tool: None,
        };
        let mut spec = spec;
        apply_extra(&mut spec, &x);
        Ok(spec)
    }

    /// The JSON event `name` of `pmu`: core events on core PMUs, others on the PMU their
    /// `Unit` names (`uncore_imc` for `uncore_imc_0`).
    fn json_alias(&self, pmu: &Pmu, name: &str) -> Option<json::JsonEvent> {
        json::find(self.m.json_events(), name)
            .iter()
            .find(|e| json_on(e, pmu))
            .copied()
    }

    /// The PMUs of this machine a JSON event belongs to.
    fn json_pmus(&self, e: &json::JsonEvent) -> Vec<Pmu> {
        self.m
            .pmus()
            .into_iter()
            .filter(|p| json_on(e, p))
            .collect()
    }

    fn expand_aliases(
        &self,
        pmu: &Pmu,
        terms: &[Term],
        out: &mut Vec<Term>,
        scale: &mut Option<f64>,
        unit: &mut Option<String>,
        depth: u32,
    ) -> Result<()> {
        for t in terms {
            let is_alias = !is_config_term(&t.key) && pmu.format(&t.key).is_none() && depth < 4;
            if is_alias && t.value.is_none() && pmu.alias(&t.key).is_none() {
                if let Some(j) = self.json_alias(pmu, &t.key) {
                    let inner = parse_alias_terms(j.terms).map_err(|msg| {
                        self.err(t.pos, format!("JSON event '{}' is not terms: {msg}", t.key))
                    })?;
                    // perf's period from the table is a sampling default, not part of the event.
                    let inner: Vec<Term> = inner
                        .into_iter()
                        .filter(|i| i.key != "period")
                        .map(|mut i| {
                            i.pos = t.pos;
                            i.vpos = t.pos;
                            i
                        })
                        .collect();
                    if let Some((sc, un)) = scale_unit(j.scale_unit) {
                        *scale = Some(sc);
                        *unit = Some(un);
                    }
                    self.expand_aliases(pmu, &inner, out, scale, unit, depth + 1)?;
                    continue;
                }
            }
            if is_alias {
                if let Some(body) = pmu.alias(&t.key) {
                    let inner = parse_alias_terms(&body).map_err(|msg| {
                        self.err(
                            t.pos,
                            format!(
                                "alias '{}' of pmu '{}' is not terms: {msg}",
                                t.key,
                                pmu.name()
                            ),
                        )
                    })?;
                    let inner: Vec<Term> = inner
                        .into_iter()
                        .map(|mut i| {
                            i.pos = t.pos;
                            i.vpos = t.pos;
                            i
                        })
                        .collect();
                    if let Some(s) = pmu.alias_scale(&t.key) {
                        *scale = Some(s);
                    }
                    if let Some(u) = pmu.alias_unit(&t.key) {
                        *unit = Some(u);
                    }
                    self.expand_aliases(pmu, &inner, out, scale, unit, depth + 1)?;
                    continue;
                }
            }
            out.push(t.clone());
        }
        Ok(())
    }

    /// Applies `t` if it is one of perf's config terms valid in `ctx`; `Ok(false)` if it is not one.
    fn config_term(
        &self,
        t: &Term,
        ctx: Ctx,
        fields: &mut [u64; 5],
        mods: &mut Modifiers,
        x: &mut Extra,
    ) -> Result<bool> {
        let key = t.key.as_str();
        if !is_config_term(key) {
            return Ok(false);
        }
        const TRACEPOINT_TERMS: &[&str] = &[
            "call-graph",
            "stack-size",
            "inherit",
            "no-inherit",
            "max-stack",
            "nr",
            "overwrite",
            "no-overwrite",
            "aux-output",
            "aux-sample-size",
        ];
        if ctx == Ctx::Tracepoint && !TRACEPOINT_TERMS.contains(&key) {
            return Ok(false);
        }
        let num = || -> Result<u64> {
            match &t.value {
                Some(Value::Num(n)) => Ok(*n),
                Some(Value::Str(_)) => Err(self.err(t.vpos, "expected numeric value")),
                // As perf: a numeric term written without a value is 1 (`config` = `config=1`).
                None => Ok(1),
            }
        };
        let string = |what: &str| -> Result<String> {
            match &t.value {
                Some(Value::Str(s)) => Ok(s.clone()),
                Some(Value::Num(n)) => Ok(n.to_string()),
                None => Err(self.err(t.pos, format!("'{what}' needs a value ({what}=...)"))),
            }
        };
        let flag = || -> Result<bool> {
            match &t.value {
                None => Ok(true),
                Some(Value::Num(n)) => Ok(*n != 0),
                Some(Value::Str(_)) => Err(self.err(t.vpos, "expected numeric value")),
            }
        };
        let small = |n: u64, max: u64| -> Result<u64> {
            if n > max {
                Err(self.err(t.vpos, format!("'{key}' is at most {max}")))
            } else {
                Ok(n)
            }
        };
        match key {
            "config" => fields[0] = num()?,
            "config1" => fields[1] = num()?,
            "config2" => fields[2] = num()?,
            "config3" => fields[3] = num()?,
            "name" => x.name = Some(string(key)?),
            "period" => mods.sample = Some(SampleRate::Period(num()?)),
            "freq" => mods.sample = Some(SampleRate::Freq(num()?)),
            "time" => mods.time = Some(num()? != 0),
            "call-graph" => {
                let v = string(key)?;
                mods.call_graph = Some(match v.as_str() {
                    "fp" => CallGraph::Fp,
                    "dwarf" => CallGraph::Dwarf,
                    "lbr" => CallGraph::Lbr,
                    "no" => CallGraph::No,
                    _ => {
                        return Err(self.err(
                            t.vpos,
                            format!("unknown call-graph mode '{v}' (fp, dwarf, lbr, no)"),
                        ))
                    }
                });
            }
            "stack-size" => mods.stack_size = Some(small(num()?, u64::from(u32::MAX))? as u32),
            "max-stack" => mods.max_stack = Some(small(num()?, u64::from(u16::MAX))? as u16),
            "inherit" => mods.inherit = Some(flag()?),
            "no-inherit" => mods.inherit = Some(!flag()?),
            "overwrite" => mods.overwrite = Some(flag()?),
            "no-overwrite" => mods.overwrite = Some(!flag()?),
            "nr" => x.max_events = Some(num()?),
            "percore" => x.per_core = flag()?,
            "aux-output" => mods.aux_output = flag()?,
            "aux-sample-size" => {
                mods.aux_sample_size = Some(small(num()?, u64::from(u32::MAX))? as u32)
            }
            "metric-id" => x.metric_id = Some(string(key)?),
            "driver-config" => {
                string(key)?;
            }
            "branch_type" => {
                let v = string(key)?;
                let mut bits = 0u64;
                for part in v.split('|') {
                    bits |= branch_type(part)
                        .ok_or_else(|| self.err(t.vpos, format!("unknown branch_type '{part}'")))?;
                }
                mods.branch_type = Some(bits);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `term(,term)*` up to and including the closing '/'; the opening '/' is consumed.
    fn terms(&mut self) -> Result<Vec<Term>> {
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(b'/') {
            self.i += 1;
            return Ok(out);
        }
        loop {
            self.ws();
            let pos = self.i;
            while self.peek().is_some_and(is_term_char) {
                self.i += 1;
            }
            if self.i == pos {
                return Err(match self.peek() {
                    None => self.err(pos, "terms not closed by '/'"),
                    Some(c) => self.err(
                        pos,
                        format!("unexpected '{}': a term was expected", c as char),
                    ),
                });
            }
            let key = self.s[pos..self.i].to_owned();
            self.ws();
            let mut value = None;
            let mut vpos = pos;
            if self.peek() == Some(b'=') {
                self.i += 1;
                self.ws();
                vpos = self.i;
                value = Some(self.term_value()?);
            }
            out.push(Term {
                key,
                value,
                pos,
                vpos,
            });
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'/') => {
                    self.i += 1;
                    return Ok(out);
                }
                None => return Err(self.err(self.i, "terms not closed by '/'")),
                Some(c) => {
                    return Err(self.err(self.i, format!("unexpected '{}' in terms", c as char)))
                }
            }
        }
    }

    fn term_value(&mut self) -> Result<Value> {
        let pos = self.i;
        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Ok(Value::Num(self.number()?.unwrap_or_default()));
        }
        while self
            .peek()
            .is_some_and(|c| !matches!(c, b',' | b'/' | b' ' | b'\t' | b'{' | b'}'))
        {
            self.i += 1;
        }
        if self.i == pos {
            return Err(self.err(pos, "a value was expected after '='"));
        }
        Ok(Value::Str(self.s[pos..self.i].to_owned()))
    }

    /// A decimal or `0x` hex number; `None` when there is no digit here.
    fn number(&mut self) -> Result<Option<u64>> {
        let pos = self.i;
        let rest = &self.b[self.i..];
        let (digits, radix, skip) =
            if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
                let n = rest[2..]
                    .iter()
                    .take_while(|c| c.is_ascii_hexdigit())
                    .count();
                if n == 0 {
                    return Err(self.err(pos + 2, "hex digits were expected after '0x'"));
                }
                (&self.s[pos + 2..pos + 2 + n], 16, 2 + n)
            } else {
                let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
                if n == 0 {
                    return Ok(None);
                }
                (&self.s[pos..pos + n], 10, n)
            };
        let v = u64::from_str_radix(digits, radix)
            .map_err(|_| self.err(pos, "number too large for 64 bits"))?;
        self.i += skip;
        if self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            return Err(self.err(self.i, "not a number"));
        }
        Ok(Some(v))
    }
}

/// Whether JSON event `e` is an event of `pmu`.
pub(super) fn json_on(e: &json::JsonEvent, pmu: &Pmu) -> bool {
    if e.pmu.is_empty() {
        pmu.is_core()
    } else {
        e.pmu == pmu.name() || pmu_matches(e.pmu, pmu.name())
    }
}

/// A JSON `ScaleUnit` (`64Bytes`, `6.103515625e-5MiB`) as scale and unit.
fn scale_unit(s: &str) -> Option<(f64, String)> {
    if s.is_empty() {
        return None;
    }
    let split = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit() || c == '.' || (c == 'e' && i > 0) || (c == '-' && i > 0))
        })
        .map_or(s.len(), |(i, _)| i);
    let scale = s[..split].parse().ok()?;
    Some((scale, s[split..].trim().to_owned()))
}

fn bad_modifier(letters: &str, off: usize) -> String {
    match letters[off..].chars().next() {
        Some(c) if MODIFIER_LETTERS.contains(c) || off == 0 && letters.starts_with('p') => {
            "Bad modifier: at most three 'p'".into()
        }
        Some(c) => format!("unknown modifier '{c}' (modifiers: {MODIFIER_LETTERS})"),
        None => "Bad modifier".into(),
    }
}

fn tool(name: &str) -> Option<Tool> {
    match name {
        "duration_time" => Some(Tool::DurationTime),
        "user_time" => Some(Tool::UserTime),
        "system_time" => Some(Tool::SystemTime),
        _ => None,
    }
}

/// The config terms, as `is_config_term` takes them.
const CONFIG_TERMS: &[&str] = &[
    "config",
    "config1",
    "config2",
    "config3",
    "name",
    "period",
    "freq",
    "branch_type",
    "time",
    "call-graph",
    "stack-size",
    "no-inherit",
    "inherit",
    "max-stack",
    "nr",
    "overwrite",
    "no-overwrite",
    "driver-config",
    "percore",
    "aux-output",
    "aux-sample-size",
    "metric-id",
];

/// The terms a tracepoint takes.
const TRACEPOINT_TERMS: &[&str] = &[
    "call-graph",
    "stack-size",
    "no-inherit",
    "inherit",
    "max-stack",
    "nr",
    "no-overwrite",
    "overwrite",
    "aux-output",
    "aux-sample-size",
];

fn is_config_term(key: &str) -> bool {
    matches!(
        key,
        "config"
            | "config1"
            | "config2"
            | "config3"
            | "name"
            | "period"
            | "freq"
            | "branch_type"
            | "time"
            | "call-graph"
            | "stack-size"
            | "no-inherit"
            | "inherit"
            | "max-stack"
            | "nr"
            | "overwrite"
            | "no-overwrite"
            | "driver-config"
            | "percore"
            | "aux-output"
            | "aux-sample-size"
            | "metric-id"
    )
}

fn branch_type(name: &str) -> Option<u64> {
    let b = match name {
        "u" => sys::PERF_SAMPLE_BRANCH_USER,
        "k" => sys::PERF_SAMPLE_BRANCH_KERNEL,
        "hv" => sys::PERF_SAMPLE_BRANCH_HV,
        "any" => sys::PERF_SAMPLE_BRANCH_ANY,
        "any_call" => sys::PERF_SAMPLE_BRANCH_ANY_CALL,
        "any_ret" => sys::PERF_SAMPLE_BRANCH_ANY_RETURN,
        "ind_call" => sys::PERF_SAMPLE_BRANCH_IND_CALL,
        "abort_tx" => sys::PERF_SAMPLE_BRANCH_ABORT_TX,
        "in_tx" => sys::PERF_SAMPLE_BRANCH_IN_TX,
        "no_tx" => sys::PERF_SAMPLE_BRANCH_NO_TX,
        "cond" => sys::PERF_SAMPLE_BRANCH_COND,
        "call_stack" => sys::PERF_SAMPLE_BRANCH_CALL_STACK,
        "ind_jmp" => sys::PERF_SAMPLE_BRANCH_IND_JUMP,
        "call" => sys::PERF_SAMPLE_BRANCH_CALL,
        "no_flags" => sys::PERF_SAMPLE_BRANCH_NO_FLAGS,
        "no_cycles" => sys::PERF_SAMPLE_BRANCH_NO_CYCLES,
        "save_type" => sys::PERF_SAMPLE_BRANCH_TYPE_SAVE,
        "hw_index" => sys::PERF_SAMPLE_BRANCH_HW_INDEX,
        "priv" => sys::PERF_SAMPLE_BRANCH_PRIV_SAVE,
        "counter" => sys::PERF_SAMPLE_BRANCH_COUNTERS,
        _ => return None,
    };
    Some(u64::from(b))
}

/// Parses the text of a sysfs alias (`event=0x3c,umask=0x00`); an error says what is wrong.
fn parse_alias_terms(body: &str) -> std::result::Result<Vec<Term>, String> {
    let m = Machine::from_sysfs("/nonexistent");
    let text = format!("{body}/");
    let mut p = Parser::new(&m, &text);
    p.terms().map_err(|e| e.message().to_owned())
}

/// Whether the PMU name `pmu` is meant by `name` written in `name/terms/`: a wildcard pattern
/// matching it, or `name` followed by a numeric suffix (`uncore_imc` for `uncore_imc_0`), with
/// `uncore_` optional.
fn pmu_matches(name: &str, pmu: &str) -> bool {
    let short = match pmu.strip_prefix("uncore_") {
        Some(s) if !name.starts_with("uncore_") => s,
        _ => pmu,
    };
    if glob::is_glob(name) {
        return glob::matches(name, pmu) || glob::matches(name, short);
    }
    let Some(rest) = short.strip_prefix(name) else {
        return false;
    };
    let rest = rest.strip_prefix('_').unwrap_or(rest);
    !rest.is_empty() && rest.bytes().all(|c| c.is_ascii_digit())
}

/// Tracepoints `system:event` (either may be a wildcard), sorted by name: `(system:event, id)`.
fn find_tracepoints(
    root: &Path,
    system: &str,
    event: &str,
) -> std::result::Result<Vec<(String, u64)>, String> {
    let events = root.join("events");
    let read_id = |sys: &str, ev: &str| -> Option<u64> {
        fs::read_to_string(events.join(sys).join(ev).join("id"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let bad = |c: &str| c.contains('/') || c == "." || c == "..";
    if bad(system) || bad(event) {
        return Err("not a tracepoint name".into());
    }
    if !glob::is_glob(system) && !glob::is_glob(event) {
        return match read_id(system, event) {
            Some(id) => Ok(vec![(format!("{system}:{event}"), id)]),
            None => Err(tracefs_problem(root, &events.join(system).join(event))
                + &tracepoint_suggestion(&events, system, event)),
        };
    }
    let dirs = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut out = Vec::new();
    for sys in dirs(&events)
        .into_iter()
        .filter(|s| glob::matches(system, s))
    {
        for ev in dirs(&events.join(&sys))
            .into_iter()
            .filter(|e| glob::matches(event, e))
        {
            if let Some(id) = read_id(&sys, &ev) {
                out.push((format!("{sys}:{ev}"), id));
            }
        }
    }
    // The kernel's order (by id), which is the order tracefs lists them in and perf takes them.
    out.sort_by_key(|&(_, id)| id);
    if out.is_empty() {
        if !events.exists() {
            return Err(tracefs_problem(root, &events));
        }
        return Err(format!(
            "unknown tracepoint: no tracepoint matches {system}:{event}{}",
            tracepoint_suggestion(&events, system, event)
        ));
    }
    Ok(out)
}

/// "; did you mean 'sched:sched_switch'?" for `system:event`: the nearest tracepoint among the
/// events of this system and of systems with a name near it (empty when none is near).
pub(crate) fn tracepoint_suggestion(events: &Path, system: &str, event: &str) -> String {
    let dirs = |d: &Path| -> Vec<String> {
        fs::read_dir(d)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut names = Vec::new();
    for s in dirs(events) {
        if s == system || suggest::distance(&s, system) <= 2 {
            names.extend(
                dirs(&events.join(&s))
                    .into_iter()
                    .map(|e| format!("{s}:{e}")),
            );
        }
    }
    did_you_mean(
        &format!("{system}:{event}"),
        names.iter().map(String::as_str),
    )
}

fn tracefs_problem(root: &Path, wanted: &Path) -> String {
    let events = root.join("events");
    match fs::metadata(&events) {
        Ok(_) => format!("unknown tracepoint: {} does not exist", wanted.display()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => format!(
            "unknown tracepoint: tracefs ({}) is not readable by this user",
            root.display()
        ),
        Err(_) => format!(
            "unknown tracepoint: tracefs is not mounted at {}",
            root.display()
        ),
    }
}

fn set_fields(e: &mut Event, fields: &[u64; 5], config: u64) {
    e.config = config;
    e.config1 = fields[1];
    e.config2 = fields[2];
    e.config3 = fields[3];
    e.config4 = fields[4];
}

fn apply_extra(s: &mut EventSpec, x: &Extra) {
    if let Some(n) = &x.name {
        s.name = n.clone();
    }
    s.max_events = x.max_events;
    s.per_core = x.per_core;
    s.metric_id = x.metric_id.clone();
}

/// Resolved mods go into the event when parsing ends (see `super::EventList`).
fn seal(list: &mut EventList) {
    for e in &mut list.events {
        let terms = e.event.modifiers.as_deref().copied().unwrap_or_default();
        let mut m = e.mods.to_modifiers();
        m.sample = terms.sample;
        m.time = terms.time;
        m.call_graph = terms.call_graph;
        m.stack_size = terms.stack_size;
        m.max_stack = terms.max_stack;
        m.inherit = terms.inherit;
        m.overwrite = terms.overwrite;
        m.branch_type = terms.branch_type;
        m.aux_output = terms.aux_output;
        m.aux_sample_size = terms.aux_sample_size;
        e.event.modifiers = (m != Modifiers::default()).then(|| Box::new(m));
        e.event.name = e.name.clone();
    }
}
