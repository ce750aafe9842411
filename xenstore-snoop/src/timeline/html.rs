//! The timeline as one self-contained HTML page: the trace events inline,
//! drawn as SVG swimlanes by the page's own script (no network, no
//! external assets).

use serde_json::Value;

const PAGE: &str = include_str!("page.html");

/// The page drawing `trace` (what `Timeline::trace_events` built).
pub fn page(trace: &Value) -> String {
    // `<` only occurs inside JSON strings, where \u003c means the same:
    // no `</script>` in a value can end the script element.
    let json = trace.to_string().replace('<', "\\u003c");
    PAGE.replacen("/*TRACE*/", &json, 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_cannot_close_the_script() {
        let trace = serde_json::json!({"traceEvents": [{"args": {"line": "</script><b>"}}]});
        let page = super::page(&trace);
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(page.contains(r"\u003c/script>\u003cb>"));
        assert!(!page.contains("/*TRACE*/"));
        // Nothing fetched: no external scripts, styles, images or fonts.
        for fetch in [" src=", " href=", "@import", "url(http"] {
            assert!(!page.contains(fetch), "{fetch}");
        }
    }
}
