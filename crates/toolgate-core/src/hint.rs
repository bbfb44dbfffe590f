//! "Did you mean …?" for tool and argument names.
//!
//! Models misspell names in a few typical ways: another case or separator (`filePath` for
//! `file_path`), an extra or missing word (`file_path` for `path`), or a typo. Each is tried in
//! that order; the first that finds a single best candidate wins.

/// The candidate that `input` most plausibly meant, if any is close enough.
pub fn did_you_mean<'a, I>(input: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let candidates: Vec<&'a str> = candidates.into_iter().filter(|c| *c != input).collect();
    let folded = fold(input);

    // The same words in another spelling: case, `_`, `-`, `.`.
    if let Some(found) = candidates.iter().find(|c| fold(c) == folded) {
        return Some(found);
    }

    // One name's words contain the other's: `file_path` ↔ `path`, `max` ↔ `max_results`.
    let words = split_words(input);
    let mut best: Option<(&'a str, usize)> = None;
    for candidate in &candidates {
        let theirs = split_words(candidate);
        let shared = words
            .iter()
            .filter(|w| theirs.iter().any(|t| same_word(w, t)))
            .count();
        let contained = shared > 0 && (shared == words.len() || shared == theirs.len());
        if contained && best.is_none_or(|(_, score)| shared > score) {
            best = Some((candidate, shared));
        }
    }
    if let Some((found, _)) = best {
        return Some(found);
    }

    // A typo: small edit distance relative to the length.
    candidates
        .iter()
        .map(|c| (*c, strsim::damerau_levenshtein(&folded, &fold(c))))
        .filter(|(c, distance)| *distance <= (c.len().max(input.len()) / 3).max(1))
        .min_by_key(|(_, distance)| *distance)
        .map(|(c, _)| c)
}

/// The hint sentence for a suggestion.
pub fn hint_for(suggestion: Option<&str>) -> Option<String> {
    suggestion.map(|s| format!("did you mean `{s}`?"))
}

/// Equal, or one abbreviates the other (`dir` for `directory`).
fn same_word(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.len() >= 3 && long.starts_with(short))
}

fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Splits `fileName`, `file_name`, `file-name` and `file.name` into `["file", "name"]`.
fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, candidates: &[&str], expected: Option<&str>) {
        assert_eq!(
            did_you_mean(input, candidates.iter().copied()),
            expected,
            "{input} among {candidates:?}"
        );
    }

    #[test]
    fn suggestions() {
        let read = ["path", "offset", "limit"];
        check("file_path", &read, Some("path"));
        check("filePath", &read, Some("path"));
        check("Path", &read, Some("path"));
        check("ofset", &read, Some("offset"));
        check("lmit", &read, Some("limit"));
        check("banana", &read, None);
        check("path", &read, None);
        let tools = ["read_file", "list_dir", "search_text"];
        check("readFile", &tools, Some("read_file"));
        check("read", &tools, Some("read_file"));
        check("search", &tools, Some("search_text"));
        check("list_directory", &tools, Some("list_dir"));
        check("reed_file", &tools, Some("read_file"));
        check("delete_everything", &tools, None);
        let search = ["pattern", "path", "max_results", "case_sensitive"];
        check("max", &search, Some("max_results"));
        check("caseSensitive", &search, Some("case_sensitive"));
    }

    #[test]
    fn word_splitting() {
        assert_eq!(split_words("filePath"), ["file", "path"]);
        assert_eq!(split_words("file-path.x"), ["file", "path", "x"]);
        assert_eq!(split_words("HTTPServer"), ["httpserver"]);
        assert_eq!(split_words("__a"), ["a"]);
    }
}
