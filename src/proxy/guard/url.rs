//! The URL check for URL-mode elicitation (2025-11-25): the host will open
//! the URL in a browser, so it is read the way a browser reads it, by the
//! `url` crate (the WHATWG URL standard), never by a parser of our own.
//!
//! Accepted: `https://host[:port]/[path][?query][#fragment]` where `host` is
//! a domain name, written exactly as the URL standard serializes it.
//! Refused:
//! - any other scheme (`elicitation.url.https`);
//! - userinfo (`https://user:pw@host`, also `https://good.com@evil.com`
//!   and `https://good.com%2F@evil.com`: `elicitation.url.userinfo`);
//! - IP hosts unless `url_allow_ip`: every host the standard reads as an
//!   address (`[::1]`, `127.0.0.1`, `127.1`, `2130706433`, `0x7f.1`,
//!   fullwidth digits, ideographic full stops);
//! - `localhost`, `localhost.` and `*.localhost` unless
//!   `url_allow_localhost` (also when written with characters IDNA folds to
//!   them: `ｌｏｃａｌｈｏｓｔ`, `local\u{AD}host`);
//! - any URL that is not equal to its own serialization
//!   (`elicitation.url.syntax`): upper case in the scheme or host, a
//!   default or empty port, a missing `/` path, backslashes, whitespace or
//!   controls, percent-encoding the browser would change, dot segments,
//!   a Unicode host (its serialization is punycode). What the user is
//!   shown is then exactly what the browser opens;
//! - punycode labels that imitate another name (`elicitation.url.homograph`):
//!   a label whose decoded letters mix scripts beyond what Unicode TS #39
//!   calls highly restrictive (`xn--pple-43d`, Cyrillic `а` in `apple`), or
//!   whose letters, all from another script, have an ASCII confusables
//!   skeleton (`xn--80ak6aa92e`, Cyrillic `аррӏе`);
//! - what the standard cannot parse at all (`elicitation.url.syntax`).

use unicode_security::{RestrictionLevel, RestrictionLevelDetection};
use url::{Host, Position, Url};

/// What a URL check found wrong, with the rule that refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRefusal {
    /// The rule id (see `policy/README.md`).
    pub rule: &'static str,
    /// What is wrong (never the path, query or userinfo, which may carry
    /// secrets).
    pub detail: String,
}

/// Whether IP and localhost hosts are allowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct UrlRules {
    /// `elicitation.url_allow_ip`
    pub allow_ip: bool,
    /// `elicitation.url_allow_localhost`
    pub allow_localhost: bool,
}

fn refuse(rule: &'static str, detail: impl Into<String>) -> UrlRefusal {
    UrlRefusal {
        rule,
        detail: detail.into(),
    }
}

/// Check `url`; on success returns its host as serialized (for the audit
/// log: never the path or query, which may carry tokens).
///
/// # Security
///
/// The host judged is the host a browser opens: the URL is parsed by the
/// WHATWG URL standard and must equal its own serialization, so no other
/// reading of it exists.
pub fn check(url: &str, rules: UrlRules) -> Result<String, UrlRefusal> {
    let parsed = match Url::parse(url) {
        Ok(u) => u,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            return Err(refuse(
                "elicitation.url.https",
                "the URL has no scheme; only https URLs are allowed",
            ));
        }
        Err(e) => {
            return Err(refuse(
                "elicitation.url.syntax",
                format!("browsers cannot open this URL: {e}"),
            ));
        }
    };
    if parsed.scheme() != "https" {
        return Err(refuse(
            "elicitation.url.https",
            format!(
                "only https URLs are allowed, this one is {:?}",
                parsed.scheme()
            ),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || raw_userinfo(url) {
        return Err(refuse(
            "elicitation.url.userinfo",
            "the URL carries user information, user:password@",
        ));
    }
    let host = match parsed.host() {
        None => return Err(refuse("elicitation.url.syntax", "the URL has no host")),
        Some(Host::Ipv4(a)) if !rules.allow_ip => {
            return Err(refuse(
                "elicitation.url_allow_ip",
                format!("the host is the IP address {a}"),
            ));
        }
        Some(Host::Ipv6(a)) if !rules.allow_ip => {
            return Err(refuse(
                "elicitation.url_allow_ip",
                format!("the host is the IP address [{a}]"),
            ));
        }
        Some(Host::Domain(d)) => {
            let bare = d.strip_suffix('.').unwrap_or(d);
            if bare.is_empty() || bare.split('.').any(str::is_empty) {
                return Err(refuse(
                    "elicitation.url.syntax",
                    format!("the host {d:?} has an empty label"),
                ));
            }
            if (bare == "localhost" || bare.ends_with(".localhost")) && !rules.allow_localhost {
                return Err(refuse(
                    "elicitation.url_allow_localhost",
                    format!("the host {d} is localhost"),
                ));
            }
            if let Some(label) = bare.split('.').find(|l| imitates(l)) {
                return Err(refuse(
                    "elicitation.url.homograph",
                    format!(
                        "the host label {label} spells a name with letters that imitate others (mixed scripts or look-alikes)"
                    ),
                ));
            }
            d.to_string()
        }
        Some(h) => h.to_string(),
    };
    if parsed.as_str() != url && !only_root_path_missing(url, &parsed) {
        return Err(refuse(
            "elicitation.url.syntax",
            format!(
                "the URL is not written the way browsers serialize it (its {} would be rewritten); send the serialized form",
                first_difference(url, &parsed)
            ),
        ));
    }
    Ok(host)
}

/// Whether `url` differs from its serialization only by the `/` of an
/// empty path (`https://example.com` for `https://example.com/`): the one
/// rewrite that changes nothing of what is opened, and the way servers
/// commonly write a site's address.
fn only_root_path_missing(url: &str, parsed: &Url) -> bool {
    if parsed.path() != "/" {
        return false;
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if rest.contains('/') || rest.contains('\\') {
        return false;
    }
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let candidate = format!("{scheme}://{}/{}", &rest[..end], &rest[end..]);
    candidate == parsed.as_str()
}

/// Whether the authority as written (up to the first `/`, `\`, `?` or
/// `#` after `//`) holds an `@`, even one the standard drops
/// (`https://@host`, `https://:@host`).
fn raw_userinfo(url: &str) -> bool {
    let rest = url
        .split_once("://")
        .map_or("", |(_, r)| r.trim_start_matches(['/', '\\']));
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    rest[..end].contains('@')
}

/// The part of `parsed`'s serialization where `url` first differs from it.
fn first_difference(url: &str, parsed: &Url) -> &'static str {
    let ser = parsed.as_str();
    let at = url
        .bytes()
        .zip(ser.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(url.len().min(ser.len()));
    [
        (Position::AfterScheme, "scheme"),
        (Position::BeforeHost, "separator after the scheme"),
        (Position::AfterHost, "host"),
        (Position::AfterPort, "port"),
        (Position::AfterPath, "path"),
        (Position::AfterQuery, "query"),
    ]
    .into_iter()
    .find(|(p, _)| at < parsed[..*p].len())
    .map_or("fragment", |(_, name)| name)
}

/// Whether a punycode label decodes to letters that imitate another name:
/// scripts mixed beyond TS #39's highly restrictive level, or a label of
/// another script whose confusables skeleton is ASCII.
fn imitates(label: &str) -> bool {
    let Some(encoded) = label.strip_prefix("xn--") else {
        return false;
    };
    let Some(decoded) = idna::punycode::decode(encoded) else {
        // The URL parser accepted it, so this does not happen; refuse if
        // it ever does.
        return true;
    };
    let letters: String = decoded.into_iter().filter(|c| *c != '-').collect();
    if letters.detect_restriction_level() > RestrictionLevel::HighlyRestrictive {
        return true;
    }
    let skeleton: String = unicode_security::skeleton(&letters).collect();
    !letters.is_ascii() && skeleton.is_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: UrlRules = UrlRules {
        allow_ip: false,
        allow_localhost: false,
    };
    const OPEN: UrlRules = UrlRules {
        allow_ip: true,
        allow_localhost: true,
    };

    fn rule(url: &str) -> Option<&'static str> {
        check(url, STRICT).err().map(|r| r.rule)
    }

    /// `url` is refused as `elicitation.url.syntax` under strict and open
    /// rules alike.
    fn assert_syntax_refused(url: &str) {
        for rules in [STRICT, OPEN] {
            assert_eq!(
                rule_with(url, rules),
                Some("elicitation.url.syntax"),
                "{url:?}: {:?}",
                check(url, rules)
            );
        }
    }

    fn rule_with(url: &str, rules: UrlRules) -> Option<&'static str> {
        check(url, rules).err().map(|r| r.rule)
    }

    #[test]
    fn plain_https_urls_pass() {
        for (url, host) in [
            ("https://example.com/", "example.com"),
            ("https://example.com/Path?q=1#f", "example.com"),
            (
                "https://auth.example.com:8443/oauth?state=x",
                "auth.example.com",
            ),
            ("https://example.com./", "example.com."),
            ("https://xn--bcher-kva.example/", "xn--bcher-kva.example"),
            ("https://xn--r8jz45g.xn--zckzah/", "xn--r8jz45g.xn--zckzah"),
            ("https://127.0.0.1.nip.io/", "127.0.0.1.nip.io"),
            ("https://localhost.example.com/", "localhost.example.com"),
            ("https://mylocalhost/", "mylocalhost"),
            ("https://1password.com/", "1password.com"),
            ("https://example.com/@user?a=b@c", "example.com"),
            ("https://example.com/%7e/a%20b", "example.com"),
            // A site's address without the `/` of its empty path.
            ("https://example.com", "example.com"),
            ("https://example.com?q=1", "example.com"),
            ("https://example.com#top", "example.com"),
        ] {
            assert_eq!(check(url, STRICT).as_deref(), Ok(host), "{url}");
        }
    }

    #[test]
    fn schemes_other_than_https() {
        for url in [
            "http://example.com/",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,hi",
            "ftp://example.com/",
            "wss://example.com/",
            "example.com",
            "//example.com",
            "/path",
        ] {
            assert_eq!(rule(url), Some("elicitation.url.https"), "{url}");
        }
    }

    /// URLs a browser would rewrite before opening: refused, whatever the
    /// IP and localhost rules, because what the user is shown is not what
    /// the browser opens.
    #[test]
    fn urls_not_in_their_serialized_form_are_refused() {
        for url in [
            // Case, default port, missing path: what every browser
            // rewrites.
            "HTTPS://example.com/",
            "https://EXAMPLE.com/",
            "https://Example.COM/Path",
            "https://example.com:443/",
            "https://example.com:/",
            "https://EXAMPLE.com",
            "https://example.com:443",
            // Slashes browsers repair.
            "https:/example.com/",
            "https:example.com/",
            "https:\\\\example.com/",
            "https:/\\evil.com/",
            "https:///example.com/",
            "https://example.com\\path",
            // Whitespace and controls, which browsers strip or encode.
            " https://example.com/",
            "https://example.com/ ",
            "https://exa\tmple.com/",
            "https://example.com/\n",
            "https://exa\nmple.com/",
            "https://example.com/a b",
            "https://example.com/\u{7}",
            // Percent-encoding browsers decode (host) or add (path).
            "https://exa%6dple.com/",
            "https://example.com/ä",
            // Dot segments.
            "https://example.com/a/../b",
            "https://example.com/./b",
            // Unicode hosts: the serialized form is punycode.
            "https://bücher.example/",
            "https://例え.テスト/",
            "https://ｅｘａｍｐｌｅ.com/",
        ] {
            assert_syntax_refused(url);
        }
    }

    #[test]
    fn unparsable_urls_are_refused() {
        for url in [
            "https://",
            "https://exa mple.com/",
            "https://example.com:99999/",
            "https://example.com:8x/",
            "https://a..b/",
            "https://[::1/",
            "https://[fe80::1%25eth0]/",
            "https://example.0x/",
            "https://foo.123/",
            "https://ex<ample.com/",
        ] {
            assert_syntax_refused(url);
        }
    }

    #[test]
    fn userinfo_is_refused() {
        for url in [
            "https://user@example.com/",
            "https://user:pass@example.com/",
            "https://example.com@evil.com/",
            "https://:@example.com/",
            "https://@example.com/",
            // A hand-written parser reads good.com as the host; browsers
            // read evil.com.
            "https://good.com%2F@evil.com/",
            "https://good.com%5C@evil.com/",
        ] {
            for rules in [STRICT, OPEN] {
                assert_eq!(
                    rule_with(url, rules),
                    Some("elicitation.url.userinfo"),
                    "{url}"
                );
            }
        }
    }

    /// Where a hand-written parser and a browser disagree on the host, the
    /// browser's reading decides.
    #[test]
    fn hosts_are_read_the_way_browsers_read_them() {
        for (url, want) in [
            // The backslash ends the authority: the host is evil.com.
            ("https://evil.com\\@good.com/", "elicitation.url.syntax"),
            ("https://0x7f.1/", "elicitation.url_allow_ip"),
            ("https://[::1]/", "elicitation.url_allow_ip"),
            ("https://127.0.0.1./", "elicitation.url_allow_ip"),
            ("https://localhost./", "elicitation.url_allow_localhost"),
            (
                "https://ｌｏｃａｌｈｏｓｔ/",
                "elicitation.url_allow_localhost",
            ),
            (
                "https://local\u{AD}host/",
                "elicitation.url_allow_localhost",
            ),
            ("https://１２７.０.０.１/", "elicitation.url_allow_ip"),
            ("https://127。0。0。1/", "elicitation.url_allow_ip"),
            ("https://①②⑦.0.0.1/", "elicitation.url_allow_ip"),
        ] {
            assert_eq!(rule(url), Some(want), "{url:?}: {:?}", check(url, STRICT));
        }
        // Its serialized form, which passes, shows the host browsers open.
        assert_eq!(
            check("https://evil.com/@good.com/", STRICT).as_deref(),
            Ok("evil.com")
        );
    }

    #[test]
    fn ip_literals_are_refused_unless_allowed() {
        let ip_only = UrlRules {
            allow_ip: true,
            allow_localhost: false,
        };
        // In their serialized form they pass with url_allow_ip.
        for url in [
            "https://127.0.0.1/",
            "https://127.0.0.1:8080/x",
            "https://10.0.0.1/",
            "https://[::1]/",
            "https://[::1]:8443/",
            "https://[::ffff:7f00:1]/",
        ] {
            assert_eq!(rule(url), Some("elicitation.url_allow_ip"), "{url}");
            assert!(check(url, ip_only).is_ok(), "{url} with url_allow_ip");
        }
        // Every other spelling of an IPv4 address is one for the browser:
        // refused as an IP, and with url_allow_ip as not serialized.
        for url in [
            "https://127.1/",
            "https://2130706433/",
            "https://0x7f.0.0.1/",
            "https://0x7f000001/",
            "https://017700000001/",
            "https://1.2.3.4./",
            "https://[::ffff:127.0.0.1]/",
            "https://[0:0:0:0:0:0:0:1]/",
            "https://[::1]:443/",
        ] {
            assert_eq!(rule(url), Some("elicitation.url_allow_ip"), "{url}");
            assert_eq!(
                rule_with(url, ip_only),
                Some("elicitation.url.syntax"),
                "{url} with url_allow_ip"
            );
        }
    }

    #[test]
    fn localhost_is_refused_unless_allowed() {
        let local_only = UrlRules {
            allow_ip: false,
            allow_localhost: true,
        };
        for url in [
            "https://localhost/",
            "https://localhost:3000/",
            "https://localhost./",
            "https://foo.localhost/",
            "https://a.b.localhost./x",
        ] {
            assert_eq!(rule(url), Some("elicitation.url_allow_localhost"), "{url}");
            assert!(
                check(url, local_only).is_ok(),
                "{url} with url_allow_localhost"
            );
        }
        for url in ["https://LOCALHOST:3000/", "https://LocalHost.:8080"] {
            assert_eq!(rule(url), Some("elicitation.url_allow_localhost"), "{url}");
            assert_eq!(
                rule_with(url, local_only),
                Some("elicitation.url.syntax"),
                "{url} with url_allow_localhost"
            );
        }
    }

    #[test]
    fn idn_homographs_are_refused() {
        for url in [
            // аррӏе.com: Cyrillic letters only, looks like apple.com.
            "https://xn--80ak6aa92e.com/",
            // аpple.com: one Cyrillic letter among Latin ones.
            "https://xn--pple-43d.com/",
            // gооgle.com, раypal.com.
            "https://xn--ggle-55da.com/",
            "https://www.xn--ypal-43d9g.com/login",
        ] {
            for rules in [STRICT, OPEN] {
                assert_eq!(
                    rule_with(url, rules),
                    Some("elicitation.url.homograph"),
                    "{url}: {:?}",
                    check(url, rules)
                );
            }
        }
        // Their Unicode spelling is read as the same punycode host, and
        // refused the same way.
        assert_eq!(
            rule("https://аррӏе.com/"),
            Some("elicitation.url.homograph")
        );
        assert_eq!(
            rule("https://раypal.com/"),
            Some("elicitation.url.homograph")
        );
        // Real internationalized names pass in their serialized form.
        assert!(check("https://xn--bcher-kva.example/", STRICT).is_ok());
        assert!(check("https://xn--r8jz45g.xn--zckzah/", STRICT).is_ok());
    }

    #[test]
    fn refusals_never_quote_the_path_or_query() {
        for url in [
            "https://Example.com/reset?token=s3cr3t-value",
            "https://example.com:443/reset?token=s3cr3t-value",
            "https://user:s3cr3t-value@example.com/",
        ] {
            let r = check(url, STRICT).unwrap_err();
            assert!(!r.detail.contains("s3cr3t"), "{}", r.detail);
        }
    }
}
