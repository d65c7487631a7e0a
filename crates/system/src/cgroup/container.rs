//! A container's cgroup, found without asking any daemon: the cgroup directory whose name
//! holds the container's 64-hex-character ID, in any hierarchy:
//!
//! | runtime                     | directory                                         |
//! |-----------------------------|---------------------------------------------------|
//! | docker (systemd driver)     | `/system.slice/docker-ID.scope`                   |
//! | docker (cgroupfs driver)    | `/docker/ID`                                      |
//! | podman                      | `/machine.slice/libpod-ID.scope` (or `.../libpod-ID`) |
//! | containerd, CRI             | `.../cri-containerd-ID.scope`                     |
//! | CRI-O                       | `.../crio-ID.scope`                               |
//! | kubelet (cgroupfs driver)   | `/kubepods/burstable/podUID/ID`                   |
//!
//! An ID prefix of at least 12 hex characters (what `docker ps` shows) is enough; it is
//! refused when it matches several containers. A container *name* is turned into its ID
//! from the runtimes' state on disk: docker's `containers/*/config.v2.json` (`"Name":
//! "/web"`) and podman's `overlay-containers/containers.json` (`"names": ["web"]`).
//!
//! Runtimes' helper scopes (`libpod-conmon-ID.scope`, `crio-conmon-ID.scope`) hold the
//! monitor, not the container, and are not matched.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{subdirs, Cgroup, CgroupError, CgroupFs, Member};

/// Where the container runtimes keep their state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerState {
    /// docker's data root (`/var/lib/docker`): `containers/ID/config.v2.json`.
    pub docker: PathBuf,
    /// podman's (containers/storage's) graph root (`/var/lib/containers/storage`):
    /// `overlay-containers/containers.json`.
    pub podman: PathBuf,
}

impl Default for ContainerState {
    fn default() -> ContainerState {
        ContainerState {
            docker: PathBuf::from("/var/lib/docker"),
            podman: PathBuf::from("/var/lib/containers/storage"),
        }
    }
}

/// A container found in the cgroup tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerCgroup {
    /// Its full ID (64 hex characters).
    pub id: String,
    /// Its name, when it was given by name.
    pub name: Option<String>,
    /// How it was found, one sentence: `container web (id 0123456789ab), named in
    /// /var/lib/docker/containers/…/config.v2.json, cgroup /docker/…`.
    pub found: String,
    /// Its cgroup.
    pub cgroup: Cgroup,
}

/// Prefixes of the directory names that hold a container ID (then `.scope` or nothing).
const PREFIXES: [&str; 4] = ["docker-", "libpod-", "cri-containerd-", "crio-"];

/// The shortest ID prefix taken as an ID (what `docker ps` shows).
pub const MIN_ID_PREFIX: usize = 12;

/// The container ID a cgroup directory's name holds: `docker-ID.scope`, `libpod-ID.scope`,
/// `cri-containerd-ID.scope`, `crio-ID.scope`, or the bare `ID`.
pub(crate) fn container_id_of(name: &str) -> Option<&str> {
    let s = name.strip_suffix(".scope").unwrap_or(name);
    let s = PREFIXES.iter().find_map(|p| s.strip_prefix(p)).unwrap_or(s);
    (s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(s)
}

/// Every container ID starting with `prefix` that names a cgroup directory, with its
/// directory in each hierarchy (the shallowest when a hierarchy has several).
fn cgroups_with_id(fs: &CgroupFs, prefix: &str) -> BTreeMap<String, Vec<Member>> {
    let mut out: BTreeMap<String, Vec<Member>> = BTreeMap::new();
    for h in fs.hierarchies() {
        let mut stack = vec![h.mount.clone()];
        while let Some(dir) = stack.pop() {
            for sub in subdirs(&dir) {
                let id = sub
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(container_id_of);
                if let Some(id) = id.filter(|id| id.starts_with(prefix)) {
                    let members = out.entry(id.to_string()).or_default();
                    let rel = sub.strip_prefix(&h.mount).unwrap_or(&sub);
                    let path = format!("/{}", rel.to_string_lossy());
                    let depth = rel.components().count();
                    match members.iter_mut().find(|m| m.mount == h.mount) {
                        Some(m) if m.depth() > depth => m.path = path,
                        Some(_) => {}
                        None => members.push(Member::new(h.clone(), path)),
                    }
                }
                stack.push(sub);
            }
        }
    }
    out
}

/// The ID and name of a docker `config.v2.json` (`"ID"`, `"Name": "/web"`).
pub(crate) fn parse_docker_config(text: &str) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let id = v.get("ID")?.as_str()?.to_string();
    let name = v.get("Name")?.as_str()?.trim_start_matches('/').to_string();
    Some((id, name))
}

/// The `(ID, names)` of podman's `containers.json`.
pub(crate) fn parse_podman_containers(text: &str) -> Vec<(String, Vec<String>)> {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str(text) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|c| {
            let id = c.get("id")?.as_str()?.to_string();
            let names = c
                .get("names")
                .and_then(|n| n.as_array())
                .map(|n| {
                    n.iter()
                        .filter_map(|s| Some(s.as_str()?.to_string()))
                        .collect()
                })
                .unwrap_or_default();
            Some((id, names))
        })
        .collect()
}

/// The IDs of containers named `name` in the runtimes' state, each with the file that
/// named it; and a sentence per place searched.
fn ids_named(state: &ContainerState, name: &str) -> (Vec<(String, PathBuf)>, Vec<String>) {
    let mut found = Vec::new();
    let mut searched = Vec::new();
    let docker = state.docker.join("containers");
    match std::fs::read_dir(&docker) {
        Ok(rd) => {
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| Some(e.ok()?.path().join("config.v2.json")))
                .collect();
            files.sort();
            for f in files {
                let parsed = std::fs::read_to_string(&f)
                    .ok()
                    .and_then(|t| parse_docker_config(&t));
                if let Some((id, n)) = parsed {
                    if n == name {
                        found.push((id, f));
                    }
                }
            }
            searched.push(format!("{}/*/config.v2.json", docker.display()));
        }
        Err(_) => searched.push(format!("{}/*/config.v2.json (absent)", docker.display())),
    }
    let podman = state
        .podman
        .join("overlay-containers")
        .join("containers.json");
    match std::fs::read_to_string(&podman) {
        Ok(text) => {
            for (id, names) in parse_podman_containers(&text) {
                if names.iter().any(|n| n == name) {
                    found.push((id, podman.clone()));
                }
            }
            searched.push(podman.display().to_string());
        }
        Err(_) => searched.push(format!("{} (absent)", podman.display())),
    }
    (found, searched)
}

fn short(id: &str) -> &str {
    &id[..id.len().min(MIN_ID_PREFIX)]
}

fn mounts(fs: &CgroupFs) -> String {
    fs.hierarchies()
        .iter()
        .map(|h| h.mount.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn ambiguous(query: &str, found: &BTreeMap<String, Vec<Member>>) -> CgroupError {
    let candidates: Vec<String> = found
        .iter()
        .map(|(id, members)| format!("{id} ({})", members[0].path))
        .collect();
    CgroupError::Container(format!(
        "{query} matches {} containers: {}; give more of the ID",
        found.len(),
        candidates.join(", ")
    ))
}

/// Finds a running container's cgroup by `query`: an ID prefix of at least 12 hex
/// characters, or a name (looked up in `state`). Errs, saying what was searched and how to
/// find the ID by hand, when nothing matches, and names the candidates when several do.
pub fn locate_container(
    fs: &CgroupFs,
    state: &ContainerState,
    query: &str,
) -> Result<ContainerCgroup, CgroupError> {
    let q = query.trim();
    if q.is_empty() {
        return Err(CgroupError::Container(
            "no container named: give its name or ID".into(),
        ));
    }
    let hex = q.bytes().all(|b| b.is_ascii_hexdigit()) && q.len() <= 64;
    let mut searched = Vec::new();
    if hex && q.len() >= MIN_ID_PREFIX {
        let found = cgroups_with_id(fs, &q.to_ascii_lowercase());
        if found.len() > 1 {
            return Err(ambiguous(q, &found));
        }
        if let Some((id, members)) = found.into_iter().next() {
            let cgroup = Cgroup::from_members(members).expect("a match has a directory");
            return Ok(ContainerCgroup {
                found: format!(
                    "container {} found by its ID in the cgroup tree at {cgroup}",
                    short(&id)
                ),
                id,
                name: None,
                cgroup,
            });
        }
        searched.push(format!(
            "no cgroup directory under {} is named for an ID starting with {q} \
             (docker-ID.scope, docker/ID, libpod-ID.scope, cri-containerd-ID.scope, \
             crio-ID.scope, kubepods/.../ID)",
            mounts(fs)
        ));
    } else if hex {
        searched.push(format!(
            "{q} is too short for an ID prefix (at least {MIN_ID_PREFIX} hex characters)"
        ));
    }
    let (named, places) = ids_named(state, q);
    if named.is_empty() {
        searched.push(format!(
            "no container is named {q} in {}",
            places.join(" nor in ")
        ));
        return Err(CgroupError::Container(format!(
            "no container {q}: {}. Find its ID by hand with `docker inspect -f '{{{{.Id}}}}' {q}` \
             (or `podman inspect -f '{{{{.Id}}}}' {q}`) and give the ID, or give its cgroup path",
            searched.join("; ")
        )));
    }
    let mut hits: BTreeMap<String, (Vec<Member>, PathBuf)> = BTreeMap::new();
    for (id, file) in &named {
        if let Some(members) = cgroups_with_id(fs, id).remove(id) {
            hits.insert(id.clone(), (members, file.clone()));
        }
    }
    if hits.len() > 1 {
        let by_id = hits.into_iter().map(|(id, (m, _))| (id, m)).collect();
        return Err(ambiguous(q, &by_id));
    }
    let Some((id, (members, file))) = hits.into_iter().next() else {
        let ids: Vec<String> = named
            .iter()
            .map(|(id, f)| format!("{} (in {})", short(id), f.display()))
            .collect();
        return Err(CgroupError::Container(format!(
            "container {q} is {} but no cgroup directory under {} holds its ID: is it running?",
            ids.join(" and "),
            mounts(fs)
        )));
    };
    let cgroup = Cgroup::from_members(members).expect("a match has a directory");
    Ok(ContainerCgroup {
        found: format!(
            "container {q} (id {}), named in {}, cgroup {cgroup}",
            short(&id),
            file.display()
        ),
        id,
        name: Some(q.to_string()),
        cgroup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

    #[test]
    fn ids_in_directory_names() {
        for name in [
            format!("docker-{ID}.scope"),
            format!("libpod-{ID}.scope"),
            format!("libpod-{ID}"),
            format!("cri-containerd-{ID}.scope"),
            format!("crio-{ID}.scope"),
            ID.to_string(),
        ] {
            assert_eq!(container_id_of(&name), Some(ID), "{name}");
        }
        for name in [
            format!("libpod-conmon-{ID}.scope"),
            format!("crio-conmon-{ID}.scope"),
            "kubepods-burstable-pod1234.slice".to_string(),
            "docker".to_string(),
            ID[..63].to_string(),
            ID.to_uppercase(),
        ] {
            assert_eq!(container_id_of(&name), None, "{name}");
        }
    }

    #[test]
    fn docker_config_and_podman_containers() {
        let docker = format!(
            r#"{{"StreamConfig":{{}},"State":{{"Running":true,"Pid":4242}},"ID":"{ID}","Created":"2024-05-01T10:00:00Z","Path":"nginx","Name":"/web","Driver":"overlay2"}}"#
        );
        assert_eq!(
            parse_docker_config(&docker),
            Some((ID.to_string(), "web".to_string()))
        );
        assert_eq!(parse_docker_config("{}"), None);
        let podman = format!(
            r#"[{{"id":"{ID}","names":["api","api-alias"],"image":"abc","layer":"def","metadata":"{{}}","created":"2024-05-01T10:00:00Z"}},{{"id":"00ff","names":[]}}]"#
        );
        let c = parse_podman_containers(&podman);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0],
            (ID.to_string(), vec!["api".into(), "api-alias".into()])
        );
        assert!(parse_podman_containers("not json").is_empty());
    }

    #[test]
    fn nothing_found_says_where_and_how() {
        let fs = CgroupFs {
            v2: Some(PathBuf::from("/nonexistent/cgroup")),
            v1: BTreeMap::new(),
        };
        let state = ContainerState {
            docker: PathBuf::from("/nonexistent/docker"),
            podman: PathBuf::from("/nonexistent/podman"),
        };
        let e = locate_container(&fs, &state, "web")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no container web"), "{e}");
        assert!(
            e.contains("/nonexistent/docker/containers/*/config.v2.json (absent)"),
            "{e}"
        );
        assert!(e.contains("docker inspect -f '{{.Id}}' web"), "{e}");
        let e = locate_container(&fs, &state, &ID[..12])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no cgroup directory under /nonexistent/cgroup"),
            "{e}"
        );
        let e = locate_container(&fs, &state, "abc123")
            .unwrap_err()
            .to_string();
        assert!(e.contains("too short"), "{e}");
    }
}
