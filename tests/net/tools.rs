//! Network by domain with the tools servers use and rootfence's own
//! commands: git over https, pip, uv and npm reach a package index on a
//! listed name through the proxy and are refused an unlisted one; a real
//! server that needs the network (mcp-server-fetch) reads a listed site
//! and is refused without it; `learn` proposes the hosts a server asked
//! for; `explain` and `doctor` say what holds; policies mixing the list
//! with ports are refused.

use crate::common;
use crate::net_support;

use std::path::Path;
use std::process::Command;

use common::{Tree, rootfence};
use net_support::Site;

/// A site for `t` serving a git repository (dumb HTTP), a Python package
/// index with one wheel, and an npm registry document.
fn index_site(t: &Tree) -> Site {
    let files = t.p("site-files");
    std::fs::create_dir_all(&files).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", common::stderr(&o));
    };
    let work = t.p("git-work");
    std::fs::create_dir_all(&work).unwrap();
    git(&files, &["init", "-q", "--bare", "repo.git"]);
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("README"), "fenced content\n").unwrap();
    git(&work, &["add", "README"]);
    git(
        &work,
        &[
            "-c",
            "user.email=t@example.test",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "one",
        ],
    );
    git(
        &work,
        &[
            "push",
            "-q",
            files.join("repo.git").to_str().unwrap(),
            "HEAD:refs/heads/main",
        ],
    );
    let bare = files.join("repo.git");
    git(&bare, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    git(&bare, &["update-server-info"]);
    // A wheel (with a correct RECORD) in a PEP 503 index.
    let wheel = r#"
import base64, hashlib, os, sys, zipfile
d = os.path.join(sys.argv[1], "simple", "rfdemo")
os.makedirs(d, exist_ok=True)
files = {
    "rfdemo/__init__.py": b"VALUE = 'rfdemo through the proxy'\n",
    "rfdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: rfdemo\nVersion: 1.0\n",
    "rfdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: rootfence-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for n, data in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append("%s,sha256=%s,%d" % (n, h, len(data)))
record.append("rfdemo-1.0.dist-info/RECORD,,")
files["rfdemo-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
with zipfile.ZipFile(os.path.join(d, "rfdemo-1.0-py3-none-any.whl"), "w") as z:
    for n, data in files.items():
        z.writestr(n, data)
with open(os.path.join(d, "index.html"), "w") as f:
    f.write('<html><body><a href="rfdemo-1.0-py3-none-any.whl">rfdemo-1.0-py3-none-any.whl</a></body></html>\n')
"#;
    let o = Command::new(net_support::installed(".venv/bin/python"))
        .args(["-c", wheel])
        .arg(&files)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let s = Site::start(&files, &t.ro, &["site.test"]);
    std::fs::create_dir_all(files.join("npmreg")).unwrap();
    std::fs::write(
        files.join("npmreg/rfdemo"),
        format!(
            r#"{{"name":"rfdemo","dist-tags":{{"latest":"1.0.7"}},"versions":{{"1.0.7":{{"name":"rfdemo","version":"1.0.7","dist":{{"tarball":"https://site.test:{}/npmreg/rfdemo-1.0.7.tgz"}}}}}}}}"#,
            s.https
        ),
    )
    .unwrap();
    s
}

/// Run `argv` confined under `policy` (a body) with `extra` flags.
fn run(t: &Tree, policy: &str, extra: &[&str], argv: &[&str]) -> std::process::Output {
    let p = t.policy("net.toml", policy);
    let mut flags = vec!["--policy", p.as_str()];
    flags.extend_from_slice(extra);
    t.run(&flags, argv)
}

#[test]
fn git_clones_over_https_through_the_proxy() {
    let t = Tree::new();
    let s = index_site(&t);
    let ca = format!("GIT_SSL_CAINFO={}", s.ca.display());
    let clone = t.s("r/clone");
    let o = run(
        &t,
        &s.policy(&["site.test"], &[]),
        &["--env", &ca],
        &[
            "git",
            "clone",
            "-q",
            &format!("https://site.test:{}/repo.git", s.https),
            &clone,
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::content(&t.p("r/clone/README")), "fenced content\n");
    assert!(s.saw("/repo.git/info/refs?service=git-upload-pack"));
    // Its twin: the same clone from a name the list does not hold.
    let o = run(
        &t,
        &s.policy(&["site.test"], &[]),
        &["--env", &ca],
        &[
            "git",
            "clone",
            "-q",
            "https://other.test/repo.git",
            &t.s("r/other"),
        ],
    );
    assert!(!o.status.success());
    assert!(common::stderr(&o).contains("403"), "{}", common::stderr(&o));
    assert!(!t.p("r/other/README").exists());
}

#[test]
fn pip_and_uv_install_from_a_listed_index_through_the_proxy() {
    let t = Tree::new();
    let s = index_site(&t);
    let index = format!("https://site.test:{}/simple/", s.https);
    let ca = s.ca.display().to_string();
    let pip = net_support::installed(".venv-servers/bin/pip");
    let dl = t.s("r/dl");
    let o = run(
        &t,
        &s.policy(&["site.test"], &[]),
        &[],
        &[
            pip.to_str().unwrap(),
            "download",
            "--no-cache-dir",
            "--no-deps",
            "--disable-pip-version-check",
            "--index-url",
            &index,
            "--cert",
            &ca,
            "-d",
            &dl,
            "rfdemo",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(t.p("r/dl/rfdemo-1.0-py3-none-any.whl").exists());

    let uv = net_support::installed(".venv/bin/uv");
    let target = t.s("r/uvt");
    let uv_args = |index: &str, target: &str| -> Vec<String> {
        [
            uv.to_str().unwrap(),
            "pip",
            "install",
            "--no-deps",
            "--python",
            "/usr/bin/python3",
            "--target",
            target,
            "--index-url",
            index,
            "rfdemo",
        ]
        .map(str::to_string)
        .to_vec()
    };
    // The user has a uv cache: the runtime rules give uv a private layer
    // of it, and keep it offline (UV_OFFLINE) unless the policy gives the
    // network, as a list of domains does. uv reads the CA from
    // SSL_CERT_FILE.
    std::fs::create_dir_all(t.home.join(".cache/uv")).unwrap();
    let env = [
        format!("SSL_CERT_FILE={ca}"),
        format!("UV_CACHE_DIR={}", t.s("r/uvcache")),
    ];
    let flags: Vec<&str> = env.iter().flat_map(|e| ["--env", e.as_str()]).collect();
    let a = uv_args(&index, &target);
    let argv: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = run(&t, &s.policy(&["site.test"], &[]), &flags, &argv);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(common::content(&t.p("r/uvt/rfdemo/__init__.py")).contains("rfdemo through the proxy"));
    // Their twin: an index on a name the list does not hold.
    let a = uv_args("https://pypi.org/simple/", &t.s("r/uvt2"));
    let argv: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = run(&t, &s.policy(&["site.test"], &[]), &flags, &argv);
    assert!(!o.status.success());
    assert!(!t.p("r/uvt2/rfdemo").exists());
    assert_eq!(
        s.requests()
            .iter()
            .filter(|r| r["path"] == "/simple/rfdemo/rfdemo-1.0-py3-none-any.whl")
            .count(),
        2,
        "{:?}",
        s.requests()
    );
}

#[test]
fn npm_reads_a_listed_registry_through_the_proxy() {
    let t = Tree::new();
    let s = index_site(&t);
    let ca = s.ca.display().to_string();
    let cache = t.s("r/npm-cache");
    let view = |registry: &str| {
        run(
            &t,
            &s.policy(&["site.test"], &[]),
            &[],
            &[
                "npm",
                "view",
                "rfdemo",
                "version",
                "--registry",
                registry,
                "--cafile",
                &ca,
                "--cache",
                &cache,
            ],
        )
    };
    let o = view(&format!("https://site.test:{}/npmreg/", s.https));
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).trim(), "1.0.7");
    assert!(s.saw("/npmreg/rfdemo"));
    let o = view("https://registry.npmjs.org/");
    assert!(!o.status.success());
    assert!(common::stderr(&o).contains("403"), "{}", common::stderr(&o));
}

/// Run mcp-server-fetch through `rootfence run` under `policy` (a body),
/// driven by the Python SDK host: the fetch tool's results for `urls`.
fn fetch_with(t: &Tree, policy: &str, urls: &[&str]) -> Vec<serde_json::Value> {
    let p = t.policy("fetch.toml", policy);
    let server = net_support::installed(".venv-servers/bin/mcp-server-fetch");
    // raw: the page as it came (readabilipy's simplification would try to
    // install a node package on first use).
    let steps: Vec<serde_json::Value> = urls
        .iter()
        .map(|u| serde_json::json!({"call": "fetch", "args": {"url": u, "raw": true}}))
        .collect();
    let scenario = serde_json::json!({
        "command": [rootfence(), "run", "--policy", p, "--", server],
        "roots": null,
        "steps": steps,
    });
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenario.json");
    std::fs::write(&f, scenario.to_string()).unwrap();
    let o = Command::new(net_support::installed(".venv/bin/python"))
        .arg(net_support::peers().join("host.py"))
        .arg(&f)
        .env("HOME", &t.home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let lines: Vec<serde_json::Value> = common::stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v.get("call").is_some())
        .collect();
    assert_eq!(lines.len(), urls.len(), "{}", common::stderr(&o));
    lines
}

#[test]
fn mcp_server_fetch_reads_a_listed_site_and_is_refused_without_it() {
    let t = Tree::new();
    let s = Site::start(&t.p("site-files"), &t.ro, &["site.test"]);
    std::fs::write(
        s.dir.join("page.html"),
        "<html><body><h1>Fenced page</h1><p>The fetch marker is 4242.</p></body></html>\n",
    )
    .unwrap();
    let page = format!("http://site.test:{}/page.html", s.http);
    let listed = fetch_with(&t, &s.policy(&["site.test"], &[]), &[&page]);
    assert_eq!(listed[0]["error"], false, "{listed:?}");
    assert!(
        listed[0]["text"]
            .as_str()
            .unwrap()
            .contains("The fetch marker is 4242."),
        "{listed:?}"
    );
    assert!(s.saw("/page.html"));
    let before = s.requests().len();
    // The same server and page, with the name not on the list (another
    // one is): the proxy answers 403, and the server says so.
    let unlisted = fetch_with(
        &t,
        "version = 1\n[network]\nallow_domains = [\"api.example.test\"]\n",
        &[&page],
    );
    assert_eq!(unlisted[0]["error"], true, "{unlisted:?}");
    assert!(
        unlisted[0]["text"].as_str().unwrap().contains("403"),
        "{unlisted:?}"
    );
    // And with no network at all (the default policy).
    let none = fetch_with(&t, "version = 1\n", &[&page]);
    assert_eq!(none[0]["error"], true, "{none:?}");
    assert_eq!(s.requests().len(), before, "{:?}", s.requests());
}

#[test]
fn learn_proposes_the_hosts_a_server_asked_for() {
    let t = Tree::new();
    let server = t.p("r/server.py");
    std::fs::write(
        &server,
        r#"import json, sys, urllib.request
for u in ["http://api.example.test/v1", "https://data.example.test:8443/x", "https://api.example.test/v2"]:
    try:
        urllib.request.urlopen(u, timeout=10)
    except Exception as e:
        print("fetch failed: %s" % e, file=sys.stderr)
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "x", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
    elif m.get("method") == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}}), flush=True)
"#,
    )
    .unwrap();
    let o = Command::new(rootfence())
        .args(["learn", "--timeout", "30", "--root"])
        .arg(&t.r)
        .arg("--")
        .arg(common::python())
        .arg(&server)
        .env("HOME", &t.home)
        .output()
        .unwrap();
    let out = common::stdout(&o);
    assert!(o.status.success(), "{out}\n{}", common::stderr(&o));
    assert!(
        out.contains(
            "[network]\nallow_domains = [\"api.example.test\", \"data.example.test:8443\"]"
        ),
        "{out}\n{}",
        common::stderr(&o)
    );
    // Proposed, never granted while learning: each request was refused.
    assert_eq!(
        common::stderr(&o)
            .matches("refused: not in [network] allow_domains")
            .count(),
        3,
        "{}",
        common::stderr(&o)
    );
}

#[test]
fn explain_lists_the_domains_and_doctor_names_the_rung() {
    let t = Tree::new();
    let p = t.policy(
        "net.toml",
        "version = 1\n[network]\nallow_domains = [\"api.github.com\", \"*.githubusercontent.com\", \"localhost:8080\", \"dev.internal:8443\"]\nhosts = { \"dev.internal\" = \"10.1.2.3\" }\n",
    );
    let o = Command::new(rootfence())
        .args(["explain", "--policy", &p, "--", "/bin/true"])
        .output()
        .unwrap();
    let out = common::stdout(&o);
    assert!(o.status.success(), "{out}");
    for line in [
        "    api.github.com                   this name only, ports 80 and 443",
        "    *.githubusercontent.com          the subdomains of githubusercontent.com (not githubusercontent.com itself), ports 80 and 443",
        "    localhost:8080                   loopback (listed), port 8080",
        "  pinned:      dev.internal -> 10.1.2.3 (not asked of DNS)",
        "  HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, http_proxy, https_proxy, all_proxy=http://<rootfence's network proxy>",
        "  NODE_USE_ENV_PROXY=1  (set by the runtime rules)",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    let o = Command::new(rootfence())
        .args(["doctor", "--policy", &p, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let design = v["network_by_domain"]["design"].as_str().unwrap();
    let netns = v["network_namespace"]["available"].as_bool().unwrap();
    let ns = v["namespaces"]["available"].as_bool().unwrap();
    let row = v["coverage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["class"]
                .as_str()
                .unwrap()
                .starts_with("network by domain (allow_domains)")
        })
        .unwrap();
    let how = row["how"].as_str().unwrap();
    assert_eq!(row["closed"], "partly", "{how}");
    assert!(
        how.contains("what TLS carries inside a tunnel is not seen"),
        "{how}"
    );
    if ns && netns {
        assert_eq!(design, "network-namespace");
        assert!(
            how.starts_with("the server's own network namespace"),
            "{how}"
        );
    } else {
        assert_eq!(design, "supervised-connect");
        assert!(
            how.contains("Landlock allows the server no TCP port"),
            "{how}"
        );
    }
    let o = Command::new(rootfence())
        .args(["doctor", "--policy", &p])
        .output()
        .unwrap();
    let text = common::stdout(&o);
    assert!(
        text.contains(
            "network by domain ([network] allow_domains): in the server's own network namespace"
        ) || text.contains("network by domain ([network] allow_domains): on rootfence's loopback"),
        "{text}"
    );
}

#[test]
fn policies_that_mix_domains_with_ports_or_bad_entries_are_refused() {
    let t = Tree::new();
    for (body, want) in [
        (
            "[network]\nallow_domains = [\"a.example\"]\ntcp_connect = [443]\n",
            "tcp_connect would open its ports to every host",
        ),
        (
            "[network]\nallow_domains = [\"a.example\"]\nudp = true\n",
            "udp = true would open UDP (and DNS) to every host",
        ),
        (
            "[network]\nallow_domains = [\"*.com\"]\n",
            "would allow every name under a top-level domain",
        ),
        (
            "[network]\nallow_domains = [\"https://a.example\"]\n",
            "write the host only",
        ),
        (
            "[network]\nallow_domains = [\"a.example\"]\nhosts = { \"b.example\" = \"127.0.0.1\" }\n",
            "b.example is pinned, but no allow_domains entry allows it",
        ),
        (
            "[network]\nallow_domains = [\"a.example\"]\nhosts = { \"a.example\" = \"localhost\" }\n",
            "is not an IP address",
        ),
    ] {
        let p = t.policy("bad.toml", &format!("version = 1\n{body}"));
        let o = Command::new(rootfence())
            .args(["check", &p])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{body}");
        let err = common::stderr(&o);
        assert!(
            err.contains(want) && err.contains("network."),
            "{body}: {err}"
        );
    }
    let p = t.policy(
        "net.toml",
        "version = 1\n[network]\nallow_domains = [\"a.example\"]\n",
    );
    let o = t.run(
        &["--policy", &p, "--allow-tcp-connect", "443"],
        &["/bin/true"],
    );
    assert_eq!(o.status.code(), Some(125));
    assert!(
        common::stderr(&o).contains("cannot be combined with the policy's [network] allow_domains")
    );
}
