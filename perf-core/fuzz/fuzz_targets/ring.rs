//! Fuzzes the ring consumer over arbitrary head/tail positions and area contents, on simulated kernel
//! memory: data rings (forward batches, raw chunks, recovery), overwrite rings (backward snapshots) and AUX
//! areas (normal and snapshot). Nothing may panic, hang or read out of bounds, and the invariants below hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_core::sim::{Sim, SimConfig, SimOutput};
use perf_core::RingMode;

/// Reads input bytes as numbers, zeros when exhausted.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| v << 8 | u64::from(self.u8()))
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let size = 1u64 << (3 + input.u8() % 10); // 8 B .. 4 KiB
    let mode = input.u8();
    let head = input.u64();
    let tail = match input.u8() % 3 {
        0 => input.u64(),
        // Mostly plausible positions, so the walk gets going.
        _ => head.wrapping_sub(input.u64() % (size + 16)),
    };
    let max_chunk = input.u64() % (2 * size) + 1;
    let contents = input.0;
    match mode % 3 {
        0 => data_ring(size, head, tail, max_chunk, contents),
        1 => overwrite_ring(size, head, tail, contents),
        _ => aux(size, contents),
    }
});

fn data_ring(size: u64, head: u64, tail: u64, max_chunk: u64, contents: &[u8]) {
    let Sim {
        mut kernel,
        mut ring,
        ..
    } = Sim::new(SimConfig::new(size)).unwrap();
    kernel.corrupt(&mut ring, 0, contents).unwrap();
    kernel.set_positions(&mut ring, head, tail).unwrap();
    let valid = head.wrapping_sub(tail) < size;
    match ring.batch() {
        Ok(mut batch) => {
            assert!(valid);
            let mut covered = 0u64;
            let mut records = 0u64;
            while let Ok(Some(rec)) = batch.next_record() {
                assert!(rec.len() >= 8 && rec.len() & 7 == 0);
                assert_eq!(rec.read_u16(6), Some(rec.len() as u16));
                covered += rec.len() as u64;
                records += 1;
                assert!(records <= size / 8);
            }
            assert!(covered < size);
            assert_eq!(batch.position(), tail.wrapping_add(covered));
            let mut raw = 0u64;
            while let Some(chunk) = batch.next_chunk(Some(max_chunk)) {
                assert!(chunk.len() as u64 <= max_chunk);
                raw += chunk.len() as u64;
            }
            assert_eq!(covered + raw, head.wrapping_sub(tail));
        }
        Err(_) => assert!(!valid),
    }
    // Whatever happened, discarding resynchronises and the ring carries records again (from a head that
    // is 8-byte aligned, as the kernel's always is).
    ring.discard_pending().unwrap();
    if size >= 32 && head & 7 == 0 {
        let body = [0x5a; 8];
        assert!(matches!(
            kernel.output(9, 0, &body).unwrap(),
            SimOutput::Written { .. }
        ));
        let got = ring.next_with(|r| r.to_vec()).unwrap().unwrap();
        assert_eq!(&got[8..], &body);
    }
}

fn overwrite_ring(size: u64, head: u64, tail: u64, contents: &[u8]) {
    let mut config = SimConfig::new(size);
    config.data_mode = RingMode::Overwrite;
    let Sim {
        mut kernel,
        mut ring,
        ..
    } = Sim::new(config).unwrap();
    kernel.corrupt(&mut ring, 0, contents).unwrap();
    kernel.set_positions(&mut ring, head, tail).unwrap();
    let mut covered = 0u64;
    let mut copy = perf_core::BackwardCopy::new();
    // The kernel's head is always 8-byte aligned; an unaligned one is refused.
    if let Err(e) = ring.copy_backward(&mut copy) {
        assert!(
            head % 8 != 0 && matches!(e.kind(), perf_core::ErrorKind::RingHeadUnaligned { .. }),
            "{e}"
        );
        return;
    }
    for rec in copy.records() {
        let Ok(rec) = rec else { break };
        assert!(rec.len() >= 8 && rec.len() & 7 == 0);
        covered += rec.len() as u64;
    }
    assert!(covered <= size);
    // A second copy right after sees nothing new.
    ring.copy_backward(&mut copy).unwrap();
    assert_eq!(copy.records().count(), 0);
}

fn aux(size: u64, ops: &[u8]) {
    let overwrite = ops.first().is_some_and(|b| b & 1 == 1);
    let mut config = SimConfig::new(1 << 16);
    config.aux_size = size;
    config.aux_mode = if overwrite {
        RingMode::Overwrite
    } else {
        RingMode::Normal
    };
    let Sim {
        mut kernel,
        mut ring,
        aux,
        ..
    } = Sim::new(config).unwrap();
    let mut aux = aux.unwrap();
    let mut snap = Vec::new();
    let mut stream = Vec::new();
    let mut got = Vec::new();
    let mut snap_bytes = 0u64;
    for (i, op) in ops.iter().enumerate().skip(1) {
        let len = usize::from(op >> 1);
        let bytes: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        if op & 1 == 0 {
            if overwrite {
                kernel.aux_output_overwrite(&bytes).unwrap();
                stream.extend_from_slice(&bytes);
            } else {
                let out = kernel.aux_output(&bytes).unwrap();
                stream.extend_from_slice(&bytes[..out.written as usize]);
            }
        } else if overwrite {
            aux.copy_aux_snapshot(Some(u64::from(*op)), &mut snap).unwrap();
            assert!(snap.len() as u64 <= size.min(u64::from(*op)));
            let end = stream.len();
            let start = end - snap.len();
            assert_eq!(snap, stream[start..end]);
            snap_bytes += snap.len() as u64;
        } else {
            let mut batch = aux.batch().unwrap();
            while let Some(c) = batch.next_chunk(Some(u64::from(op >> 1) + 1)) {
                got.extend(c.to_vec());
            }
        }
        // Keep the data ring (AUX records) drained.
        let _ = ring.discard_pending();
    }
    if !overwrite {
        assert_eq!(got, stream[..got.len()]);
    }
    let _ = snap_bytes;
}
