//! Fuzz target `parse`: an arbitrary layout and arbitrary bytes, split at an arbitrary seam.
//!
//! Input: 40 bytes of layout (sample_type, read_format, branch_sample_type, sample_regs_user,
//! sample_regs_intr as native-endian u64), 1 byte of flags (bit 0: sample_id_all), 2 bytes of seam
//! position, then the record bytes. The walk, the typed parse and the lazy view must never panic; the view must accept what the parse accepts
//! and read the same record; every record that parses
//! must encode and parse back to itself. Seeds: `corpus/parse/seed-*`, made from the captured fixtures.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_core::record::RecordView;
use perf_core::{Chunk, ParseConfig, ParseFields, RawRecord, Records};

fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(w)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 43 {
        return;
    }
    let (head, bytes) = data.split_at(43);
    let cfg = ParseConfig::new(ParseFields {
        sample_type: word(head, 0),
        read_format: word(head, 1),
        branch_sample_type: word(head, 2),
        sample_regs_user: word(head, 3),
        sample_regs_intr: word(head, 4),
        sample_id_all: head[40] & 1 != 0,
        build_id: head[40] & 2 != 0,
    });
    let seam = (u16::from_ne_bytes([head[41], head[42]]) as usize).min(bytes.len());
    let chunk = Chunk::new(&bytes[..seam], &bytes[seam..]);
    for raw in Records::new(chunk) {
        let Ok(raw) = raw else { break };
        let _ = (
            raw.time(&cfg),
            raw.id(&cfg),
            raw.cpu(&cfg),
            raw.stream_id(&cfg),
            raw.thread(&cfg),
        );
        let _ = raw.sample_id(&cfg);
        // The lazy view accepts exactly what the parse accepts, with the same error or the same record.
        let view = raw.view(&cfg);
        let Ok(rec) = raw.parse(&cfg) else {
            let (Err(a), Err(b)) = (raw.parse(&cfg), view) else {
                panic!("the view accepts what the parse refuses")
            };
            assert_eq!(a.to_string(), b.to_string());
            continue;
        };
        let view = view.expect("the view refuses what the parse accepts");
        assert_eq!(
            view.to_record(),
            rec,
            "the view reads other values than the parse"
        );
        if let RecordView::Sample(s) = &view {
            let _ = (
                s.ip(),
                s.time(),
                s.thread(),
                s.callchain(),
                s.raw(),
                s.branch_stack(),
                s.read(),
            );
        }
        let mut out = Vec::new();
        if rec.encode(&cfg, &mut out).is_ok() {
            let (again, size) =
                RawRecord::from_chunk(Chunk::contiguous(&out)).expect("encoded header");
            assert_eq!(size, out.len());
            let back = again.parse(&cfg).expect("an encoded record parses");
            assert_eq!(back, rec, "encode → parse is not the identity");
        }
        let _ = rec.into_owned();
    }
});
