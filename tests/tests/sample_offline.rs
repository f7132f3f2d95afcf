//! Offline parsing (the `serde` feature): the parser state and the records serialize, so bytes captured
//! now can be parsed later, elsewhere, to the same records.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use perf_event::config::{CallChain, Cpu, Opts, Proc, SampleOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::{Priv, Record};
use perf_event::sample::Parser;

#[test]
fn captured_bytes_parse_the_same_after_a_serde_round_trip() {
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.sample_on = SampleOn::Count(1);
    opts.sample_format.code_addr = true;
    opts.sample_format.data_addr = true;
    opts.sample_format.call_chain = Some(CallChain {
        exclude_user: false,
        exclude_kernel: true,
        defer_user: false,
        max_stack_frames: 16,
    });
    opts.record_id_format.task = true;
    opts.record_id_format.time = true;
    let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(4).unwrap();
    counter.enable().unwrap();
    tests::touch_pages(16);
    counter.disable().unwrap();

    // Capture: the raw bytes and what the live parser made of them.
    let mut captured: Vec<(Vec<u8>, (Priv, Record))> = Vec::new();
    let mut iter = sampler.iter().into_cow();
    while let Some(item) =
        iter.next(|chunk, parser| (chunk.as_bytes().to_vec(), parser.parse(chunk)))
    {
        captured.push(item);
    }
    let samples = captured
        .iter()
        .filter(|(_, (_, r))| matches!(r, Record::Sample(_)))
        .count();
    assert!(samples >= 16, "{samples} samples for 16 faults");

    // Ship the parser state and the records as JSON, then parse the bytes again from the copy.
    let json = serde_json::to_string(sampler.parser()).unwrap();
    let parser: Parser = serde_json::from_str(&json).unwrap();
    for (bytes, (prv, record)) in &captured {
        let again = parser.parse_bytes(bytes);
        assert_eq!(&again, &(*prv, record.clone()));
        let text = serde_json::to_string(record).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, record, "{text}");
    }
}
