//! Report prose lives in `report/*.md`, with `{name}` where a figure of the
//! run goes: the words can be read and changed without reading Rust.

/// `template` with each `{name}` replaced by its value. A placeholder left
/// unfilled is a bug in the caller, caught by every test that renders.
pub fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut s = template.to_string();
    for (name, value) in values {
        s = s.replace(&format!("{{{name}}}"), value);
    }
    debug_assert!(!has_placeholder(&s), "unfilled placeholder in:\n{s}");
    s
}

/// A template's paragraphs: a line and the clauses it may take, each
/// filled on its own.
pub fn paragraphs(text: &str) -> Vec<&str> {
    text.trim_end().split("\n\n").collect()
}

/// A template of tables: the text before the first table's heading, then
/// each table's heading line and the caption under it, in order.
pub fn tables(text: &str) -> (&str, Vec<(&str, &str)>) {
    let Some(at) = text.find("\n\n#") else {
        return (text, Vec::new());
    };
    let blocks = paragraphs(&text[at + 2..]);
    let tables = blocks
        .chunks(2)
        .map(|b| (b[0], b.get(1).copied().unwrap_or("")));
    (&text[..at], tables.collect())
}

fn has_placeholder(s: &str) -> bool {
    s.match_indices('{').any(|(i, _)| {
        let rest = &s[i + 1..];
        let end = rest.find('}').unwrap_or(0);
        end > 0
            && rest[..end]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_every_placeholder() {
        assert_eq!(
            fill("a {x} b {y_z}", &[("x", "1".into()), ("y_z", "2".into())]),
            "a 1 b 2"
        );
    }

    #[test]
    fn tables_are_headings_and_their_captions() {
        let (intro, tables) = tables("## S\n\nintro\n\n### a\n\nabout a\n\n### b\n\nabout b\n");
        assert_eq!(intro, "## S\n\nintro");
        assert_eq!(tables, [("### a", "about a"), ("### b", "about b")]);
    }

    #[test]
    #[should_panic(expected = "unfilled placeholder")]
    fn an_unfilled_placeholder_is_a_bug() {
        fill("a {x} b {y}", &[("x", "1".into())]);
    }
}
