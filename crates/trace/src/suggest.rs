//! "Did you mean ...?" for names and keys that match nothing: one helper for
//! config keys, TOML tables, tenant, account and GPU type names.

/// Edit distance (insertions, deletions, substitutions, and swaps of two
/// neighbouring characters) between `a` and `b`, compared case-insensitively;
/// `O(len(a) * len(b))` time, `O(len(b))` memory.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().flat_map(char::to_lowercase).collect();
    let b: Vec<char> = b.chars().flat_map(char::to_lowercase).collect();
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (previous[j - 1] + cost).min(previous[j] + 1).min(row[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut row);
    }
    previous[b.len()]
}

/// Longest name compared: past this, a name is a typo of nothing we could guess,
/// and the quadratic distance stays cheap.
const MAX_COMPARED_CHARS: usize = 128;

/// The candidate closest to `given`, if close enough to be a likely typo: at
/// most a third of the longer name's characters differ (at least one), or one
/// contains the other and the shorter has at least 4 characters (`6214e9` for
/// `vc-6214e9`). Ties go to the longer common prefix, then the first candidate.
pub fn did_you_mean<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if given.is_empty() || given.len() > MAX_COMPARED_CHARS {
        return None;
    }
    let lower = given.to_lowercase();
    let mut best: Option<((usize, std::cmp::Reverse<usize>), &str)> = None;
    for candidate in candidates {
        if candidate.is_empty() || candidate.len() > MAX_COMPARED_CHARS || candidate == given {
            continue;
        }
        let other = candidate.to_lowercase();
        let contained =
            lower.len().min(other.len()) >= 4 && (lower.contains(&other) || other.contains(&lower));
        let distance = if contained {
            1
        } else {
            let limit = (given.chars().count().max(candidate.chars().count()) / 3).max(1);
            let d = edit_distance(given, candidate);
            if d > limit {
                continue;
            }
            d
        };
        let prefix = lower.chars().zip(other.chars()).take_while(|(a, b)| a == b).count();
        let score = (distance, std::cmp::Reverse(prefix));
        if best.is_none_or(|(b, _)| score < b) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, name)| name)
}

/// `" (did you mean `x`?)"`, or `""` when nothing is close.
pub fn suggestion<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(given, candidates).map_or(String::new(), |name| format!(" (did you mean `{name}`?)"))
}

/// Renders a TOML parse or shape error as `FILE line N: message (did you mean ...)`:
/// the line from the error's span, and for an unknown key a suggestion among the
/// keys serde expected.
pub fn toml_error(text: &str, file: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    let location = match error.span() {
        Some(span) => {
            let line = text.get(..span.start).unwrap_or(text).matches('\n').count() + 1;
            format!("{file} line {line}")
        }
        None => file.to_string(),
    };
    format!("{location}: {message}{}", unknown_field_suggestion(message))
}

/// For serde's "unknown field `x`, expected `a` or `b`" (and "unknown variant"):
/// the suggestion among the expected names.
fn unknown_field_suggestion(message: &str) -> String {
    let Some(rest) =
        message.strip_prefix("unknown field `").or_else(|| message.strip_prefix("unknown variant `"))
    else {
        return String::new();
    };
    let Some((given, expected)) = rest.split_once('`') else { return String::new() };
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    suggestion(given, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("account", "acount"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("GPU", "gpu"), 0);
        assert_eq!(edit_distance("alpah", "alpha"), 1, "a swap is one edit");
    }

    #[test]
    fn suggestions_are_close_names_only() {
        assert_eq!(did_you_mean("acount", ["account", "queue"]), Some("account"));
        assert_eq!(did_you_mean("vc-6214e9", ["6214e9", "b436b2"]), Some("6214e9"));
        assert_eq!(did_you_mean("V100", ["gpu", "v100"]), Some("v100"));
        assert_eq!(did_you_mean("zzzz", ["account", "queue"]), None);
        assert_eq!(suggestion("quue", ["account", "queue"]), " (did you mean `queue`?)");
        assert_eq!(suggestion("x", ["account"]), "");
    }

    #[test]
    fn toml_errors_name_the_line_and_suggest() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct T {
            account: Option<Vec<toml::Table>>,
            queue: Option<Vec<toml::Table>>,
        }
        let text = "# comment\n\n[[acount]]\nname = \"a\"\n";
        let error = toml::from_str::<T>(text).unwrap_err();
        let rendered = toml_error(text, "t.toml", &error);
        assert!(rendered.starts_with("t.toml line 3: unknown field `acount`"), "{rendered}");
        assert!(rendered.ends_with("(did you mean `account`?)"), "{rendered}");
    }
}
