//! perf-event-open 0.5.1's public API resolves in `perf_event` with the same shapes: every line of
//! `dropin_peo_0_5/items.txt` (paths, fields, variants, methods with their signatures, trait
//! impls) has a never-run check in `dropin_peo_0_5/checks.rs`, compiled here twice: against
//! perf-event-open 0.5.1 itself (so a check is known to describe 0.5.1) and against `perf_event`.
//! A missing or reshaped item fails to compile. Both files come from 0.5.1's rustdoc JSON:
//! `cargo xtask dropin` regenerates them, `cargo xtask dropin --check` says whether they are stale.
//!
//! Items that differ on purpose are listed (with the reason) in xtask/src/dropin.rs `DIFFERENCES`
//! and in the crate docs' "Migrating from perf-event-open" section; their checks are commented out.

/// The checks against perf-event-open 0.5.1 itself.
#[allow(dead_code, unused_variables, unused_imports, clippy::all)]
mod peo {
    use ::perf_event_open as krate;
    include!("dropin_peo_0_5/checks.rs");
}

/// The same checks against `perf_event`: 0.5.1's deprecated spellings are aliases here.
#[allow(dead_code, unused_variables, unused_imports, deprecated, clippy::all)]
mod ours {
    use ::perf_event as krate;
    include!("dropin_peo_0_5/checks.rs");
}

/// What 0.5.1's doc examples take from its dev-dependencies (tokio-test, aya, uuid), reduced to the
/// calls they make: our crate is what the examples test, not these.
mod dev_dependencies {
    pub mod tokio_test {
        pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
            futures::executor::block_on(f)
        }
    }
    pub mod aya {
        pub struct Ebpf;
        impl Ebpf {
            pub fn load_file(_path: &str) -> std::io::Result<Ebpf> {
                Ok(Ebpf)
            }
        }
    }
    pub mod uuid {
        pub struct Uuid;
        impl Uuid {
            pub fn new_v4() -> u128 {
                std::time::UNIX_EPOCH
                    .elapsed()
                    .unwrap_or_default()
                    .as_nanos()
            }
        }
    }
}

/// 0.5.1's 25 doc examples (`dropin_peo_0_5/doc_examples.rs`, from its rustdoc JSON), compiled as
/// written against 0.5.1 and against `perf_event`; none runs (the feature gates on `linux-6.19` in
/// some are off here, which only makes them return early).
// 0.5.1's code as written: its warnings are not ours to fix.
#[allow(warnings, clippy::all, clippy::undocumented_unsafe_blocks)]
mod peo_doc_examples {
    use super::dev_dependencies::{aya, tokio_test, uuid};
    use ::perf_event_open as krate;
    include!("dropin_peo_0_5/doc_examples.rs");
}

/// The same examples against `perf_event`.
#[allow(warnings, clippy::all, clippy::undocumented_unsafe_blocks)]
mod ours_doc_examples {
    use super::dev_dependencies::{aya, tokio_test, uuid};
    use ::perf_event as krate;
    include!("dropin_peo_0_5/doc_examples.rs");
}

const ITEMS: &str = include_str!("dropin_peo_0_5/items.txt");
const CHECKS: &str = include_str!("dropin_peo_0_5/checks.rs");

/// The list and the checks were generated together: each item has its check, in order.
#[test]
fn every_item_has_its_check() {
    let items: Vec<&str> = ITEMS.lines().filter(|l| !l.starts_with('#')).collect();
    let checked: Vec<&str> = CHECKS
        .lines()
        .filter_map(|l| l.strip_prefix("// "))
        .filter(|l| {
            !l.starts_with("Generated")
                && !l.starts_with("items.txt")
                && !l.starts_with("DIFFERENCE:")
        })
        .filter(|l| items.binary_search(l).is_ok())
        .collect();
    assert!(
        items.len() > 2000,
        "{} items: the list is incomplete",
        items.len()
    );
    assert!(
        items.windows(2).all(|w| w[0] < w[1]),
        "items.txt is not sorted and unique"
    );
    assert_eq!(
        items, checked,
        "items.txt and checks.rs disagree: run `cargo xtask dropin`"
    );
    println!("{} items of perf-event-open 0.5.1 checked", items.len());
}
