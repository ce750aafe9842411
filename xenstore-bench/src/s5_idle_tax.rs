//! S5 idle tax: write+read pairs no watch covers, beside N idle dom0
//! connections (then also N idle domains on rings) holding 15 watches each.

use crate::idle_hosts::report::{goal, hosts_text, no_domains, table, WHOM};
use crate::idle_hosts::{self, Scenario};
use crate::scale::{Part, Scale};
use crate::template::fill;

pub fn section(s: &Scale) -> Part {
    let [sockets, domains] = [false, true]
        .map(|with_domains| idle_hosts::run(&s.idle_plan(with_domains, Scenario::IdleTax)));
    let mut text = fill(
        include_str!("../report/s5-idle-tax.md"),
        &[("hosts", hosts_text(&sockets, &domains, "s5-idle-tax"))],
    );
    let mut goals = Vec::new();
    for (r, whom) in [&sockets, &domains].into_iter().zip(WHOM) {
        text += &format!("\n### {whom}\n\n");
        text += &table(r, |p| p.idle_tax, true);
        if let Some((line, row)) = goal(r, |p| p.idle_tax, &format!("S5 idle tax, {whom}")) {
            text += &line;
            goals.push(row);
        }
        text += &no_domains(r);
    }
    let outcomes = [&sockets, &domains]
        .into_iter()
        .flat_map(|r| r.failures())
        .collect::<Vec<_>>();
    Part {
        text: text + "\n",
        failures: outcomes,
        goals,
        limits: Vec::new(),
    }
}
