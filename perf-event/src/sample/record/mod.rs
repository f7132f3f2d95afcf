//! Owned records: one type per `PERF_RECORD_*` kind, with the names of the `perf-event-open` crate.
//!
//! They are converted from perf-core's zero-copy parse ([`perf_core::Record`]); nothing here reads
//! ring bytes itself. `{:-?}` prints a record compactly: `Sample { record_id: .., period: 1, .. }`,
//! leaving out fields that are `None`.

mod compat;
mod contexts;
mod convert;
mod decoded;
mod types;

pub use super::iter::RawRecord;
pub use contexts::{CallChain, CallChains, Parts as CallChainParts};
pub use convert::Parser;
pub use decoded::*;
pub use types::*;
// perf-event-open 0.5's module per record kind.
pub use compat::{
    auxiliary, bpf, call_chain, cgroup, comm, ctx, itrace, ksymbol, lost, mmap, ns, read, sample,
    task, text_poke, throttle,
};

/// Writes `Name { a: .., b: .. }` for `{:-?}` (skipping `None` fields of kind `opt`, ending with `..`
/// when one was skipped), the `#[derive(Debug)]` form otherwise. Fields are `req name` or `opt name`.
macro_rules! debug {
    ($ty:ident { $($kind:ident $field:ident),* $(,)? }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                if f.sign_minus() {
                    let mut first = true;
                    let mut skipped = false;
                    write!(f, "{} {{ ", stringify!($ty))?;
                    $(
                        $crate::sample::record::debug!(@$kind self, f, first, skipped, $field);
                    )*
                    if skipped {
                        if !first {
                            write!(f, ", ")?;
                        }
                        write!(f, "..")?;
                    }
                    return write!(f, " }}");
                }
                let mut ds = f.debug_struct(stringify!($ty));
                $( ds.field(stringify!($field), &self.$field); )*
                ds.finish()
            }
        }
    };
    (@opt $self:ident, $f:ident, $first:ident, $skipped:ident, $field:ident) => {
        match &$self.$field {
            Some(v) => {
                if !$first {
                    write!($f, ", ")?;
                }
                $first = false;
                write!($f, "{}: {:-?}", stringify!($field), v)?;
            }
            None => $skipped = true,
        }
    };
    (@req $self:ident, $f:ident, $first:ident, $skipped:ident, $field:ident) => {
        if !$first {
            write!($f, ", ")?;
        }
        $first = false;
        write!($f, "{}: {:-?}", stringify!($field), &$self.$field)?;
    };
}
pub(crate) use debug;
