//! The encoder: a [`Record`] back to the bytes the kernel would have written (header included).
//!
//! It is the inverse of [`RawRecord::parse`](crate::RawRecord::parse): for every record the kernel can write,
//! `parse(encode(r)) == r`. Used by the round-trip tests and by perf.data writers.

use perf_sys::*;

use crate::record::*;
use crate::ErrorKind;
use crate::{Chunk, Error, ParseConfig};

struct Writer<'o> {
    out: &'o mut Vec<u8>,
    start: usize,
    record: &'static str,
}

impl Writer<'_> {
    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_ne_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_ne_bytes());
    }
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_ne_bytes());
    }
    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    fn bytes(&mut self, b: &Bytes<'_>) {
        self.chunk(b.chunk());
    }
    fn chunk(&mut self, c: Chunk<'_>) {
        self.out.extend_from_slice(c.first());
        self.out.extend_from_slice(c.second());
    }
    fn words(&mut self, w: &U64s<'_>) {
        for v in w {
            self.u64(v);
        }
    }
    /// Checks the size of the record written since `start` and patches it into its header.
    fn patch_size(&mut self) -> Result<usize, Error> {
        let size = self.out.len() - self.start;
        if size & 7 != 0 {
            return Err(self.err(
                "the record's size is not a multiple of 8 (pad RAW to 4 mod 8, AUX and stack data to 8)",
            ));
        }
        let size16 =
            u16::try_from(size).map_err(|_| self.err("records are at most 65535 bytes"))?;
        self.out[self.start + 6..self.start + 8].copy_from_slice(&size16.to_ne_bytes());
        Ok(size)
    }
    fn err(&self, reason: &'static str) -> Error {
        ErrorKind::Encode {
            record: self.record,
            reason,
        }
        .into()
    }
    /// A NUL-terminated string padded with NULs to a multiple of 8 bytes (as the kernel writes names).
    fn c_string(&mut self, s: &Bytes<'_>) -> Result<(), Error> {
        if s.iter().any(|b| b == 0) {
            return Err(self.err("a name contains a NUL byte"));
        }
        self.bytes(s);
        self.pad_to_8_with_nul();
        Ok(())
    }
    fn pad_to_8_with_nul(&mut self) {
        self.out.push(0);
        self.pad_to_8();
    }
    fn pad_to_8(&mut self) {
        while (self.out.len() - self.start) & 7 != 0 {
            self.out.push(0);
        }
    }
    fn opt(&mut self, present: bool, v: Option<u64>, field: &'static str) -> Result<(), Error> {
        match (present, v) {
            (true, Some(v)) => {
                self.u64(v);
                Ok(())
            }
            (false, None) => Ok(()),
            (true, None) => Err(self.err(field)),
            (false, Some(_)) => Err(self.err(field)),
        }
    }
}

fn check<T>(w: &Writer<'_>, present: bool, v: &Option<T>, why: &'static str) -> Result<(), Error> {
    if present == v.is_some() {
        Ok(())
    } else {
        Err(w.err(why))
    }
}

fn write_sample_id(w: &mut Writer<'_>, id: &SampleId, cfg: &ParseConfig) -> Result<(), Error> {
    let all = cfg.sample_id_all();
    let has = |bit: u32| all && cfg.sample_type() & bit as u64 != 0;
    const WHY: &str = "sample_id fields must be present exactly when sample_id_all and their PERF_SAMPLE_* bit are set";
    check(w, has(PERF_SAMPLE_TID), &id.thread, WHY)?;
    if let Some(t) = id.thread {
        w.u32(t.pid);
        w.u32(t.tid);
    }
    w.opt(has(PERF_SAMPLE_TIME), id.time, WHY)?;
    w.opt(has(PERF_SAMPLE_ID), id.id, WHY)?;
    w.opt(has(PERF_SAMPLE_STREAM_ID), id.stream_id, WHY)?;
    check(w, has(PERF_SAMPLE_CPU), &id.cpu, WHY)?;
    if let Some(cpu) = id.cpu {
        w.u32(cpu);
        w.u32(0);
    }
    w.opt(has(PERF_SAMPLE_IDENTIFIER), id.identifier, WHY)
}

fn write_read(w: &mut Writer<'_>, v: &ReadValues<'_>, cfg: &ParseConfig) -> Result<(), Error> {
    let f = cfg.read_format();
    let has = |bit: u32| f & bit as u64 != 0;
    const WHY: &str = "read values must match read_format";
    match v {
        ReadValues::Single(s) => {
            if has(PERF_FORMAT_GROUP) {
                return Err(
                    w.err("read_format has PERF_FORMAT_GROUP but the values are a single counter")
                );
            }
            w.u64(s.value);
            w.opt(has(PERF_FORMAT_TOTAL_TIME_ENABLED), s.time_enabled, WHY)?;
            w.opt(has(PERF_FORMAT_TOTAL_TIME_RUNNING), s.time_running, WHY)?;
            w.opt(has(PERF_FORMAT_ID), s.id, WHY)?;
            w.opt(has(PERF_FORMAT_LOST), s.lost, WHY)
        }
        ReadValues::Group(g) => {
            if !has(PERF_FORMAT_GROUP)
                || g.has_id != has(PERF_FORMAT_ID)
                || g.has_lost != has(PERF_FORMAT_LOST)
            {
                return Err(w.err(WHY));
            }
            let stride = 1 + g.has_id as usize + g.has_lost as usize;
            if g.words.len() % stride != 0 {
                return Err(w.err("group read words are not a whole number of entries"));
            }
            w.u64((g.words.len() / stride) as u64);
            w.opt(has(PERF_FORMAT_TOTAL_TIME_ENABLED), g.time_enabled, WHY)?;
            w.opt(has(PERF_FORMAT_TOTAL_TIME_RUNNING), g.time_running, WHY)?;
            w.words(&g.words);
            Ok(())
        }
    }
}

fn write_regs(w: &mut Writer<'_>, r: &Regs<'_>, count: usize) -> Result<(), Error> {
    w.u64(r.abi);
    let want = if r.abi == PERF_SAMPLE_REGS_ABI_NONE as u64 {
        0
    } else {
        count
    };
    if r.values.len() != want {
        return Err(w.err("register values must be one per mask bit (none when abi is NONE)"));
    }
    w.words(&r.values);
    Ok(())
}

fn write_sample(w: &mut Writer<'_>, s: &SampleFields<'_>, cfg: &ParseConfig) -> Result<(), Error> {
    let has = |bit: u32| cfg.sample_type() & bit as u64 != 0;
    const WHY: &str = "sample fields must be present exactly when their PERF_SAMPLE_* bit is set";
    if cfg.sample_type() >= PERF_SAMPLE_MAX as u64 {
        return Err(w.err("sample_type has bits this encoder does not know"));
    }
    w.opt(has(PERF_SAMPLE_IDENTIFIER), s.identifier, WHY)?;
    w.opt(has(PERF_SAMPLE_IP), s.ip, WHY)?;
    check(w, has(PERF_SAMPLE_TID), &s.thread, WHY)?;
    if let Some(t) = s.thread {
        w.u32(t.pid);
        w.u32(t.tid);
    }
    w.opt(has(PERF_SAMPLE_TIME), s.time, WHY)?;
    w.opt(has(PERF_SAMPLE_ADDR), s.addr, WHY)?;
    w.opt(has(PERF_SAMPLE_ID), s.id, WHY)?;
    w.opt(has(PERF_SAMPLE_STREAM_ID), s.stream_id, WHY)?;
    check(w, has(PERF_SAMPLE_CPU), &s.cpu, WHY)?;
    if let Some(cpu) = s.cpu {
        w.u32(cpu);
        w.u32(0);
    }
    w.opt(has(PERF_SAMPLE_PERIOD), s.period, WHY)?;
    check(w, has(PERF_SAMPLE_READ), &s.read, WHY)?;
    if let Some(r) = &s.read {
        write_read(w, r, cfg)?;
    }
    check(w, has(PERF_SAMPLE_CALLCHAIN), &s.callchain, WHY)?;
    if let Some(c) = &s.callchain {
        w.u64(c.ips.len() as u64);
        w.words(&c.ips);
    }
    check(w, has(PERF_SAMPLE_RAW), &s.raw, WHY)?;
    if let Some(raw) = &s.raw {
        let len = u32::try_from(raw.len()).map_err(|_| w.err("RAW data longer than u32"))?;
        w.u32(len);
        w.bytes(raw);
    }
    check(w, has(PERF_SAMPLE_BRANCH_STACK), &s.branch_stack, WHY)?;
    if let Some(b) = &s.branch_stack {
        if b.words.len() % 3 != 0 {
            return Err(w.err("branch stack words are not a whole number of entries"));
        }
        let nr = b.words.len() / 3;
        w.u64(nr as u64);
        let bst = cfg.branch_sample_type();
        w.opt(
            bst & PERF_SAMPLE_BRANCH_HW_INDEX as u64 != 0,
            b.hw_idx,
            "hw_idx must be present exactly with PERF_SAMPLE_BRANCH_HW_INDEX",
        )?;
        w.words(&b.words);
        check(
            w,
            bst & PERF_SAMPLE_BRANCH_COUNTERS as u64 != 0,
            &b.counters,
            "branch counters must be present exactly with PERF_SAMPLE_BRANCH_COUNTERS",
        )?;
        if let Some(c) = &b.counters {
            if c.len() != nr {
                return Err(w.err("one branch counters word per entry"));
            }
            w.words(c);
        }
    }
    check(w, has(PERF_SAMPLE_REGS_USER), &s.regs_user, WHY)?;
    if let Some(r) = &s.regs_user {
        write_regs(w, r, cfg.regs_user_mask().count_ones() as usize)?;
    }
    check(w, has(PERF_SAMPLE_STACK_USER), &s.stack_user, WHY)?;
    if let Some(st) = &s.stack_user {
        w.u64(st.data.len() as u64);
        w.bytes(&st.data);
        if st.data.is_empty() {
            if st.dyn_size != 0 {
                return Err(w.err("an empty user stack has no dyn_size"));
            }
        } else {
            w.u64(st.dyn_size);
        }
    }
    w.opt(
        has(PERF_SAMPLE_WEIGHT) || has(PERF_SAMPLE_WEIGHT_STRUCT),
        s.weight.map(|x| x.0),
        WHY,
    )?;
    w.opt(has(PERF_SAMPLE_DATA_SRC), s.data_src, WHY)?;
    w.opt(has(PERF_SAMPLE_TRANSACTION), s.transaction, WHY)?;
    check(w, has(PERF_SAMPLE_REGS_INTR), &s.regs_intr, WHY)?;
    if let Some(r) = &s.regs_intr {
        write_regs(w, r, cfg.regs_intr_mask().count_ones() as usize)?;
    }
    w.opt(has(PERF_SAMPLE_PHYS_ADDR), s.phys_addr, WHY)?;
    w.opt(has(PERF_SAMPLE_CGROUP), s.cgroup, WHY)?;
    w.opt(has(PERF_SAMPLE_DATA_PAGE_SIZE), s.data_page_size, WHY)?;
    w.opt(has(PERF_SAMPLE_CODE_PAGE_SIZE), s.code_page_size, WHY)?;
    check(w, has(PERF_SAMPLE_AUX), &s.aux, WHY)?;
    if let Some(aux) = &s.aux {
        w.u64(aux.len() as u64);
        w.bytes(aux);
    }
    Ok(())
}

/// The body of a sample with these fields as `cfg` lays them out, checked as [`Record::encode`] checks a
/// record (fields present exactly with their bits, size a multiple of 8 and at most 64 KiB).
pub(crate) fn sample_body(fields: &SampleFields<'_>, cfg: &ParseConfig) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut w = Writer {
        out: &mut out,
        start: 0,
        record: "SAMPLE",
    };
    w.u64(0); // the header, not part of the body
    write_sample(&mut w, fields, cfg)?;
    w.patch_size()?;
    out.drain(..8);
    Ok(out)
}

impl Record<'_> {
    /// Appends the record's bytes, header included, to `out`, laid out as `cfg` says; returns the record's size.
    ///
    /// # Errors
    /// [`ErrorKind::Encode`] when the record does not fit the layout (a sample field present without its
    /// `PERF_SAMPLE_*` bit or missing with it, a sample_id trailer that disagrees with `sample_id_all`, a name
    /// with a NUL byte, a record over 64 KiB, a size that is not a multiple of 8). `out` is left as it was.
    pub fn encode(&self, cfg: &ParseConfig, out: &mut Vec<u8>) -> Result<usize, Error> {
        let start = out.len();
        let mut w = Writer {
            out,
            start,
            record: record_type_name(self.record_type()),
        };
        let r = encode_into(self, cfg, &mut w).and_then(|()| w.patch_size());
        if r.is_err() {
            out.truncate(start);
        }
        r
    }
}

fn encode_into(rec: &Record<'_>, cfg: &ParseConfig, w: &mut Writer<'_>) -> Result<(), Error> {
    w.u32(rec.record_type());
    w.u16(rec.misc().0);
    w.u16(0); // size, patched by the caller
    match rec {
        // Laid out by this config already: its bytes as they are.
        Record::Sample(s) if s.config() == cfg => {
            w.chunk(s.data());
            return Ok(());
        }
        Record::Sample(s) => return write_sample(w, &s.fields(), cfg),
        Record::Unknown(u) => {
            w.bytes(&u.data);
            return Ok(());
        }
        Record::Mmap(r) => {
            w.u32(r.pid);
            w.u32(r.tid);
            w.u64(r.addr);
            w.u64(r.len);
            w.u64(r.pgoff);
            w.c_string(&r.filename)?;
        }
        Record::Lost(r) => {
            w.u64(r.id);
            w.u64(r.lost);
        }
        Record::Comm(r) => {
            w.u32(r.pid);
            w.u32(r.tid);
            w.c_string(&r.comm)?;
        }
        Record::Exit(r) | Record::Fork(r) => {
            w.u32(r.pid);
            w.u32(r.ppid);
            w.u32(r.tid);
            w.u32(r.ptid);
            w.u64(r.time);
        }
        Record::Throttle(r) | Record::Unthrottle(r) => {
            w.u64(r.time);
            w.u64(r.id);
            w.u64(r.stream_id);
        }
        Record::Read(r) => {
            w.u32(r.pid);
            w.u32(r.tid);
            write_read(w, &r.values, cfg)?;
        }
        Record::Mmap2(r) => {
            w.u32(r.pid);
            w.u32(r.tid);
            w.u64(r.addr);
            w.u64(r.len);
            w.u64(r.pgoff);
            match (&r.file, cfg.mmap2_has_build_id(r.misc)) {
                (Mmap2File::BuildId(b), true) => {
                    w.u8(b.size);
                    w.u8(0);
                    w.u16(0);
                    w.out.extend_from_slice(&b.bytes);
                }
                (
                    Mmap2File::Inode {
                        maj,
                        min,
                        ino,
                        ino_generation,
                    },
                    false,
                ) => {
                    w.u32(*maj);
                    w.u32(*min);
                    w.u64(*ino);
                    w.u64(*ino_generation);
                }
                _ => return Err(w.err(
                    "the file is a build id exactly when misc has PERF_RECORD_MISC_MMAP_BUILD_ID and the \
                     config has build_id",
                )),
            }
            w.u32(r.prot);
            w.u32(r.flags);
            w.c_string(&r.filename)?;
        }
        Record::Aux(r) => {
            w.u64(r.aux_offset);
            w.u64(r.aux_size);
            w.u64(r.flags.0);
        }
        Record::ItraceStart(r) => {
            w.u32(r.pid);
            w.u32(r.tid);
        }
        Record::LostSamples(r) => w.u64(r.lost),
        Record::Switch(_) => {}
        Record::SwitchCpuWide(r) => {
            w.u32(r.next_prev_pid);
            w.u32(r.next_prev_tid);
        }
        Record::Namespaces(r) => {
            if r.words.len() % 2 != 0 {
                return Err(w.err("namespace words come in dev, inode pairs"));
            }
            w.u32(r.pid);
            w.u32(r.tid);
            w.u64((r.words.len() / 2) as u64);
            w.words(&r.words);
        }
        Record::Ksymbol(r) => {
            w.u64(r.addr);
            w.u32(r.len);
            w.u16(r.ksym_type);
            w.u16(r.flags);
            w.c_string(&r.name)?;
        }
        Record::BpfEvent(r) => {
            w.u16(r.event_type);
            w.u16(r.flags);
            w.u32(r.id);
            w.out.extend_from_slice(&r.tag);
        }
        Record::Cgroup(r) => {
            w.u64(r.id);
            w.c_string(&r.path)?;
        }
        Record::TextPoke(r) => {
            let old =
                u16::try_from(r.old_bytes.len()).map_err(|_| w.err("old bytes longer than u16"))?;
            let new =
                u16::try_from(r.new_bytes.len()).map_err(|_| w.err("new bytes longer than u16"))?;
            w.u64(r.addr);
            w.u16(old);
            w.u16(new);
            w.bytes(&r.old_bytes);
            w.bytes(&r.new_bytes);
            w.pad_to_8();
        }
        Record::AuxOutputHwId(r) => w.u64(r.hw_id),
        Record::CallchainDeferred(r) => {
            w.u64(r.cookie);
            w.u64(r.ips.len() as u64);
            w.words(&r.ips);
        }
    }
    let id = rec.sample_id().copied().unwrap_or_default();
    write_sample_id(w, &id, cfg)
}
