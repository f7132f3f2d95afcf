//! perf's modifier letters (`cycles:upp`, `{a,b}:S`), with perf's rules for how they combine.

/// The modifier state of one event, in perf's terms: what its own modifiers set, then what its
/// group's modifiers add on top.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModState {
    pub exclude_user: bool,
    pub exclude_kernel: bool,
    pub exclude_hv: bool,
    pub exclude_host: bool,
    pub exclude_guest: bool,
    /// `G` or `H` was given: guest/host exclusion is the user's choice, not perf's default.
    pub guest_host_set: bool,
    /// `u`, `k` or `h` was given at some point.
    pub privilege_set: bool,
    pub exclude_idle: bool,
    pub precise: u8,
    pub precise_max: bool,
    pub sample_read: bool,
    pub pinned: bool,
    pub exclusive: bool,
    pub weak: bool,
    pub bpf: bool,
}

impl ModState {
    /// An event written without modifiers: perf counts the host only by default
    /// (`exclude_guest`), a default it drops again when the PMU refuses it.
    pub(crate) const DEFAULT: Self = Self {
        exclude_user: false,
        exclude_kernel: false,
        exclude_hv: false,
        exclude_host: false,
        exclude_guest: true,
        guest_host_set: false,
        privilege_set: false,
        exclude_idle: false,
        precise: 0,
        precise_max: false,
        sample_read: false,
        pinned: false,
        exclusive: false,
        weak: false,
        bpf: false,
    };

    /// Applies modifier letters. An event's own modifiers start from nothing set (`fresh`); a
    /// group's modifiers continue from what each member already has. `leader` says whether `D`
    /// and `e` may apply (perf pins or makes exclusive only a group's leader).
    ///
    /// Returns the byte offset (within `letters`) of the first character that is no modifier, or
    /// of the modifiers when they ask for more than three `p`.
    pub(crate) fn apply(&mut self, letters: &str, fresh: bool, leader: bool) -> Result<(), usize> {
        let mut s = if fresh {
            Self {
                exclude_guest: false,
                ..Self::DEFAULT
            }
        } else {
            *self
        };
        // As perf: the first of u/k/h excludes every level, then each letter re-includes its own.
        let mut exclude = s.exclude_user || s.exclude_kernel || s.exclude_hv;
        let (mut pinned, mut exclusive) = (s.pinned, s.exclusive);
        for (i, c) in letters.char_indices() {
            match c {
                'u' | 'k' | 'h' => {
                    if !exclude {
                        exclude = true;
                        s.exclude_user = true;
                        s.exclude_kernel = true;
                        s.exclude_hv = true;
                    }
                    s.privilege_set = true;
                    match c {
                        'u' => {
                            // User-only counting excludes guests unless G/H said otherwise.
                            if !s.guest_host_set {
                                s.exclude_guest = true;
                            }
                            s.exclude_user = false;
                        }
                        'k' => s.exclude_kernel = false,
                        _ => s.exclude_hv = false,
                    }
                }
                'G' | 'H' => {
                    if !s.guest_host_set {
                        s.guest_host_set = true;
                        s.exclude_guest = true;
                        s.exclude_host = true;
                    }
                    if c == 'G' {
                        s.exclude_guest = false;
                    } else {
                        s.exclude_host = false;
                    }
                }
                'I' => s.exclude_idle = true,
                'p' => {
                    s.precise = s.precise.saturating_add(1);
                    if !s.guest_host_set {
                        s.exclude_guest = true;
                    }
                }
                'P' => s.precise_max = true,
                'S' => s.sample_read = true,
                'D' => pinned = true,
                'e' => exclusive = true,
                'W' => s.weak = true,
                'b' => s.bpf = true,
                _ => return Err(i),
            }
        }
        if s.precise > 3 {
            return Err(0);
        }
        if fresh || leader {
            s.pinned = pinned;
            s.exclusive = exclusive;
        }
        *self = s;
        Ok(())
    }

    /// The part the attr gets; `exclude_guest` without `G`/`H` is perf's default and stays out.
    pub(crate) fn to_modifiers(self) -> crate::event::Modifiers {
        crate::event::Modifiers {
            privilege_set: self.privilege_set,
            exclude_user: self.exclude_user,
            exclude_kernel: self.exclude_kernel,
            exclude_hv: self.exclude_hv,
            guest_host_set: self.guest_host_set,
            exclude_host: self.guest_host_set && self.exclude_host,
            exclude_guest: self.guest_host_set && self.exclude_guest,
            exclude_idle: self.exclude_idle,
            precise: self.precise,
            pinned: self.pinned,
            exclusive: self.exclusive,
            sample_read: self.sample_read,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(m: &str) -> ModState {
        let mut s = ModState::DEFAULT;
        s.apply(m, true, true).unwrap();
        s
    }

    #[test]
    fn letters_combine_as_in_perf() {
        let u = own("u");
        assert!(!u.exclude_user && u.exclude_kernel && u.exclude_hv && u.exclude_guest);
        let k = own("k");
        assert!(k.exclude_user && !k.exclude_kernel && !k.exclude_guest);
        let uk = own("uk");
        assert!(!uk.exclude_user && !uk.exclude_kernel && uk.exclude_hv);
        let gp = own("Gp");
        assert!(gp.exclude_host && !gp.exclude_guest && gp.precise == 1);
        let pg = own("pG");
        assert!(pg.exclude_host && !pg.exclude_guest);
        assert!(own("H").exclude_guest && !own("H").exclude_host);
        let gh = own("GH");
        assert!(!gh.exclude_guest && !gh.exclude_host);
        assert_eq!(own("ppp").precise, 3);
        let mut s = ModState::DEFAULT;
        assert_eq!(s.apply("pppp", true, true), Err(0));
        assert_eq!(s.apply("ux", true, true), Err(1));
    }

    #[test]
    fn group_modifiers_continue_from_the_members() {
        // {page-faults:k,minor-faults}:u
        let mut leader = own("k");
        leader.apply("u", false, true).unwrap();
        assert!(!leader.exclude_user && !leader.exclude_kernel && leader.exclude_hv);
        assert!(leader.exclude_guest);
        let mut member = ModState::DEFAULT;
        member.apply("u", false, false).unwrap();
        assert!(!member.exclude_user && member.exclude_kernel);
        // {task-clock:D,page-faults}:e: only the leader becomes exclusive.
        let mut l = own("D");
        l.apply("e", false, true).unwrap();
        assert!(l.pinned && l.exclusive);
        let mut m = ModState::DEFAULT;
        m.apply("e", false, false).unwrap();
        assert!(!m.exclusive && m.exclude_guest);
        // {task-clock:p,page-faults}:p
        let mut p = own("p");
        p.apply("p", false, true).unwrap();
        assert_eq!(p.precise, 2);
    }
}
