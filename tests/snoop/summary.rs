//! -s and -i: the summary tables.

use super::*;

#[test]
fn summary_tables_count_ops_and_domains() {
    if !common::need_root("summary_tables_count_ops_and_domains") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let snoop = Snooper::attach(&shim, &["--summary"]);
    for i in 0..5 {
        shim.run("xenstore-write", &["/summary/a", &i.to_string()]);
    }
    assert!(!guest(&dom6, "xenstore-read", &["missing"]).status.success());
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let text = out.join("\n");
    let row = |first: &str| -> Vec<String> {
        out.iter()
            .map(|l| {
                l.split(['|', '│', '┆'])
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
            })
            .find(|cells| cells.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first}:\n{text}"))
    };
    assert_eq!(row("XS_WRITE")[1..3], ["5", "0"]);
    assert_eq!(row("6")[1..3], ["1", "1"], "dom 6: one read, one error");
    assert_eq!(row("/summary/a")[1], "5");
}

#[test]
fn summary_intervals_show_rates_in_ascii_when_piped() {
    if !common::need_root("summary_intervals_show_rates_in_ascii_when_piped") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--summary", "--interval", "0.5"]);
    common::pyxs(
        &shim.socket,
        "for i in range(50):\n    c.write(b'/rate/a', b'%d' % i)\nc.close()\n",
    );
    let head = snoop.wait_line("an interval with the writes", |l| {
        l.starts_with("last ") && !l.contains(": 0 requests")
    });
    // "last 0.5 s: 50 requests, 100.0/s; 50 in all" (or split over two)
    assert!(
        head.contains(" requests, ") && head.ends_with(" in all"),
        "{head}"
    );
    let header = snoop.wait_line("the op table's header", |l| l.contains("RATE(/s)"));
    assert!(
        header.starts_with("| OP ") || header.starts_with("| DOM "),
        "{header}"
    );
    let write = snoop.wait_line("the XS_WRITE row", |l| l.starts_with("| XS_WRITE "));
    let cells: Vec<&str> = write
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let rate: f64 = cells[2].parse().unwrap();
    assert!(rate > 0.0, "{write}");
    // A later quiet interval: the total stays, the rate drops to 0. (The
    // lines are searched from the first: an interval that ended before the
    // writes began is quiet too, with 0 in all; it is not this one.)
    let quiet = snoop.wait_line("a quiet interval after the writes", |l| {
        l.starts_with("last ") && l.contains(": 0 requests, 0.0/s;") && !l.ends_with("; 0 in all")
    });
    assert!(quiet.ends_with("; 50 in all"), "{quiet}");
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let all = out.join("\n");
    assert!(all.is_ascii(), "a pipe gets ASCII tables:\n{all}");
}
