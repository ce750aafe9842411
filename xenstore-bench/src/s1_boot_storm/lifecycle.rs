//! The guest lifecycle S1 replays: tests/data/xl-lifecycle.txt (what
//! `xl create`, the guest's kernel, dom0's backends and xl's reaping sent
//! C xenstored in the real-Xen test), parsed into requests with the
//! domain's id, uuid and name left as variables.

use anyhow::{bail, Context, Result};
use xenstore_proto::wire::{msg_type_by_name, MsgType};

const TRACE: &str = include_str!("../../../tests/data/xl-lifecycle.txt");

/// Which client sent a request (each replays over a connection of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    /// xl create, then xl's monitor reaping the domain (dom0).
    Xl,
    /// dom0's kernel backends, hotplug scripts, xenconsoled (dom0).
    Backend,
    /// The domain's own kernel, over its ring.
    Guest,
}

/// One request of the trace.
#[derive(Clone, Debug)]
pub struct Step {
    pub actor: Actor,
    pub ty: MsgType,
    /// The NUL-separated fields; a WRITE's last is its value, sent
    /// without a NUL.
    fields: Vec<String>,
}

/// The domain a replay stands for: what the trace's variables become.
pub struct Vars {
    pub domid: u16,
    pub uuid: String,
    pub name: String,
}

impl Vars {
    pub fn new(domid: u16) -> Vars {
        Vars {
            domid,
            uuid: format!("00000000-0000-4000-8000-{domid:012x}"),
            name: format!("guest{domid}"),
        }
    }

    fn expand(&self, s: &str) -> String {
        s.replace("$DOMID", &self.domid.to_string())
            .replace("$UUID", &self.uuid)
            .replace("$NAME", &self.name)
    }
}

impl Step {
    /// Whether the request runs inside its connection's open transaction
    /// (the others ignore a transaction id).
    pub fn transactional(&self) -> bool {
        matches!(
            self.ty,
            MsgType::Read
                | MsgType::Write
                | MsgType::Mkdir
                | MsgType::Rm
                | MsgType::Directory
                | MsgType::SetPerms
                | MsgType::GetPerms
        )
    }

    /// A TRANSACTION_END that commits (not aborts).
    pub fn commits(&self) -> bool {
        self.fields.first().is_some_and(|f| f == "T")
    }

    /// The request's first field (its path, for most types), expanded.
    pub fn path(&self, vars: &Vars) -> String {
        self.fields
            .first()
            .map_or(String::new(), |f| vars.expand(f))
    }

    /// The request's payload for `vars`' domain.
    pub fn payload(&self, vars: &Vars) -> Vec<u8> {
        let fields: Vec<String> = self.fields.iter().map(|f| vars.expand(f)).collect();
        let mut p = fields.join("\0").into_bytes();
        if self.ty != MsgType::Write || fields.is_empty() {
            p.push(0);
        }
        p
    }
}

/// The whole life: `create` runs until the guest is up and idle, `destroy`
/// from its power-off to the end.
pub struct Lifecycle {
    pub create: Vec<Step>,
    pub destroy: Vec<Step>,
}

impl Lifecycle {
    /// The transactions a whole life commits.
    pub fn commits(&self) -> usize {
        let all = self.create.iter().chain(&self.destroy);
        all.filter(|s| s.ty == MsgType::TransactionEnd && s.commits())
            .count()
    }
}

/// The committed trace.
pub fn load() -> Result<Lifecycle> {
    parse(TRACE).context("tests/data/xl-lifecycle.txt")
}

pub fn parse(text: &str) -> Result<Lifecycle> {
    let mut parts = [Vec::new(), Vec::new()];
    let mut part = 0;
    for (n, line) in text.lines().enumerate() {
        if line == "# destroy" {
            part = 1;
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let step = parse_step(line).with_context(|| format!("line {}: {line}", n + 1))?;
            parts[part].push(step);
        }
    }
    let [create, destroy] = parts;
    if create.is_empty() || destroy.is_empty() {
        bail!("no create or no destroy part (the `# destroy` line)");
    }
    Ok(Lifecycle { create, destroy })
}

fn parse_step(line: &str) -> Result<Step> {
    let mut words = line.splitn(3, ' ');
    let actor = match words.next() {
        Some("xl") => Actor::Xl,
        Some("backend") => Actor::Backend,
        Some("guest") => Actor::Guest,
        other => bail!("unknown actor {other:?}"),
    };
    let name = words.next().context("no request type")?;
    let ty = msg_type_by_name(name)
        .and_then(MsgType::from_u32)
        .with_context(|| format!("unknown request type {name}"))?;
    let rest = words.next().unwrap_or("");
    let fields = match ty {
        // path, then the value: the rest of the line, spaces and all
        MsgType::Write => {
            let (path, value) = rest.split_once(' ').unwrap_or((rest, ""));
            vec![path.to_string(), value.to_string()]
        }
        _ if rest.is_empty() => Vec::new(),
        _ => rest.split(' ').map(str::to_string).collect(),
    };
    if ty != MsgType::TransactionStart && fields.is_empty() {
        bail!("{name} without arguments");
    }
    Ok(Step { actor, ty, fields })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_trace_parses_with_every_actor_in_both_parts() {
        let l = load().unwrap();
        for a in [Actor::Xl, Actor::Backend, Actor::Guest] {
            assert!(l.create.iter().any(|s| s.actor == a), "{a:?} in create");
        }
        assert!(l.destroy.iter().any(|s| s.actor == Actor::Xl));
        assert!(l.create.iter().any(|s| s.ty == MsgType::Introduce));
    }

    #[test]
    fn payloads_expand_the_domain_and_keep_a_write_value_whole() {
        let l = parse("xl WRITE /vm/$UUID/image/cmdline console=hvc0 loglevel=3\n# destroy\nxl SET_PERMS /local/domain/$DOMID n0 r$DOMID\n").unwrap();
        let v = Vars::new(7);
        assert_eq!(
            l.create[0].payload(&v),
            b"/vm/00000000-0000-4000-8000-000000000007/image/cmdline\0console=hvc0 loglevel=3"
        );
        assert_eq!(l.destroy[0].payload(&v), b"/local/domain/7\0n0\0r7\0");
        assert!(parse("xl FROB /x\n# destroy\nxl READ /x\n").is_err());
    }
}
