//! Shell-style wildcards (`*`, `?`, `[a-z]`, `[!x]`), as perf matches tracepoint and PMU names.

/// Whether `pattern` has a wildcard character.
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.bytes().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// Whether `name` matches `pattern` as a whole (`fnmatch(3)` without flags).
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    glob(pattern.as_bytes(), name.as_bytes())
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative matching with one backtrack point (the last `*`): linear in practice, never
    // exponential.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(&p[pi..], s[si]) {
                        if ok {
                            pi += next;
                            si += 1;
                            continue;
                        }
                    } else if s[si] == b'[' {
                        // An unclosed `[` is a literal.
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the bracket expression at the start of `p`; `(matched, its length)`, or
/// `None` when the bracket is not closed.
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let &b = p.get(i)?;
        if b == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&e| e != b']') {
            let e = p[i + 2];
            hit |= b <= c && c <= e;
            i += 3;
        } else {
            hit |= b == c;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches("sched_*", "sched_switch"));
        assert!(matches("*wake*", "sched_wakeup_new"));
        assert!(!matches("*wake*", "sched_switch"));
        assert!(matches("cpu_?ore", "cpu_core"));
        assert!(matches("cpu_[ac]*", "cpu_atom"));
        assert!(!matches("cpu_[!ac]*", "cpu_atom"));
        assert!(matches("a[0-9]b", "a7b"));
        assert!(matches("*", ""));
        assert!(!matches("?", ""));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("[]]", "]"));
        assert!(matches("x[", "x["));
        assert!(is_glob("cpu*") && !is_glob("cpu_core"));
    }
}
