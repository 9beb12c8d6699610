//! Sensitive-data detection for elicitation forms: does a field name, a
//! title, a description or the message ask for a password, a key, a token,
//! a card number and the like?
//!
//! Matching is on normalized words, not on raw substrings, so that
//! `apiKey`, `api_key`, `API-KEY`, `ApiKey` and `apikey` all match the term
//! "api key", while "tokenizer" does not match "token" and "secretary" does
//! not match "secret":
//!
//! - text is split into words at every character that is not a letter or a
//!   digit, and at camelCase boundaries (`apiKey` → `api key`, `APIKey` →
//!   `api key`); words are case-folded;
//! - a term matches when some run of consecutive words, glued together,
//!   equals the term glued together (so "api key" matches `apikey`,
//!   `api_key` and `api key`; "password" matches `pass word`), or equals it
//!   plus a plural `s`/`es`;
//! - terms in scripts written without spaces between words (Chinese,
//!   Japanese), or where words inflect (Korean particles, Russian cases),
//!   match as substrings of the case-folded text;
//! - a few built-in terms have exceptions: phrases in which the term is
//!   harmless ("max tokens", "token count": sampling budgets, not
//!   credentials).
//!
//! Text and terms are folded the same way before they are compared, so that
//! what looks like a term to a person matches it ([`fold`]):
//!
//! - invisible characters are dropped before words are split: format
//!   characters (General Category Cf: zero-width space and joiners, soft
//!   hyphen, word joiner, BOM, bidi controls, tag characters), nonspacing
//!   and enclosing marks, unassigned code points (`pass\u{200B}word` is
//!   "password");
//! - NFKC (`unicode-normalization`): fullwidth, mathematical and circled
//!   letters become plain ones (`ｐａｓｓｗｏｒｄ`);
//! - each word is lowercased, mapped to its confusables skeleton (Unicode
//!   TS #39, `unicode-security`: Cyrillic `раssword`, Greek `ΡΑSSWΟRD`,
//!   the digit in `passw0rd`), stripped of the marks the skeleton
//!   decomposed (`pässwörd`), and lowercased again.
//!
//! Deliberately not terms of free text: "pin" alone (the reference MCP
//! server's own description says "do not give us your phone number, pin,
//! ..."), "key" alone (keyboard, key points), "pass" alone (passport,
//! boarding pass). "PIN code", "PIN number", "api key", "private key" are
//! terms. Short names that mean a secret (`pw`, `pin`, `otp`, `2fa`, `cvv`,
//! `ssn`, ...) are terms of form field names only, as whole words of the
//! identifier ([`Terms::find_field_name`]): `userPin` and `user_pw` match,
//! `pinned` and `spinner` do not.

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// How a term is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Runs of whole words (see the module docs).
    Words,
    /// As [`Mode::Words`], or a word that ends with the glued term
    /// (`accesstoken`, `userpassword`, `clientsecret`).
    WordsOrSuffix,
    /// A word that starts with the term (German compounds:
    /// "Passwortänderung").
    Prefix,
    /// Anywhere in the case-folded text.
    Substring,
}

/// A built-in term: its family, the term, how it matches, and phrases in
/// which it is harmless.
struct Builtin {
    family: &'static str,
    term: &'static str,
    mode: Mode,
    except: &'static [&'static str],
}

/// A built-in term matched as `mode` says, with no exceptions.
const fn builtin(family: &'static str, term: &'static str, mode: Mode) -> Builtin {
    Builtin {
        family,
        term,
        mode,
        except: &[],
    }
}

const fn w(family: &'static str, term: &'static str) -> Builtin {
    builtin(family, term, Mode::Words)
}

const fn ws(family: &'static str, term: &'static str) -> Builtin {
    builtin(family, term, Mode::WordsOrSuffix)
}

const fn p(family: &'static str, term: &'static str) -> Builtin {
    builtin(family, term, Mode::Prefix)
}

const fn s(family: &'static str, term: &'static str) -> Builtin {
    builtin(family, term, Mode::Substring)
}

const TOKEN_EXCEPT: &[&str] = &[
    "max tokens",
    "max token",
    "maximum tokens",
    "maximum token",
    "many tokens",
    "number of tokens",
    "token count",
    "token counts",
    "token limit",
    "token limits",
    "token budget",
    "token usage",
];

/// The maintained list. Families name what a term protects (for the
/// refusal message and the tests).
const BUILTIN: &[Builtin] = &[
    // Passwords and passphrases.
    ws("password", "password"),
    ws("password", "passwd"),
    ws("password", "pwd"),
    ws("password", "passphrase"),
    ws("password", "passcode"),
    w("password", "pass phrase"),
    // Other languages (cheap ones).
    w("password", "contraseña"),
    w("password", "contrasena"),
    w("password", "mot de passe"),
    p("password", "passwort"),
    p("password", "kennwort"),
    w("password", "senha"),
    p("password", "wachtwoord"),
    w("password", "lösenord"),
    w("password", "hasło"),
    w("password", "haslo"),
    w("password", "şifre"),
    w("password", "mật khẩu"),
    s("password", "парол"),
    s("password", "密码"),
    s("password", "密碼"),
    s("password", "口令"),
    s("password", "パスワード"),
    s("password", "暗証番号"),
    s("password", "비밀번호"),
    s("password", "كلمة المرور"),
    s("password", "סיסמה"),
    s("password", "पासवर्ड"),
    // Secrets, tokens, keys, credentials.
    ws("secret", "secret"),
    w("secret", "credential"),
    Builtin {
        family: "token",
        term: "token",
        mode: Mode::WordsOrSuffix,
        except: TOKEN_EXCEPT,
    },
    w("token", "bearer token"),
    w("token", "jwt"),
    w("token", "session cookie"),
    w("token", "session id"),
    w("key", "api key"),
    ws("key", "apikey"),
    w("key", "access key"),
    w("key", "private key"),
    ws("key", "privatekey"),
    w("key", "secret key"),
    w("key", "signing key"),
    w("key", "encryption key"),
    w("key", "ssh key"),
    w("key", "pgp key"),
    w("key", "gpg key"),
    // One-time and second-factor codes.
    w("one-time code", "otp"),
    w("one-time code", "totp"),
    w("one-time code", "2fa code"),
    w("one-time code", "mfa code"),
    w("one-time code", "verification code"),
    w("one-time code", "security code"),
    w("one-time code", "auth code"),
    w("one-time code", "authentication code"),
    w("one-time code", "recovery code"),
    w("one-time code", "backup code"),
    w("one-time code", "pin code"),
    w("one-time code", "pin number"),
    // Payment cards.
    w("payment card", "credit card"),
    w("payment card", "debit card"),
    w("payment card", "card number"),
    w("payment card", "cvv"),
    w("payment card", "cvc"),
    // Government identifiers.
    w("national id", "ssn"),
    w("national id", "social security"),
    w("national id", "social insurance number"),
    w("national id", "passport number"),
    w("national id", "tax id"),
    // Wallets.
    w("wallet", "seed phrase"),
    w("wallet", "recovery phrase"),
    w("wallet", "mnemonic"),
    // Bank accounts.
    w("bank account", "bank account"),
    w("bank account", "iban"),
    w("bank account", "routing number"),
    w("bank account", "sort code"),
];

/// Short names that mean a secret when they are a whole word of a form
/// field's name (never matched in free text, where "pin this note" and
/// "enable 2FA?" are harmless).
const SHORT_NAMES: &[(&str, &str)] = &[
    ("password", "pw"),
    ("password", "pwd"),
    ("password", "passwd"),
    ("one-time code", "pin"),
    ("one-time code", "otp"),
    ("one-time code", "totp"),
    ("one-time code", "hotp"),
    ("one-time code", "2fa"),
    ("one-time code", "mfa"),
    ("payment card", "cvv"),
    ("payment card", "ccv"),
    ("payment card", "cvc"),
    ("national id", "ssn"),
];

/// Every built-in term with its family, for documentation and tests.
pub fn builtin_terms() -> impl Iterator<Item = (&'static str, &'static str)> {
    BUILTIN.iter().map(|b| (b.family, b.term))
}

/// A sensitive term found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The term as listed.
    pub term: String,
    /// Its family ("password", "token", ...; "policy" for the policy's own
    /// `sensitive_terms`).
    pub family: &'static str,
}

/// The terms a [`Terms::find`] looks for: the built-in list plus the
/// policy's.
#[derive(Debug, Clone, Default)]
pub struct Terms {
    extra: Vec<String>,
}

impl Terms {
    /// The built-in list plus `extra` (the policy's `sensitive_terms`).
    pub fn new(extra: &[String]) -> Terms {
        Terms {
            extra: extra
                .iter()
                .filter(|t| !words(t).is_empty())
                .cloned()
                .collect(),
        }
    }

    /// The first sensitive term in the name of a form field whose value is
    /// typed in (a string or a number): the terms of [`Terms::find`], and the
    /// short names that mean a secret (`pw`, `pin`, `2fa`, ...) as whole
    /// words of the identifier.
    pub fn find_field_name(&self, name: &str) -> Option<Hit> {
        if let Some(h) = self.find(name) {
            return Some(h);
        }
        let tw = folded_words(name);
        SHORT_NAMES
            .iter()
            .find(|(_, term)| !matches(&tw, term, false).is_empty())
            .map(|(family, term)| Hit {
                term: term.to_string(),
                family,
            })
    }

    /// The first sensitive term in `text`, if any. Text and terms are
    /// compared folded (see the module docs).
    ///
    /// # Security
    ///
    /// Invisible characters, compatibility forms (fullwidth, mathematical
    /// letters) and look-alike letters of other scripts do not hide a term.
    /// The cost is linear in the length of `text`.
    pub fn find(&self, text: &str) -> Option<Hit> {
        let prepared = prepare(text);
        let mut tw = split(&prepared);
        if tw.is_empty() {
            return None;
        }
        for w in &mut tw {
            w.text = fold_word(&w.text);
        }
        let folded = fold_word(&prepared);
        for b in BUILTIN {
            let found = match b.mode {
                Mode::Words | Mode::WordsOrSuffix => {
                    let suffix = b.mode == Mode::WordsOrSuffix;
                    let found = matches(&tw, b.term, suffix);
                    if found.is_empty() || b.except.is_empty() {
                        !found.is_empty()
                    } else {
                        let harmless = covered_words(&tw, b.except);
                        found
                            .into_iter()
                            .any(|r| !r.into_iter().all(|i| harmless[i]))
                    }
                }
                Mode::Prefix => {
                    let term = fold(b.term);
                    tw.iter().any(|w| w.text.starts_with(term.as_str()))
                }
                Mode::Substring => folded.contains(fold(b.term).as_str()),
            };
            if found {
                return Some(Hit {
                    term: b.term.to_string(),
                    family: b.family,
                });
            }
        }
        for term in &self.extra {
            let found = if term.chars().any(spaceless_script) {
                folded.contains(fold(term).as_str())
            } else {
                !matches(&tw, term, false).is_empty()
            };
            if found {
                return Some(Hit {
                    term: term.clone(),
                    family: "policy",
                });
            }
        }
        None
    }
}

/// Characters that do not show, or show only as part of another: dropped
/// before words are split. Format characters (Cf), nonspacing and
/// enclosing marks (Mn, Me: NFKC has already composed the letters that
/// have a precomposed form), and unassigned code points (Cn, among them
/// the reserved default-ignorable ones).
fn invisible(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::Format
            | GeneralCategory::NonspacingMark
            | GeneralCategory::EnclosingMark
            | GeneralCategory::Unassigned
    )
}

/// `text` without invisible characters, in NFKC; case is kept (word
/// splitting reads it).
fn prepare(text: &str) -> String {
    // ASCII is its own NFKC and has no invisible characters.
    if text.is_ascii() {
        return text.to_string();
    }
    text.chars()
        .filter(|c| !invisible(*c))
        .nfkc()
        .filter(|c| !invisible(*c))
        .collect()
}

/// The folded form of one word (as written, case kept): each character is
/// replaced by its TS #39 confusables prototype (the skeleton, which also
/// drops default-ignorable code points), marks are dropped, and the result
/// is lowercased.
///
/// The skeleton is case-sensitive (`I` is confusable with `l`, `i` is not;
/// `m` with `rn`, `M` is not), and matching here is not. So an ASCII
/// character is lowercased before its skeleton is taken, a character of
/// another script after (Greek `Ι` and `Μ` look like `I` and `M`, not like
/// `ι` and `μ`), and in the result `l` and `i` are one letter: `ΑΡΙ`, `API`,
/// `APl` and `api` all fold to the same word.
fn fold_word(word: &str) -> String {
    let table = ascii_folds();
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        if c.is_ascii() {
            out.push_str(&table[c as usize]);
            continue;
        }
        for x in unicode_security::skeleton(c.encode_utf8(&mut [0; 4])) {
            if x.is_ascii() {
                out.push_str(&table[x as usize]);
            } else if !matches!(
                x.general_category(),
                GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
            ) {
                out.extend(x.to_lowercase());
            }
        }
    }
    out
}

/// The fold of each ASCII character, computed once from the skeleton
/// (lowercased first, then `l` read as `i`: see [`fold_word`]).
fn ascii_folds() -> &'static [String] {
    static TABLE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0u8..128)
            .map(|b| {
                let lower = char::from(b).to_ascii_lowercase();
                unicode_security::skeleton(lower.encode_utf8(&mut [0; 4]))
                    .map(|x| match x.to_ascii_lowercase() {
                        'l' => 'i',
                        x => x,
                    })
                    .collect()
            })
            .collect()
    })
}

/// `text` folded as a whole, for terms matched as substrings: invisible
/// characters dropped, NFKC, then `fold_word`.
pub fn fold(text: &str) -> String {
    fold_word(&prepare(text))
}

/// The words of `text` after [`prepare`], split as [`words`] splits them,
/// each folded by [`fold_word`].
fn folded_words(text: &str) -> Vec<Word> {
    let mut w = split(&prepare(text));
    for x in &mut w {
        x.text = fold_word(&x.text);
    }
    w
}

/// Characters of scripts that do not separate words with spaces.
fn spaceless_script(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK compatibility ideographs
    )
}

/// A case-folded word and the chunk (whitespace- or punctuation-separated
/// part of the text) it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word, case-folded.
    pub text: String,
    /// Index of its chunk: words of one chunk were written together
    /// (`api_key`, `apiKey`, `API-KEY`).
    pub chunk: usize,
}

/// Split `text` into case-folded words: at every character that is not
/// alphanumeric, at camelCase boundaries and between letters and digits.
/// `_` and `-` separate words inside one chunk; anything else that is not
/// alphanumeric also ends the chunk.
pub fn words(text: &str) -> Vec<Word> {
    let mut w = split(text);
    for x in &mut w {
        x.text = x.text.to_lowercase();
    }
    w
}

/// [`words`], with each word as written (case kept).
fn split(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chunk = 0usize;
    let chars: Vec<char> = text.chars().collect();
    let mut push = |cur: &mut String, chunk: usize| {
        if !cur.is_empty() {
            out.push(Word {
                text: std::mem::take(cur),
                chunk,
            });
        }
    };
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            push(&mut cur, chunk);
            if c != '_' && c != '-' {
                chunk += 1;
            }
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|j| chars.get(j))
            && !cur.is_empty()
        {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (c.is_uppercase() && prev.is_lowercase())
                // FOOBar: the B starts a word when a lowercase letter follows.
                || (c.is_uppercase() && prev.is_uppercase() && next_lower)
                || (c.is_numeric() != prev.is_numeric());
            if boundary {
                push(&mut cur, chunk);
            }
        }
        cur.push(c);
    }
    push(&mut cur, chunk);
    out
}

/// Word ranges `[start, end)` of `tw` where `term` occurs: its words in
/// sequence (the last one may carry a plural `s`/`es`), or words of one
/// chunk that glued together spell the glued term (plural too), or, with
/// `suffix`, one word that ends with the glued term.
fn matches(tw: &[Word], term: &str, suffix: bool) -> Vec<std::ops::Range<usize>> {
    let term: Vec<String> = folded_words(term).into_iter().map(|w| w.text).collect();
    let glued: String = term.concat();
    if glued.is_empty() {
        return Vec::new();
    }
    let plural = |a: &str, b: &str| {
        a == b || a.strip_suffix('s') == Some(b) || a.strip_suffix("es") == Some(b)
    };
    let mut out = Vec::new();
    for start in 0..tw.len() {
        // In sequence.
        if start + term.len() <= tw.len() {
            let n = term.len();
            let ok = (0..n).all(|k| {
                let w = &tw[start + k].text;
                if k + 1 == n {
                    plural(w, &term[k])
                } else {
                    *w == term[k]
                }
            });
            if ok {
                out.push(start..start + n);
            }
        }
        // Glued within a chunk: `off` bytes of `glued` are matched so far
        // (always at a char boundary: the sum of whole matched words).
        let mut off = 0;
        for end in start..tw.len() {
            if tw[end].chunk != tw[start].chunk {
                break;
            }
            let w = tw[end].text.as_str();
            let rest = &glued[off..];
            if plural(w, rest) {
                out.push(start..end + 1);
            }
            if w.len() < rest.len() && rest.starts_with(w) {
                off += w.len();
            } else {
                break;
            }
        }
        // One word ending with the term.
        if suffix {
            let w = &tw[start].text;
            if w.len() > glued.len()
                && (w.ends_with(glued.as_str())
                    || w.strip_suffix('s')
                        .is_some_and(|x| x.ends_with(glued.as_str())))
            {
                out.push(start..start + 1);
            }
        }
    }
    out
}

/// Which words of `tw` lie inside an occurrence of one of the `except`
/// phrases (computed once per term, so a long text stays linear).
fn covered_words(tw: &[Word], except: &[&str]) -> Vec<bool> {
    let mut covered = vec![false; tw.len()];
    for e in except {
        for r in matches(tw, e, false) {
            for c in &mut covered[r] {
                *c = true;
            }
        }
    }
    covered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(text: &str) -> Option<String> {
        Terms::new(&[]).find(text).map(|h| h.term)
    }

    fn texts(s: &str) -> Vec<String> {
        words(s).into_iter().map(|w| w.text).collect()
    }

    #[test]
    fn words_split_case_digits_and_separators() {
        assert_eq!(texts("apiKey"), ["api", "key"]);
        assert_eq!(texts("APIKey"), ["api", "key"]);
        assert_eq!(texts("api_key"), ["api", "key"]);
        assert_eq!(texts("API-KEY"), ["api", "key"]);
        assert_eq!(texts("userPassword2"), ["user", "password", "2"]);
        assert_eq!(texts("2faCode"), ["2", "fa", "code"]);
        assert_eq!(texts("  Mot de passe : "), ["mot", "de", "passe"]);
        assert_eq!(texts("HTTPServerURL"), ["http", "server", "url"]);
        assert_eq!(texts("ÜberPasswort"), ["über", "passwort"]);
        assert!(texts("").is_empty());
        // `_` and `-` keep a chunk together; spaces and punctuation end it.
        let c: Vec<usize> = words("a_b-c d,e").iter().map(|w| w.chunk).collect();
        assert_eq!(c, [0, 0, 0, 1, 2]);
    }

    #[test]
    fn every_family_is_found() {
        for (text, family) in [
            ("Your password", "password"),
            ("passphrase", "password"),
            ("Enter the passcode", "password"),
            ("adminPwd", "password"),
            ("client_secret", "secret"),
            ("clientsecret", "secret"),
            ("AWS credentials", "secret"),
            ("GitHub token", "token"),
            ("accessToken", "token"),
            ("accesstoken", "token"),
            ("Bearer token", "token"),
            ("JWT", "token"),
            ("apiKey", "key"),
            ("OPENAI_API_KEY", "key"),
            ("privateKey", "key"),
            ("SSH key", "key"),
            ("OTP", "one-time code"),
            ("2FA code", "one-time code"),
            ("2faCode", "one-time code"),
            ("verificationCode", "one-time code"),
            ("PIN code", "one-time code"),
            ("pincode", "one-time code"),
            ("creditCardNumber", "payment card"),
            ("card_number", "payment card"),
            ("CVV", "payment card"),
            ("cvc", "payment card"),
            ("SSN", "national id"),
            ("Social Security Number", "national id"),
            ("seed phrase", "wallet"),
            ("seedPhrase", "wallet"),
            ("BIP39 mnemonic", "wallet"),
            ("bankAccount", "bank account"),
            ("IBAN", "bank account"),
            ("routing_number", "bank account"),
        ] {
            let h = Terms::new(&[]).find(text);
            assert_eq!(h.as_ref().map(|h| h.family), Some(family), "{text}: {h:?}");
        }
    }

    #[test]
    fn every_builtin_term_finds_itself() {
        for (family, term) in builtin_terms() {
            let h = Terms::new(&[]).find(term);
            assert!(h.is_some(), "{family}: {term}");
            assert!(
                Terms::new(&[])
                    .find(&format!("Please enter your {term}:"))
                    .is_some(),
                "{term} in a sentence"
            );
        }
    }

    #[test]
    fn other_languages() {
        for text in [
            "Contraseña",
            "contrasena",
            "Mot de passe",
            "Passwort",
            "Passwortänderung",
            "Kennwort",
            "Senha do banco",
            "Введите пароль",
            "пароля",
            "请输入密码",
            "密碼",
            "パスワードを入力",
            "비밀번호를 입력하세요",
            "Wachtwoord",
            "Lösenord",
            "Hasło",
        ] {
            assert!(
                Terms::new(&[])
                    .find(text)
                    .is_some_and(|h| h.family == "password"),
                "{text}"
            );
        }
    }

    #[test]
    fn case_and_separator_variants_of_one_term() {
        for text in [
            "apikey",
            "apiKey",
            "ApiKey",
            "APIKey",
            "API_KEY",
            "api-key",
            "api key",
            "Api Key",
            "apiKeys",
            "x-api-key",
            "APIKEY",
        ] {
            assert_eq!(hit(text).as_deref(), Some("api key"), "{text}");
        }
        for text in [
            "password",
            "Password",
            "PASSWORD",
            "userPassword",
            "user_password",
            "passwords",
            "newPassword2",
            "userpassword",
            "Password:",
        ] {
            assert_eq!(hit(text).as_deref(), Some("password"), "{text}");
        }
    }

    #[test]
    fn harmless_words_are_not_flagged() {
        for text in [
            "tokenizer",
            "Tokenize the input",
            "secretary",
            "Your secretary's name",
            "passport photo style",
            "boarding pass",
            "keyboard layout",
            "key points",
            "pinned tabs",
            "Pin this note?",
            "do not give us your phone number, pin, or other sensitive info",
            "spinning",
            "hotpot",
            "Max tokens for the summary",
            "maxTokens",
            "max_tokens",
            "How many tokens may the answer use?",
            "token count",
            "Send a message to Ken",
            "torchbearer",
            "Your full, legal name",
            "Email address",
            "Favorite first line of a story",
            "Compassion",
            "Enable 2FA?",
        ] {
            assert_eq!(hit(text), None, "{text}");
        }
        // A plural counts; a longer word starting with the term does not.
        assert_eq!(hit("mnemonics").as_deref(), Some("mnemonic"));
        assert_eq!(hit("tokens").as_deref(), Some("token"));
        assert_eq!(hit("passwordless"), None);
        // The exception covers only its phrase.
        assert_eq!(
            hit("max tokens and your GitHub token").as_deref(),
            Some("token")
        );
    }

    #[test]
    fn long_texts_are_judged_whole() {
        let harmless = "max tokens ".repeat(50_000);
        assert_eq!(hit(&harmless), None);
        let mut bad = harmless.clone();
        bad.push_str("and the admin token");
        assert_eq!(hit(&bad).as_deref(), Some("token"));
        // Text that is not ASCII takes the slower folding path.
        let foreign = "ｍａｘ tokens имя\u{200B}пользователя ".repeat(4_000);
        assert_eq!(hit(&foreign), None);
        let mut bad = foreign;
        bad.push_str("and the admin ｔｏｋｅｎ");
        assert_eq!(hit(&bad).as_deref(), Some("token"));
    }

    #[test]
    fn policy_terms() {
        let t = Terms::new(&[
            "license key".into(),
            "account number".into(),
            "社員番号".into(),
        ]);
        let h = t.find("accountNumber").unwrap();
        assert_eq!((h.term.as_str(), h.family), ("account number", "policy"));
        assert_eq!(t.find("Account-Numbers").unwrap().term, "account number");
        assert_eq!(t.find("LICENSE_KEY").unwrap().term, "license key");
        assert_eq!(t.find("あなたの社員番号").unwrap().term, "社員番号");
        assert!(t.find("account name").is_none());
        assert!(Terms::new(&[]).find("accountNumber").is_none());
    }

    // -----------------------------------------------------------------
    // Text folded before matching: invisible characters, width and
    // compatibility forms, look-alike letters.

    fn field(name: &str) -> Option<String> {
        Terms::new(&[]).find_field_name(name).map(|h| h.term)
    }

    #[test]
    fn invisible_characters_do_not_hide_a_term() {
        for text in [
            "pass\u{200B}word",         // zero-width space
            "pass\u{AD}word",           // soft hyphen
            "pass\u{2060}word",         // word joiner
            "pass\u{200C}word",         // zero-width non-joiner
            "pass\u{200D}word",         // zero-width joiner
            "pass\u{FEFF}word",         // zero-width no-break space (BOM)
            "pass\u{202E}word",         // right-to-left override
            "pass\u{2066}word\u{2069}", // isolates
            "pass\u{E0041}word",        // a tag character
            "pass\u{180E}word",         // Mongolian vowel separator
            "pass\u{3164}word",         // Hangul filler
            "pass\u{034F}word",         // combining grapheme joiner
            "Your pass\u{AD}word, please",
            "api\u{200B}Key",
            "tok\u{2060}en",
            "s\u{200B}e\u{200B}c\u{200B}r\u{200B}e\u{200B}t",
        ] {
            assert!(hit(text).is_some(), "{text:?}");
        }
    }

    #[test]
    fn width_and_compatibility_forms_do_not_hide_a_term() {
        for text in [
            "ｐａｓｓｗｏｒｄ",
            "ＰＡＳＳＷＯＲＤ",
            "ａｐｉＫｅｙ",
            "𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝",
            "𝖕𝖆𝖘𝖘𝖜𝖔𝖗𝖉",
            "ⓟⓐⓢⓢⓦⓞⓡⓓ",
            "Your ｔｏｋｅｎ",
            "ＳＳＮ",
        ] {
            assert!(hit(text).is_some(), "{text:?}");
        }
    }

    #[test]
    fn look_alike_letters_do_not_hide_a_term() {
        for (text, term) in [
            ("раssword", "password"),     // Cyrillic р, а
            ("pаsswоrd", "password"),     // Cyrillic а, о
            ("ΡΑSSWΟRD", "password"),     // Greek capitals Ρ, Α, Ο
            ("ραsswοrd", "password"),     // Greek ρ, α, ο
            ("userРassword", "password"), // Cyrillic capital Р in camelCase
            ("ѕесrеt", "secret"),         // Cyrillic ѕ, е, с
            ("tоkеn", "token"),
            ("ΑΡΙ_ΚΕΥ", "api key"),          // Greek capitals
            ("passw0rd", "password"),        // digit zero for o
            ("pa\u{301}ssword", "password"), // a combining accent
            ("pässwörd", "password"),
        ] {
            assert_eq!(hit(text).as_deref(), Some(term), "{text:?}");
        }
    }

    #[test]
    fn dodges_combined() {
        for text in [
            "p\u{AD}ａ\u{200B}ѕｓ\u{2060}wоrd",
            "Please enter the ａｄｍｉｎ раѕѕ\u{200B}wоrd",
            "ΑΡΙ\u{200D}_ｋｅу",
        ] {
            assert!(hit(text).is_some(), "{text:?}");
        }
    }

    #[test]
    fn folding_keeps_native_terms_and_harmless_words() {
        // Native-script terms still match after folding.
        for text in [
            "Введите пароль",
            "请输入密码",
            "パスワードを入力",
            "비밀번호",
        ] {
            assert_eq!(
                Terms::new(&[]).find(text).map(|h| h.family),
                Some("password"),
                "{text}"
            );
        }
        // And folding makes no new false positives of ordinary words.
        for text in [
            "Your full name",
            "Pick a color",
            "passage",
            "Compass heading",
            "Mnemosyne",
            "Наполеон",
            "Имя пользователя",
            "ｅｍａｉｌ",
        ] {
            assert_eq!(hit(text), None, "{text}");
        }
    }

    #[test]
    fn short_secret_field_names() {
        for (name, term) in [
            ("pw", "pw"),
            ("PW", "pw"),
            ("userPw", "pw"),
            ("user_pw", "pw"),
            ("pwd", "pwd"),
            ("passwd", "passwd"),
            ("pin", "pin"),
            ("PIN", "pin"),
            ("cardPin", "pin"),
            ("bank-pin", "pin"),
            ("otp", "otp"),
            ("2fa", "2fa"),
            ("mfa", "mfa"),
            ("totp", "totp"),
            ("cvv", "cvv"),
            ("cvv2", "cvv"),
            ("ccv", "ccv"),
            ("ssn", "ssn"),
            ("user_ssn", "ssn"),
            ("ｐｗ", "pw"),
            ("р\u{200B}w", "pw"),
            ("pin\u{AD}", "pin"),
        ] {
            assert_eq!(field(name).as_deref(), Some(term), "{name:?}");
        }
        // Ordinary identifiers that contain the letters are not secrets.
        for name in [
            "pinned",
            "spinner",
            "pinnacle",
            "username",
            "email",
            "passage",
            "passenger",
            "compass",
            "pwa",
            "power",
            "otpauth_enabled",
            "ops",
            "lesson",
            "name",
            "pinyin",
        ] {
            assert_eq!(field(name), None, "{name:?}");
        }
        // The full list applies to field names too.
        assert_eq!(field("apiKey").as_deref(), Some("api key"));
        // Short names are identifiers, not words of a sentence.
        for text in ["Pin this note?", "Enable 2FA?", "Pinned tabs"] {
            assert_eq!(hit(text), None, "{text}");
        }
    }
}
