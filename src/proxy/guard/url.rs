//! The URL check for URL-mode elicitation (2025-11-25): the host will open
//! the URL in a browser, so it is judged the way a browser would read it.
//!
//! Accepted: `https://host[:port][/path][?query][#fragment]` where `host` is
//! a domain name (IDN allowed). Refused:
//! - any other scheme, and the forms browsers repair (`https:/x`, `https:x`,
//!   backslashes, whitespace, control characters);
//! - userinfo (`https://user:pw@host`, also `https://good.com@evil.com`);
//! - IP-literal hosts unless `url_allow_ip`: `[::1]`, dotted quads, and
//!   every host a browser reads as IPv4 (`127.1`, `2130706433`,
//!   `0x7f.0.0.1`, a trailing dot): a host whose last label is a number;
//! - `localhost`, `localhost.` and `*.localhost` unless
//!   `url_allow_localhost`;
//! - percent-encoded hosts and hosts written with Unicode compatibility
//!   characters that browsers fold to ASCII (fullwidth `ｌｏｃａｌｈｏｓｔ`,
//!   ideographic full stops, invisible characters), since those could hide
//!   an IP address or localhost.

/// What a URL check found wrong, with the rule that refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRefusal {
    /// The rule id (see `policy/README.md`).
    pub rule: &'static str,
    /// What is wrong.
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

/// Check `url`; on success returns its host (for the audit log: never the
/// path or query, which may carry tokens).
pub fn check(url: &str, rules: UrlRules) -> Result<String, UrlRefusal> {
    if let Some(c) = url
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == '\\')
    {
        return Err(refuse(
            "elicitation.url.syntax",
            format!("the URL contains {c:?}, which browsers rewrite"),
        ));
    }
    let scheme_end = url.find(':').ok_or_else(|| {
        refuse(
            "elicitation.url.https",
            "the URL has no scheme; only https URLs are allowed",
        )
    })?;
    let scheme = &url[..scheme_end];
    if !scheme.eq_ignore_ascii_case("https") {
        return Err(refuse(
            "elicitation.url.https",
            format!("only https URLs are allowed, this one is {scheme:?}"),
        ));
    }
    let Some(rest) = url[scheme_end + 1..].strip_prefix("//") else {
        return Err(refuse(
            "elicitation.url.syntax",
            "an https URL must start with https://, browsers repair other forms",
        ));
    };
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    if authority.contains('@') {
        return Err(refuse(
            "elicitation.url.userinfo",
            "the URL carries user information, user:password@",
        ));
    }
    let (host, port) = split_host_port(authority)?;
    if let Some(p) = port
        && !(p.is_empty() || (p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()))
    {
        return Err(refuse(
            "elicitation.url.syntax",
            format!("the port {p:?} is not a port number"),
        ));
    }
    if host.is_empty() {
        return Err(refuse("elicitation.url.syntax", "the URL has no host"));
    }
    if host.starts_with('[') {
        if rules.allow_ip {
            return Ok(host.to_string());
        }
        return Err(refuse(
            "elicitation.url_allow_ip",
            format!("the host {host} is an IP address"),
        ));
    }
    if host.contains('%') {
        return Err(refuse(
            "elicitation.url.syntax",
            "the host is percent-encoded (browsers decode it); write it plainly",
        ));
    }
    if let Some(c) = host.chars().find(|c| folds_to_ascii(*c)) {
        return Err(refuse(
            "elicitation.url.syntax",
            format!(
                "the host contains U+{:04X}, a character browsers rewrite; write the host in its normal form",
                c as u32
            ),
        ));
    }
    let lower = host.to_lowercase();
    let bare = lower.strip_suffix('.').unwrap_or(&lower);
    if bare.is_empty() || bare.split('.').any(str::is_empty) {
        return Err(refuse(
            "elicitation.url.syntax",
            format!("the host {host:?} has an empty label"),
        ));
    }
    if ends_in_a_number(bare) {
        if rules.allow_ip {
            return Ok(lower);
        }
        return Err(refuse(
            "elicitation.url_allow_ip",
            format!(
                "the host {host} is an IP address: browsers read a host ending in a number as IPv4"
            ),
        ));
    }
    if (bare == "localhost" || bare.ends_with(".localhost")) && !rules.allow_localhost {
        return Err(refuse(
            "elicitation.url_allow_localhost",
            format!("the host {host} is localhost"),
        ));
    }
    Ok(lower)
}

/// Split an authority into host and optional port text.
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), UrlRefusal> {
    if authority.starts_with('[') {
        let Some(close) = authority.find(']') else {
            return Err(refuse(
                "elicitation.url.syntax",
                "unterminated IPv6 address in the host",
            ));
        };
        let host = &authority[..=close];
        let after = &authority[close + 1..];
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(p))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(refuse(
                "elicitation.url.syntax",
                "unexpected text after the IPv6 address",
            )),
        };
    }
    Ok(match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    })
}

/// The WHATWG URL standard's "ends in a number": the last label (after
/// dropping one trailing dot) is all digits, or `0x` followed by hex
/// digits. Such a host is parsed as IPv4 by browsers.
fn ends_in_a_number(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or(host);
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match last.strip_prefix("0x") {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

/// Characters that IDNA mapping (UTS #46, NFKC) turns into ASCII letters,
/// digits or dots, or removes: hosts using them are refused rather than
/// mapped here.
fn folds_to_ascii(c: char) -> bool {
    matches!(c as u32,
        0x00AA | 0x00B2 | 0x00B3 | 0x00B9 | 0x00BA | 0x00AD // ª ² ³ ¹ º, soft hyphen
        | 0x034F                // combining grapheme joiner
        | 0x180B..=0x180F       // Mongolian variation selectors
        | 0x200B..=0x200F       // zero-width characters
        | 0x2024                // one dot leader
        | 0x2060..=0x2064       // word joiner, invisible operators
        | 0x2070..=0x209F       // superscripts and subscripts
        | 0x2100..=0x214F       // letterlike symbols
        | 0x2150..=0x218F       // number forms (Roman numerals)
        | 0x2460..=0x24FF       // enclosed alphanumerics
        | 0x3002                // ideographic full stop
        | 0xFE00..=0xFE0F       // variation selectors
        | 0xFE50..=0xFE6F       // small form variants
        | 0xFEFF                // zero-width no-break space
        | 0xFF00..=0xFFEF       // fullwidth and halfwidth forms
        | 0x1D400..=0x1D7FF     // mathematical alphanumeric symbols
        | 0x1F100..=0x1F1FF     // enclosed alphanumeric supplement
        | 0xE0000..=0xE0FFF     // tags, variation selectors supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: UrlRules = UrlRules {
        allow_ip: false,
        allow_localhost: false,
    };

    fn rule(url: &str) -> Option<&'static str> {
        check(url, STRICT).err().map(|r| r.rule)
    }

    #[test]
    fn plain_https_urls_pass() {
        for (url, host) in [
            ("https://example.com", "example.com"),
            ("https://example.com/", "example.com"),
            ("HTTPS://Example.COM/Path?q=1#f", "example.com"),
            (
                "https://auth.example.com:8443/oauth?state=x",
                "auth.example.com",
            ),
            ("https://example.com.", "example.com."),
            ("https://bücher.example/", "bücher.example"),
            ("https://例え.テスト/", "例え.テスト"),
            ("https://xn--bcher-kva.example/", "xn--bcher-kva.example"),
            ("https://127.0.0.1.nip.io/", "127.0.0.1.nip.io"),
            ("https://localhost.example.com/", "localhost.example.com"),
            ("https://mylocalhost/", "mylocalhost"),
            ("https://1password.com/", "1password.com"),
            ("https://example.com:/", "example.com"),
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
            "ftp://example.com",
            "example.com",
            "//example.com",
        ] {
            assert_eq!(rule(url), Some("elicitation.url.https"), "{url}");
        }
    }

    #[test]
    fn forms_browsers_repair_are_refused() {
        for url in [
            "https:/example.com",
            "https:example.com",
            "https:\\\\example.com",
            "https://example.com\\@evil.com",
            "https://exa mple.com",
            " https://example.com",
            "https://example.com/\n",
            "https://",
            "https:///path",
            "https://example.com:99999/",
            "https://example.com:8x/",
            "https://exa%6dple.com/",
            "https://a..b/",
            "https://[::1/",
        ] {
            assert!(
                matches!(rule(url), Some("elicitation.url.syntax")),
                "{url}: {:?}",
                check(url, STRICT)
            );
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
        ] {
            assert_eq!(rule(url), Some("elicitation.url.userinfo"), "{url}");
        }
        // An @ in the path or query is not userinfo.
        assert!(check("https://example.com/@user?a=b@c", STRICT).is_ok());
    }

    #[test]
    fn ip_literals_are_refused_unless_allowed() {
        for url in [
            "https://127.0.0.1/",
            "https://127.0.0.1:8080/x",
            "https://10.0.0.1",
            "https://[::1]",
            "https://[::1]/",
            "https://[::1]:443/",
            "https://[::ffff:127.0.0.1]/",
            "https://[fe80::1%25eth0]/",
            "https://127.1/",
            "https://2130706433/",
            "https://0x7f.0.0.1/",
            "https://0x7f000001/",
            "https://017700000001/",
            "https://1.2.3.4./",
            "https://example.0x/",
            "https://foo.123/",
        ] {
            assert_eq!(rule(url), Some("elicitation.url_allow_ip"), "{url}");
            let allowed = UrlRules {
                allow_ip: true,
                allow_localhost: false,
            };
            assert!(check(url, allowed).is_ok(), "{url} with url_allow_ip");
        }
    }

    #[test]
    fn localhost_is_refused_unless_allowed() {
        for url in [
            "https://localhost/",
            "https://LOCALHOST:3000/",
            "https://localhost./",
            "https://localhost.",
            "https://LocalHost.:8080",
            "https://foo.localhost/",
            "https://a.b.localhost./x",
        ] {
            assert_eq!(rule(url), Some("elicitation.url_allow_localhost"), "{url}");
            let allowed = UrlRules {
                allow_ip: false,
                allow_localhost: true,
            };
            assert!(
                check(url, allowed).is_ok(),
                "{url} with url_allow_localhost"
            );
        }
    }

    #[test]
    fn hosts_hidden_by_compatibility_characters() {
        for url in [
            "https://ｌｏｃａｌｈｏｓｔ/",
            "https://１２７.０.０.１/",
            "https://127。0。0。1/",
            "https://local\u{AD}host/",
            "https://local\u{200B}host/",
            "https://𝐥𝐨𝐜𝐚𝐥𝐡𝐨𝐬𝐭/",
            "https://①②⑦.0.0.1/",
        ] {
            assert_eq!(rule(url), Some("elicitation.url.syntax"), "{url}");
        }
    }
}
