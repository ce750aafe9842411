//! The documented ways C xenstored 4.20 answers a request other than 4.17
//! (DIFFERENCES.md, "C xenstored 4.20 against 4.17"), recognised in live
//! sessions that no case file pins: the random sessions hold the shim to
//! each release under these rules only, the shim answering as 4.17 in
//! some of them and as 4.20 in the others.

use super::case::{Action, Step};

/// Why the shim's answer to `step` may differ from C xenstored 4.17's,
/// where the shim follows 4.20; None for any other difference.
pub fn xen417_difference(step: &Step, xen417: &[String], shim: &[String]) -> Option<&'static str> {
    match &step.action {
        Action::Send { ty: 5, .. } if is_error(xen417, "ENOENT") && is_error(shim, "EINVAL") => {
            Some("EINVAL for UNWATCH of an invalid path, as 4.20")
        }
        Action::Send { ty: 3, payload, .. }
            if payload.starts_with(b"@")
                && is_error(xen417, "EINVAL")
                && shim.len() == 1
                && shim[0].starts_with("GET_PERMS ") =>
        {
            Some("GET_PERMS of a special node, as 4.20")
        }
        _ => None,
    }
}

/// Where the shim follows 4.17, in one session against 4.20: also what
/// 4.20's earlier documented differences go on to change in its later
/// answers.
pub struct Xen420 {
    /// How much higher 4.20's DIRECTORY_PART generations may be: 2 from
    /// its start, and one more for each SET_PERMS of a special node made
    /// before the node's last change (both daemons accept it; only 4.20
    /// keeps the permissions, a change that takes a generation).
    max_generation_offset: u64,
    /// Special nodes whose permissions 4.20 changed: each change fires
    /// their watches, which 4.17 never does.
    special_changes: Vec<String>,
    /// Domains that own a special node: 4.20 segfaults releasing one.
    special_owners: Vec<String>,
    /// 4.20 crashed so: every later answer is a closed connection.
    crashed: bool,
}

impl Xen420 {
    pub fn new() -> Xen420 {
        Xen420 {
            max_generation_offset: 2,
            special_changes: Vec::new(),
            special_owners: Vec::new(),
            crashed: false,
        }
    }

    /// Follows 4.20's answer to `step`, whether or not the shim agrees.
    pub fn observe(&mut self, step: &Step, xen420: &[String]) {
        let Action::Send { ty, payload, .. } = &step.action else {
            return;
        };
        let args: Vec<String> = payload
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let answered = |what: &str| xen420.iter().any(|m| m.starts_with(what));
        match *ty {
            14 if args[0].starts_with('@') && answered("SET_PERMS ") => {
                self.max_generation_offset += 1;
                self.special_changes.push(args[0].clone());
                // The first permission names the owner: "r1" -> "1".
                if let Some(owner) = args.get(1).filter(|p| p.len() > 1) {
                    self.special_owners.push(owner[1..].to_string());
                }
            }
            9 if self.special_owners.contains(&args[0]) && dead(xen420) => self.crashed = true,
            _ => {}
        }
    }

    /// Why the shim's answer to `step` may differ from C xenstored 4.20's,
    /// if it is one of the documented differences; None for any other.
    pub fn difference(
        &mut self,
        step: &Step,
        xen420: &[String],
        shim: &[String],
    ) -> Option<&'static str> {
        if self.crashed && dead(xen420) {
            return Some("4.20 segfaulted releasing the owner of a special node");
        }
        if self.without_special_events(xen420) == shim {
            return Some("watch event of a special node whose permissions changed");
        }
        // DIRECTORY_PART: the same names, a higher generation.
        let Action::Send { ty: 22, .. } = &step.action else {
            return None;
        };
        let (rest_420, gen_420) = generation(xen420)?;
        let (rest_shim, gen_shim) = generation(shim)?;
        let offset = gen_420.checked_sub(gen_shim)?;
        (rest_420 == rest_shim && (2..=self.max_generation_offset).contains(&offset))
            .then_some("DIRECTORY_PART generation higher")
    }

    /// 4.20's messages without watch events of special nodes it changed.
    fn without_special_events(&self, xen420: &[String]) -> Vec<String> {
        xen420
            .iter()
            .filter(|m| {
                !self
                    .special_changes
                    .iter()
                    .any(|p| m.starts_with(&format!("WATCH_EVENT req=0 tx=0 \"{p}\\0")))
            })
            .cloned()
            .collect()
    }
}

/// Only a closed connection (and the daemon's death) where a reply was due.
fn dead(msgs: &[String]) -> bool {
    !msgs.is_empty() && msgs.iter().all(|m| m == "closed" || m.ends_with(" died"))
}

fn is_error(msgs: &[String], errno: &str) -> bool {
    msgs.len() == 1
        && msgs[0].starts_with("ERROR ")
        && msgs[0].ends_with(&format!("\"{errno}\\0\""))
}

/// A lone DIRECTORY_PART reply split into (everything but the
/// generation, the generation).
fn generation(msgs: &[String]) -> Option<(String, u64)> {
    let [msg] = msgs else { return None };
    let (head, body) = msg.split_once('"')?;
    if !head.starts_with("DIRECTORY_PART ") {
        return None;
    }
    let digits = body.len() - body.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let generation = body[..digits].parse().ok()?;
    Some((format!("{head}\"{}", &body[digits..]), generation))
}
