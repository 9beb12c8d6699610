// The cases of the `net_domains` suites that use the HTTP clients
// installed in tests/peers (undici for node, requests and httpx in the
// Python servers' virtual environment): included by tests/net/main.rs in
// the modes `domains`, `domains_no_ns` and `domains_no_landlock`, after
// suites/net_domains.rs.

/// A node script printing `name=OK` or `name=<error code>` for a fetch of
/// `url` through undici's proxy agent (node before 24 does not read the
/// proxy variables itself), trusting the site's CA.
fn node_fetch(name: &str, url: &str, ca: &std::path::Path) -> String {
    let undici = net_support::installed("node_modules/undici");
    format!(
        "node -e \"const u = require('{u}'); const a = new u.EnvHttpProxyAgent({{requestTls: {{ca: require('fs').readFileSync('{ca}')}}}}); u.fetch('{url}', {{dispatcher: a}}).then(r => r.text().then(t => console.log('{name}=' + (r.status === 200 && t.startsWith('hello from') ? 'OK' : r.status)))).catch(e => console.log('{name}=' + ((e.cause && e.cause.code) || e.message)))\"\n",
        u = undici.display(),
        ca = ca.display()
    )
}

#[test]
fn allowed_names_work_through_node_requests_and_httpx() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let (h, tls, ca) = (s.http, s.https, s.ca.display().to_string());
    let mut script = node_fetch(
        "node_https",
        &format!("https://site.test:{tls}/hello/node-https"),
        &s.ca,
    );
    script.push_str(&node_fetch(
        "node_http",
        &format!("http://site.test:{h}/hello/node-http"),
        &s.ca,
    ));
    let policy = s.policy(&["site.test"], &[]);
    let pol = t.policy("net.toml", &policy);
    // node reads undici's package (node before 24 does not read the proxy
    // variables itself).
    let undici = net_support::installed("node_modules/undici");
    let p = Probe::new(t.run(
        &["--policy", &pol, "--ro-root", undici.to_str().unwrap()],
        &["/bin/sh", "-c", &script],
    ));
    // requests and httpx, from the virtual environment of the Python
    // servers (launched as the program, so its runtime rules apply).
    let venv = net_support::installed(".venv-servers/bin/python");
    let code = format!(
        "import requests, httpx\n\
print('requests_https=' + str(requests.get('https://site.test:{tls}/hello/requests-https', verify='{ca}').status_code))\n\
print('requests_http=' + str(requests.get('http://site.test:{h}/hello/requests-http').status_code))\n\
print('httpx_https=' + str(httpx.get('https://site.test:{tls}/hello/httpx-https', verify='{ca}').status_code))\n\
print('httpx_http=' + str(httpx.get('http://site.test:{h}/hello/httpx-http').status_code))\n"
    );
    let py = Probe::new(t.run(&["--policy", &pol], &[venv.to_str().unwrap(), "-c", &code]));
    for (name, want) in [
        ("requests_http", "200"),
        ("requests_https", "200"),
        ("httpx_http", "200"),
        ("httpx_https", "200"),
    ] {
        py.expect(name, want);
    }
    p.expect("node_http", "OK").expect("node_https", "OK");
    // Judged at the site.
    for path in ["requests-http", "httpx-http", "node-http"] {
        assert_eq!(
            s.hosts_of(&format!("/hello/{path}")),
            vec![format!("site.test:{h}")],
            "{path}: {:?}",
            s.requests()
        );
    }
    for path in ["requests-https", "httpx-https", "node-https"] {
        assert_eq!(
            s.hosts_of(&format!("/hello/{path}")),
            vec![format!("site.test:{tls}")],
            "{path}: {:?}",
            s.requests()
        );
    }
}
