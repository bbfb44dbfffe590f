//! What a call touches, as stage 4 names it.
//!
//! Each resource has a kind and a value, and one spelling wherever it leaves the process:
//! `kind:value` (`path:src/lib.rs`, `program:/usr/bin/cargo`). Policies, approval digests, the
//! audit record and the console all see that spelling, so it is part of toolgate's wire and
//! never changes for a kind that exists; inside, tools and stage 7 work with the variants.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::canonical::Digest;

/// One thing a call touches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    /// A workspace-relative path the call reads or writes, as given or where a link leads.
    Path(String),
    /// A workspace-relative file the call creates.
    Create(String),
    /// The digest of the diff a write applies, so that an approval binds the change itself.
    Diff(Digest),
    /// The program a command runs: workspace-relative when it lives inside, else absolute
    /// (only the second starts with `/`).
    Program(String),
    /// The workspace-relative directory a command runs in.
    Cwd(String),
    /// The whole argv a script runs, as JSON.
    Argv(String),
    /// The project script a call names (`test`, `build`).
    Script(String),
    /// The workspace-relative file a script was found in.
    Source(String),
    /// A host a command may reach, or `none` / `unconfined`.
    Network(String),
    /// The sandbox a command runs in (`none`, `landlock:abi4`).
    Sandbox(String),
}

impl Resource {
    /// The kind, as spelled before the `:`.
    pub fn kind(&self) -> &'static str {
        match self {
            Resource::Path(_) => "path",
            Resource::Create(_) => "create",
            Resource::Diff(_) => "diff",
            Resource::Program(_) => "program",
            Resource::Cwd(_) => "cwd",
            Resource::Argv(_) => "argv",
            Resource::Script(_) => "script",
            Resource::Source(_) => "source",
            Resource::Network(_) => "network",
            Resource::Sandbox(_) => "sandbox",
        }
    }

    /// The value, as spelled after the `:`.
    pub fn value(&self) -> &str {
        match self {
            Resource::Diff(digest) => digest.as_str(),
            Resource::Path(value)
            | Resource::Create(value)
            | Resource::Program(value)
            | Resource::Cwd(value)
            | Resource::Argv(value)
            | Resource::Script(value)
            | Resource::Source(value)
            | Resource::Network(value)
            | Resource::Sandbox(value) => value,
        }
    }
}

/// The wire spelling, `kind:value`.
impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind(), self.value())
    }
}

/// As its wire spelling, a string: a list of resources serializes exactly as the list of
/// `kind:value` strings it replaced, so approval digests do not change.
impl Serialize for Resource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::sha256_digest;

    #[test]
    fn resources_are_spelled_kind_colon_value() {
        let digest = sha256_digest(b"diff");
        let cases = [
            (Resource::Path("src/lib.rs".into()), "path:src/lib.rs"),
            (Resource::Create("new.txt".into()), "create:new.txt"),
            (Resource::Diff(digest.clone()), &*format!("diff:{digest}")),
            (
                Resource::Program("/usr/bin/true".into()),
                "program:/usr/bin/true",
            ),
            (Resource::Cwd(".".into()), "cwd:."),
            (Resource::Argv(r#"["make"]"#.into()), r#"argv:["make"]"#),
            (Resource::Script("test".into()), "script:test"),
            (Resource::Source("Makefile".into()), "source:Makefile"),
            (Resource::Network("none".into()), "network:none"),
            (Resource::Sandbox("none".into()), "sandbox:none"),
        ];
        for (resource, wire) in cases {
            assert_eq!(resource.to_string(), wire);
            assert_eq!(serde_json::to_value(&resource).unwrap(), wire);
            assert_eq!(format!("{}:{}", resource.kind(), resource.value()), wire);
        }
    }
}
