//! A node of the tree: its value, permissions, children and generation,
//! owned while being edited ([`Node`]) or borrowed from wherever a tree
//! keeps it ([`NodeRef`]).

use crate::store::children::Children;
use crate::store::listing::find_child;
use crate::store::perms::{Perm, Perms};

/// A node being edited: what tree operations build and `Tree::put` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub value: Vec<u8>,
    pub perms: Perms,
    /// Child names, each NUL-terminated, in creation order (the DIRECTORY
    /// reply as is; DIRECTORY_PART offsets index into it).
    pub children: Vec<u8>,
    pub generation: u64,
}

/// A node as a tree holds it, borrowed: what `Tree::get` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeRef<'a> {
    pub value: &'a [u8],
    pub perms: &'a [Perm],
    pub children: Children<'a>,
    pub generation: u64,
}

/// C xenstored's record header (generation, num_perms, datalen, childlen,
/// padded) counts towards the node-size quota like the rest of the record.
const RECORD_HEADER: usize = 24;
const RECORD_PERM: usize = 8;

impl Node {
    pub fn new(value: &[u8], perms: Perms) -> Node {
        Node {
            value: value.to_vec(),
            perms,
            children: Vec::new(),
            generation: 0,
        }
    }

    pub fn view(&self) -> NodeRef<'_> {
        NodeRef {
            value: &self.value,
            perms: &self.perms,
            children: Children::Flat(&self.children),
            generation: self.generation,
        }
    }

    pub fn add_child(&mut self, name: &str) {
        self.children.extend_from_slice(name.as_bytes());
        self.children.push(0);
    }

    pub fn remove_child(&mut self, name: &str) {
        if let Some(at) = find_child(&self.children, name) {
            self.children.drain(at..at + name.len() + 1);
        }
    }
}

impl<'a> NodeRef<'a> {
    pub fn to_node(self) -> Node {
        Node {
            value: self.value.to_vec(),
            perms: Perms(self.perms.to_vec()),
            children: self.children.to_vec(),
            generation: self.generation,
        }
    }

    pub fn has_child(self, name: &str) -> bool {
        self.children.has(name)
    }

    pub fn children(self) -> impl Iterator<Item = &'a str> {
        self.children.names()
    }

    /// The size the node-size quota measures.
    pub fn record_size(self) -> usize {
        RECORD_HEADER + RECORD_PERM * self.perms.len() + self.value.len() + self.children.len()
    }

    /// What the node at `path` costs its owner's memory quota: C
    /// xenstored's database key (the path) and record.
    pub fn memory(self, path: &str) -> usize {
        path.len() + self.record_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_removes_whole_names_only() {
        let mut n = Node::new(b"", Perms::owned_by(0));
        for c in ["ab", "b", "a", "bb"] {
            n.add_child(c);
        }
        assert!(n.view().has_child("a") && n.view().has_child("bb"));
        assert!(!n.view().has_child("") && !n.view().has_child("ab\0b"));
        assert!(!n.view().has_child("abb") && !n.view().has_child("c"));
        n.remove_child("b");
        assert_eq!(n.children, b"ab\0a\0bb\0");
        n.remove_child("ab");
        assert_eq!(n.children, b"a\0bb\0");
        n.remove_child("x");
        n.remove_child("bb");
        assert_eq!(n.children, b"a\0");
    }
}
