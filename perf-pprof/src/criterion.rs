//! criterion 0.5's `Profiler` ([`criterion::profiler::Profiler`]): profiles each benchmark while
//! criterion runs it with `--profile-time`, writing `flamegraph.svg` or `profile.pb` into the
//! benchmark's folder under `target/criterion/`.
//!
//! ```ignore
//! use criterion::{criterion_group, criterion_main, Criterion};
//! use pprof::criterion::{Output, PProfProfiler};
//!
//! criterion_group! {
//!     name = benches;
//!     config = Criterion::default().with_profiler(PProfProfiler::new(100, Output::Flamegraph(None)));
//!     targets = bench
//! }
//! ```

use std::marker::PhantomData;
use std::os::raw::c_int;
use std::path::Path;

use criterion::profiler::Profiler;

#[cfg(feature = "flamegraph")]
use crate::flamegraph::Options as FlamegraphOptions;
use crate::ProfilerGuard;

/// What [`PProfProfiler`] writes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Output<'a> {
    /// `flamegraph.svg`, drawn with these options or inferno's defaults (feature `flamegraph`).
    #[cfg(feature = "flamegraph")]
    Flamegraph(Option<FlamegraphOptions<'a>>),
    /// `profile.pb`, the uncompressed `profile.proto` of [`Report::pprof`](crate::Report::pprof)
    /// (feature `prost-codec` or `protobuf-codec`).
    #[cfg(feature = "_protobuf")]
    Protobuf,
    /// Holds the lifetime parameter; not for use.
    #[deprecated(
        note = "This branch is used to include lifetime parameter. Don't use it directly."
    )]
    _Phantom(PhantomData<&'a ()>),
}

/// A criterion profiler that samples the benchmark with a [`ProfilerGuard`].
#[derive(Debug)]
pub struct PProfProfiler<'a, 'b> {
    frequency: c_int,
    output: Output<'b>,
    active_profiler: Option<ProfilerGuard<'a>>,
}

impl<'b> PProfProfiler<'_, 'b> {
    /// Samples at `frequency` Hz and writes `output`.
    pub fn new(frequency: c_int, output: Output<'b>) -> Self {
        Self {
            frequency,
            output,
            active_profiler: None,
        }
    }
}

impl Profiler for PProfProfiler<'_, '_> {
    fn start_profiling(&mut self, benchmark_id: &str, _benchmark_dir: &Path) {
        match ProfilerGuard::new(self.frequency) {
            Ok(g) => self.active_profiler = Some(g),
            // criterion's trait has no way to fail: say why and let the benchmark run unprofiled.
            Err(e) => eprintln!("pprof: not profiling {benchmark_id}: {e}"),
        }
    }

    fn stop_profiling(&mut self, benchmark_id: &str, benchmark_dir: &Path) {
        let Some(guard) = self.active_profiler.take() else {
            return;
        };
        if let Err(e) = write(&guard, &mut self.output, benchmark_dir) {
            eprintln!("pprof: the profile of {benchmark_id}: {e}");
        }
    }
}

#[allow(unused_variables)]
fn write(guard: &ProfilerGuard<'_>, output: &mut Output<'_>, dir: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(dir)?;
    let report = guard.report().build()?;
    match output {
        #[cfg(feature = "flamegraph")]
        Output::Flamegraph(options) => {
            let file = std::fs::File::create(dir.join("flamegraph.svg"))?;
            let mut default = FlamegraphOptions::default();
            report.flamegraph_with_options(file, options.as_mut().unwrap_or(&mut default))
        }
        #[cfg(feature = "_protobuf")]
        Output::Protobuf => {
            let content = prost::Message::encode_to_vec(&report.pprof()?);
            std::fs::write(dir.join("profile.pb"), content)?;
            Ok(())
        }
        #[allow(deprecated)]
        Output::_Phantom(_) => Ok(()),
    }
}
