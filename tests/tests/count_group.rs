//! Groups: one read returns every member, equal to the members read alone.

use perf_event::config::{sibling, Cpu, Opts, Proc};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::sw::Software;
use tests::touch_pages;

fn user() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.stat_format.time_enabled = true;
    o.stat_format.time_running = true;
    o
}

fn sib() -> sibling::Opts {
    let mut o = sibling::Opts::default();
    o.exclude.kernel = true;
    o
}

#[test]
fn three_event_group_read_equals_members_read_alone() {
    let mut g = CounterGroup::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), user()).unwrap();
    let faults = g.add(Software::MinorPageFault, sib()).unwrap();
    // All three from the swevent PMU: on 6.18 a task-clock (hrtimer PMU) mixed into a group of
    // page-fault events left the fault members at 0 or partial counts.
    let minor = g.add(Software::MajorPageFault, sib()).unwrap();
    assert_eq!(g.len(), 3);
    g.enable().unwrap();
    touch_pages(25);
    g.disable().unwrap();
    let leader = g.leader().stat().unwrap();
    let (f, m) = (faults.stat().unwrap().count, minor.stat().unwrap().count);
    let ids = [
        g.leader().id().unwrap(),
        faults.id().unwrap(),
        minor.id().unwrap(),
    ];
    let s = g.stat().unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(s.count(0), Some(leader.count));
    assert_eq!(s.count(1), Some(f));
    assert_eq!(s.count(2), Some(m));
    assert_eq!((leader.count, f), (25, 25), "{leader:?}");
    assert_eq!(m, 0, "no major faults on fresh anonymous pages");
    for (i, id) in ids.into_iter().enumerate() {
        assert_eq!(s.get(i).unwrap().id, Some(id));
        assert_eq!(s.by_id(id).unwrap().count, s.count(i).unwrap());
    }
    assert_eq!(s.time_enabled(), s.time_running());
    assert_eq!(s.to_stat().siblings.len(), 2);
    assert_eq!(leader.siblings.len(), 2);
    assert_eq!(leader.siblings[0].count, 25);
}

#[test]
fn group_ioctls_act_on_every_member() {
    let mut g = CounterGroup::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), user()).unwrap();
    g.add(Software::MinorPageFault, sib()).unwrap();
    g.enable().unwrap();
    touch_pages(5);
    g.disable().unwrap();
    touch_pages(5);
    assert_eq!(
        g.stat()
            .unwrap()
            .iter()
            .map(|m| m.count)
            .collect::<Vec<_>>(),
        [5, 5]
    );
    g.reset().unwrap();
    assert_eq!(
        g.stat()
            .unwrap()
            .iter()
            .map(|m| m.count)
            .collect::<Vec<_>>(),
        [0, 0]
    );
}

#[test]
fn group_is_send_and_a_group_read_without_the_format_is_refused() {
    fn send<T: Send>(_: &T) {}
    let g = CounterGroup::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), user()).unwrap();
    send(&g);
    let mut plain = CounterGroup::from(
        Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), user()).unwrap(),
    );
    let e = plain.stat().unwrap_err();
    assert!(e.to_string().contains("stat_format.siblings"), "{e}");
}
