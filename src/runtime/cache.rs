//! The cache rule: package caches behind private layers, and the settings
//! that point launchers at them.
//!
//! `npx`, `uvx` and the other package runners run packages out of their
//! caches, and the user's own
//! `npx` and `uvx` run whatever is there later, outside the sandbox: the
//! server reads a cache, and what it writes goes to a private layer of its
//! own (discarded at exit; without namespaces, an empty private directory
//! the launcher is pointed at instead). A cache the user keeps in a shared
//! directory (`UV_CACHE_DIR=/tmp`) is not granted.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::launchers::NotAsked;
use super::wide::{shared, too_wide};
use super::{Collect, HostEnv, Rights, Rule, RuntimeNeed};
use crate::policy::Policy;

/// A cache: the variable that names it to its launcher, where it is, and
/// what it is for.
struct Cache {
    var: &'static str,
    dir: Option<PathBuf>,
    why: &'static str,
}

fn caches(env: &HostEnv) -> Vec<Cache> {
    let home = env.home.clone();
    let data = env.xdg("XDG_DATA_HOME", ".local/share");
    vec![
        Cache {
            var: "npm_config_cache",
            dir: env
                .abs_var("npm_config_cache")
                .or_else(|| env.abs_var("NPM_CONFIG_CACHE"))
                .or_else(|| home.as_ref().map(|h| h.join(".npm"))),
            why: "npm's cache (npx runs packages from it)",
        },
        Cache {
            var: "UV_CACHE_DIR",
            dir: env
                .abs_var("UV_CACHE_DIR")
                .or_else(|| env.xdg("XDG_CACHE_HOME", ".cache").map(|c| c.join("uv"))),
            why: "uv's cache (uvx and uv run take environments from it)",
        },
        Cache {
            var: "UV_TOOL_DIR",
            dir: env
                .abs_var("UV_TOOL_DIR")
                .or_else(|| data.as_ref().map(|d| d.join("uv/tools"))),
            why: "uv's tools (uvx locks the directory and runs what is installed there)",
        },
    ]
}

/// uv's managed Pythons.
fn uv_pythons(env: &HostEnv) -> Option<PathBuf> {
    env.abs_var("UV_PYTHON_INSTALL_DIR").or_else(|| {
        env.xdg("XDG_DATA_HOME", ".local/share")
            .map(|d| d.join("uv/python"))
    })
}

/// Grant the caches that exist, each behind a private layer: npm's and
/// uv's (where their variables or defaults put them), and those the
/// launcher `argv` runs says it has ([`super::launchers`]).
pub fn collect(c: &mut Collect, argv: &[OsString]) {
    if let Some(l) = super::launchers::of(argv) {
        match l.cache_dirs(c.env, &c.writable) {
            Ok(dirs) => {
                for (ask, dir) in dirs {
                    grant(c, dir, ask.var, ask.why);
                }
            }
            Err(NotAsked::Writable(at)) => c.note(format!(
                "{} not asked where its caches are: it lies in {}, which the server may write, and rootfence runs nothing the server may have written; the server runs with no such cache",
                l.program,
                super::shown(&at, c.env.home.as_deref())
            )),
            Err(NotAsked::Blind(why)) => c.note(format!(
                "{} not asked where its caches are: rootfence asks it blind to the places the server may write, and cannot here ({why}); the server runs with no such cache; fix: name the cache in the policy's [runtime] read",
                l.program
            )),
        }
    }
    for cache in caches(c.env) {
        if let Some(dir) = cache.dir {
            grant(c, dir, cache.var, cache.why);
        }
    }
    if let Some(dir) = uv_pythons(c.env)
        && dir.is_dir()
        && !too_wide(&dir, c.env)
    {
        c.add(dir, Rights::RX, Rule::Cache, "uv's managed Pythons", true);
    }
}

/// Grant the cache `dir` (that `var` names to its launcher) behind a
/// private layer, where it exists and is a directory of its own.
fn grant(c: &mut Collect, dir: PathBuf, var: &str, why: &str) {
    if shared(&dir, c.env) || too_wide(&dir, c.env) {
        c.note(format!(
            "{} ({var}) not granted: it is a shared directory, never granted whole, so the server runs with no such cache; fix: set {var} to a directory of its own",
            dir.display()
        ));
        return;
    }
    if dir.is_dir() {
        c.add_private(
            dir,
            Rights::RX,
            Rule::Cache,
            format!("{why}; writes go to a private layer"),
            Some(var),
        );
    }
}

/// uv flags that need the network (which `UV_OFFLINE` would break).
const UV_ONLINE_FLAGS: &[&str] = &[
    "--refresh",
    "--refresh-package",
    "--upgrade",
    "--upgrade-package",
    "-U",
    "-P",
    "--reinstall",
    "--reinstall-package",
];

/// The variables that point launchers at the caches granted, and keep them
/// from the network when the policy grants none.
///
/// npm and npx prefer what the cache holds over asking the registry and
/// skip their update, audit and funding calls; so does pnpm when its store
/// is granted. uv stays offline and never
/// downloads a Python, unless the policy grants TCP connections to ports
/// 443 or 80 (where package indexes are), or lists domains
/// (`[network] allow_domains`), or the
/// command names a uv flag that needs the network (then `UV_OFFLINE` is
/// not set, and a note says so).
pub fn settings(
    argv: &[OsString],
    policy: &Policy,
    needs: &[RuntimeNeed],
    notes: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // Each launcher pointed at the cache granted (the one it named, or
    // its default: the same place).
    for n in needs {
        if let Some(var) = &n.private_env {
            out.insert(var.clone(), n.path.to_string_lossy().into_owned());
        }
    }
    // The registries are reached over HTTPS (or HTTP): a policy granting
    // other ports (a local service) still keeps the launchers offline. A
    // policy listing domains gives the network by name, on whatever port
    // its entries say (an index of one's own included).
    let network = policy.tcp_connect.iter().any(|p| matches!(p, 443 | 80))
        || !policy.allow_domains.is_empty();
    if out.contains_key("npm_config_cache") {
        for (k, v) in [
            ("npm_config_update_notifier", "false"),
            ("npm_config_audit", "false"),
            ("npm_config_fund", "false"),
        ] {
            out.insert(k.to_string(), v.to_string());
        }
        if !network {
            out.insert("npm_config_prefer_offline".into(), "true".into());
        }
    }
    // pnpm (dlx) re-resolves a package it ran more than a day ago: from
    // the metadata in its cache rather than the registry.
    if !network && out.contains_key("pnpm_config_store_dir") {
        out.insert("pnpm_config_prefer_offline".into(), "true".into());
    }
    if out.contains_key("UV_CACHE_DIR") {
        out.insert("UV_NO_PROGRESS".into(), "1".into());
        out.insert("UV_PYTHON_DOWNLOADS".into(), "never".into());
        let online = argv.iter().skip(1).find(|a| {
            let a = a.to_string_lossy();
            UV_ONLINE_FLAGS
                .iter()
                .any(|f| a == *f || a.starts_with(&format!("{f}=")))
        });
        match (network, online) {
            (false, None) => {
                out.insert("UV_OFFLINE".into(), "1".into());
            }
            (false, Some(flag)) => notes.push(format!(
                "UV_OFFLINE not set: the command's {} needs the network, which the policy does not grant ([network] allow_domains or tcp_connect), so uv will fail to reach its index",
                flag.to_string_lossy()
            )),
            (true, _) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(var: &str) -> RuntimeNeed {
        RuntimeNeed {
            path: PathBuf::from("/home/u/.local/share/pnpm/store"),
            rights: Rights::RX,
            rule: Rule::Cache,
            why: String::new(),
            optional: true,
            private: true,
            private_env: Some(var.to_string()),
            from: Vec::new(),
        }
    }

    /// With pnpm's store granted and no network, pnpm prefers what its
    /// cache holds (a `pnpm dlx` older than a day re-resolves from it);
    /// with the registry's port granted, it is left to ask.
    #[test]
    fn pnpm_prefers_its_cache_without_network() {
        let argv = [OsString::from("pnpm"), "dlx".into(), "x".into()];
        let needs = [granted("pnpm_config_store_dir")];
        let mut notes = Vec::new();
        let offline = Policy::builtin(None).unwrap();
        let out = settings(&argv, &offline, &needs, &mut notes);
        assert_eq!(
            out.get("pnpm_config_prefer_offline").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            out.get("pnpm_config_store_dir").map(String::as_str),
            Some("/home/u/.local/share/pnpm/store")
        );
        let mut online = Policy::builtin(None).unwrap();
        online.tcp_connect.push(443);
        let out = settings(&argv, &online, &needs, &mut notes);
        assert!(!out.contains_key("pnpm_config_prefer_offline"), "{out:?}");
    }
}
