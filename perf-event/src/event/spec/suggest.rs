//! "Did you mean": the known names nearest to a misspelt one, by edit distance.

/// Edit distance with adjacent transpositions (optimal string alignment, a restricted
/// Damerau-Levenshtein): insertions, deletions, substitutions and swaps of two neighbours cost 1
/// each. Compared case-insensitively, by characters.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().flat_map(char::to_lowercase).collect();
    let b: Vec<char> = b.chars().flat_map(char::to_lowercase).collect();
    let w = b.len() + 1;
    // Rows i-2, i-1 and i of the table, each `w` long.
    let mut rows = vec![0usize; 3 * w];
    for (j, cell) in rows[2 * w..].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows.rotate_left(w);
        let (older, rest) = rows.split_at_mut(w);
        let (prev, cur) = rest.split_at_mut(w);
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(older[j - 2] + 1);
            }
            cur[j] = d;
        }
    }
    rows[2 * w + b.len()]
}

/// The candidates nearest to `word` (at most three, the closest first, then by name), within a
/// distance that grows with the word's length: 1 up to 5 characters, 2 up to 9, then 3.
pub(crate) fn nearest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let len = word.chars().count();
    let limit = match len {
        0..=5 => 1,
        6..=9 => 2,
        _ => 3,
    };
    let mut hits: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| *c != word)
        // Lengths further apart than the limit cannot be within it.
        .filter(|c| c.chars().count().abs_diff(len) <= limit)
        .map(|c| (distance(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .collect();
    hits.sort_unstable();
    hits.dedup_by(|a, b| a.1 == b.1);
    if let Some(&(best, _)) = hits.first() {
        // Only the closest ones: a distance-1 match makes the distance-3 ones noise.
        hits.retain(|&(d, _)| d == best);
    }
    hits.into_iter().take(3).map(|(_, c)| c).collect()
}

/// `"; did you mean 'a'?"` or `"; did you mean 'a' or 'b'?"`, or nothing without a near name.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    let hits = nearest(word, candidates);
    match hits.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean '{one}'?"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(|s| format!("'{s}'")).collect();
            format!("; did you mean {} or '{last}'?", rest.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("page-fautls", "page-faults"), 1); // a swap
        assert_eq!(distance("sched_swich", "sched_switch"), 1); // a missing letter
        assert_eq!(distance("task_clock", "task-clock"), 1);
        assert_eq!(distance("cycels", "cycles"), 1);
        assert_eq!(distance("CYCLES", "cycles"), 0);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("ca", "abc"), 3); // OSA, not the unrestricted 2
    }

    #[test]
    fn nearest_names() {
        let names = [
            "page-faults",
            "major-faults",
            "minor-faults",
            "task-clock",
            "cpu-clock",
        ];
        assert_eq!(nearest("page-fautls", names), ["page-faults"]);
        assert_eq!(nearest("task_clock", names), ["task-clock"]);
        assert!(nearest("completely-different", names).is_empty());
        // Short words allow one edit only.
        assert!(nearest("xyz", ["abc"]).is_empty());
        assert_eq!(
            did_you_mean("mior-faults", names),
            "; did you mean 'minor-faults'?"
        );
        assert_eq!(
            did_you_mean("abcd", ["abce", "abcf", "zzzz"]),
            "; did you mean 'abce' or 'abcf'?"
        );
        assert_eq!(did_you_mean("page-faults", names), "");
    }
}
