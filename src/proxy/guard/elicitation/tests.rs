//! Unit tests of the elicitation decision, the form schemas and answers.

use serde_json::{Value, json};

use super::*;
use crate::policy::ElicitationSection;

const OLD: Revision = Revision::V2025_06_18;
const NEW: Revision = Revision::V2025_11_25;

fn form(schema: Value) -> Value {
    json!({"message": "Please fill in the form", "requestedSchema": schema})
}

fn flat(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

fn decide(params: &Value, rev: Revision) -> ElicitDecision {
    check(&ElicitationSection::default(), params, rev)
}

fn refusal(d: &ElicitDecision) -> (&'static str, i64, String) {
    match d {
        ElicitDecision::Refuse(r) => (r.rule, r.code, r.message.clone()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn schema_ok(props: Value, rev: Revision) -> FormSchema {
    match parse_schema(&flat(props.clone()), rev) {
        Ok(s) => s,
        Err(e) => panic!("{props} refused in {rev}: {e}"),
    }
}

fn schema_err(props: Value, rev: Revision) -> String {
    match parse_schema(&flat(props.clone()), rev) {
        Ok(s) => panic!("{props} accepted in {rev}: {s:?}"),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------
// Policy switches

#[test]
fn allow_and_mode_switches() {
    let p = form(flat(json!({"name": {"type": "string"}})));
    let off = ElicitationSection {
        allow: false,
        ..ElicitationSection::default()
    };
    let (rule, code, msg) = refusal(&check(&off, &p, NEW));
    assert_eq!((rule, code), ("elicitation.allow", -32001));
    assert!(
        msg.starts_with("rootfence policy: elicitation.allow = false ("),
        "{msg}"
    );
    let no_form = ElicitationSection {
        form: false,
        url: true,
        ..ElicitationSection::default()
    };
    assert_eq!(refusal(&check(&no_form, &p, NEW)).0, "elicitation.form");
    // The default policy allows forms, not URLs.
    assert!(matches!(decide(&p, NEW), ElicitDecision::Form { .. }));
    let u = json!({"mode":"url","message":"Sign in","elicitationId":"e1","url":"https://example.com/login"});
    assert_eq!(refusal(&decide(&u, NEW)).0, "elicitation.url");
    // Unknown modes and URL mode before 2025-11-25 are malformed.
    let (rule, code, _) = refusal(&decide(&json!({"mode":"voice","message":"x"}), NEW));
    assert_eq!((rule, code), ("elicitation.request", -32602));
    let url_on = ElicitationSection {
        url: true,
        ..ElicitationSection::default()
    };
    assert_eq!(refusal(&check(&url_on, &u, OLD)).0, "elicitation.request");
    // mode "form" written out is form mode.
    let mut explicit = p.clone();
    explicit["mode"] = json!("form");
    assert!(matches!(
        decide(&explicit, NEW),
        ElicitDecision::Form { .. }
    ));
}

#[test]
fn malformed_requests() {
    for params in [
        json!([]),
        json!({"requestedSchema": flat(json!({}))}),
        json!({"message": 3, "requestedSchema": flat(json!({}))}),
        json!({"message": "no schema"}),
        json!({"mode": 1, "message": "x"}),
    ] {
        let (rule, code, _) = refusal(&decide(&params, NEW));
        assert_eq!((rule, code), ("elicitation.request", -32602), "{params}");
    }
}

// ---------------------------------------------------------------------
// Schemas: what each revision allows

#[test]
fn the_2025_06_18_primitives() {
    let s = schema_ok(
        json!({
            "name": {"type":"string","title":"Name","description":"Your name","minLength":1,"maxLength":50},
            "email": {"type":"string","format":"email"},
            "site": {"type":"string","format":"uri"},
            "born": {"type":"string","format":"date"},
            "at": {"type":"string","format":"date-time"},
            "age": {"type":"integer","minimum":0,"maximum":150},
            "score": {"type":"number","minimum":-1.5,"maximum":1.5},
            "ok": {"type":"boolean","default":true},
            "color": {"type":"string","enum":["red","green"],"enumNames":["Red","Green"]},
            "size": {"type":"string","enum":["s","m","l"]},
        }),
        OLD,
    );
    assert_eq!(s.fields.len(), 10);
    let field = |n: &str| &s.fields.iter().find(|(k, _)| k == n).unwrap().1;
    assert!(matches!(
        field("name"),
        Field::String {
            min_len: Some(1),
            max_len: Some(50),
            format: None
        }
    ));
    assert!(matches!(
        field("at"),
        Field::String {
            format: Some(Format::DateTime),
            ..
        }
    ));
    assert!(matches!(field("age"), Field::Number { integer: true, .. }));
    assert!(matches!(
        field("score"),
        Field::Number { integer: false, .. }
    ));
    assert_eq!(field("ok"), &Field::Boolean);
    assert_eq!(
        field("color"),
        &Field::Choice(vec!["red".into(), "green".into()])
    );
}

#[test]
fn the_2025_11_25_additions() {
    // `default` on every primitive.
    schema_ok(
        json!({
            "s": {"type":"string","default":"x"},
            "n": {"type":"number","default":1.5},
            "i": {"type":"integer","default":3},
            "b": {"type":"boolean","default":false},
            "e": {"type":"string","enum":["a","b"],"default":"a"},
        }),
        NEW,
    );
    // Titled single-select.
    let s = schema_ok(
        json!({"hero": {"type":"string","title":"Hero","oneOf":[{"const":"h1","title":"Superman"},{"const":"h2","title":"Batman"}],"default":"h1"}}),
        NEW,
    );
    assert_eq!(s.fields[0].1, Field::Choice(vec!["h1".into(), "h2".into()]));
    // Untitled multi-select.
    let s = schema_ok(
        json!({"tags": {"type":"array","minItems":1,"maxItems":2,"items":{"type":"string","enum":["a","b","c"]},"default":["a"]}}),
        NEW,
    );
    assert_eq!(
        s.fields[0].1,
        Field::MultiChoice {
            values: vec!["a".into(), "b".into(), "c".into()],
            min_items: Some(1),
            max_items: Some(2)
        }
    );
    // Titled multi-select.
    let s = schema_ok(
        json!({"fish": {"type":"array","items":{"anyOf":[{"const":"f1","title":"Tuna"},{"const":"f2","title":"Trout"}]}}}),
        NEW,
    );
    assert!(matches!(&s.fields[0].1, Field::MultiChoice { values, .. } if values.len() == 2));
    // The top-level `$schema`.
    let mut with_dollar = flat(json!({"a":{"type":"string"}}));
    with_dollar["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    assert!(parse_schema(&with_dollar, NEW).is_ok());
}

#[test]
fn the_2025_11_25_additions_are_refused_in_older_revisions() {
    for props in [
        json!({"s": {"type":"string","default":"x"}}),
        json!({"n": {"type":"number","default":1}}),
        json!({"e": {"type":"string","enum":["a"],"default":"a"}}),
        json!({"hero": {"type":"string","oneOf":[{"const":"h1","title":"S"}]}}),
        json!({"tags": {"type":"array","items":{"type":"string","enum":["a"]}}}),
    ] {
        let e = schema_err(props.clone(), OLD);
        assert!(
            e.contains("2025-06-18") || e.contains("2025-11-25"),
            "{props}: {e}"
        );
        schema_ok(props, NEW);
    }
    // Boolean defaults were always allowed.
    schema_ok(json!({"b": {"type":"boolean","default":true}}), OLD);
}

#[test]
fn outside_the_subset_is_refused() {
    for (props, why) in [
        (
            json!({"addr": {"type":"object","properties":{"street":{"type":"string"}}}}),
            "nested objects",
        ),
        (
            json!({"list": {"type":"array","items":{"type":"object"}}}),
            "items must be of type string",
        ),
        (
            json!({"nums": {"type":"array","items":{"type":"number","enum":[1]}}}),
            "items must be of type string",
        ),
        (
            json!({"free": {"type":"array","items":{"type":"string"}}}),
            "items.enum",
        ),
        (json!({"r": {"$ref":"#/$defs/x"}}), "$ref"),
        (
            json!({"s": {"type":"string","pattern":"^a$"}}),
            "\"pattern\"",
        ),
        (
            json!({"s": {"type":"string","format":"ipv4"}}),
            "format \"ipv4\"",
        ),
        (json!({"s": {"type":["string","null"]}}), "single string"),
        (json!({"s": {"anyOf":[{"type":"string"}]}}), "needs a type"),
        (json!({"n": {"type":"null"}}), "type \"null\""),
        (
            json!({"n": {"type":"number","exclusiveMinimum":0}}),
            "exclusiveMinimum",
        ),
        (json!({"b": {"type":"boolean","default":"yes"}}), "default"),
        (
            json!({"e": {"type":"string","enum":[]}}),
            "must not be empty",
        ),
        (
            json!({"e": {"type":"string","enum":[1,2]}}),
            "array of strings",
        ),
        (
            json!({"e": {"type":"string","enum":["a","b"],"enumNames":["A"]}}),
            "one name per enum value",
        ),
        (
            json!({"e": {"type":"string","enum":["a"],"default":"z"}}),
            "default",
        ),
        (
            json!({"o": {"type":"string","oneOf":[{"const":"a"}]}}),
            "title",
        ),
        (
            json!({"o": {"type":"string","oneOf":[{"const":"a","title":"A","extra":1}]}}),
            "const and title",
        ),
        (
            json!({"m": {"type":"array","items":{"anyOf":[{"const":"a","title":"A"}],"type":"string"}}}),
            "anyOf",
        ),
        (
            json!({"m": {"type":"array","minItems":3,"maxItems":1,"items":{"type":"string","enum":["a"]}}}),
            "minItems",
        ),
        (
            json!({"s": {"type":"string","minLength":5,"maxLength":1}}),
            "minLength",
        ),
        (
            json!({"s": {"type":"string","minLength":-1}}),
            "non-negative",
        ),
        (
            json!({"n": {"type":"number","minimum":5,"maximum":1}}),
            "minimum",
        ),
        (
            json!({"t": {"type":"string","title":7}}),
            "title must be a string",
        ),
        (json!({"x": "string"}), "must be an object"),
    ] {
        let e = schema_err(props.clone(), NEW);
        assert!(e.contains(why), "{props}: {e:?} should mention {why:?}");
    }
}

#[test]
fn top_level_shape() {
    for (schema, why) in [
        (json!({"properties":{}}), "type \"object\""),
        (json!({"type":"array","properties":{}}), "type \"object\""),
        (json!({"type":"object"}), "properties object"),
        (
            json!({"type":"object","properties":{},"required":["ghost"]}),
            "not a property",
        ),
        (
            json!({"type":"object","properties":{},"required":"a"}),
            "array of property names",
        ),
        (
            json!({"type":"object","properties":{},"$defs":{}}),
            "references",
        ),
        (
            json!({"type":"object","properties":{},"allOf":[]}),
            "\"allOf\"",
        ),
        (
            json!({"type":"object","properties":{},"additionalProperties":true}),
            "\"additionalProperties\"",
        ),
        (json!("object"), "must be an object"),
    ] {
        let e = parse_schema(&schema, NEW).unwrap_err().to_string();
        assert!(e.contains(why), "{schema}: {e:?} should mention {why:?}");
    }
    // Annotations SDKs emit are fine: pydantic's title, zod's
    // additionalProperties: false.
    let pydantic = json!({"type":"object","title":"BookingPreferences","description":"d",
        "properties":{"date":{"type":"string","title":"Date","format":"date"}},"required":["date"],
        "additionalProperties": false});
    let s = parse_schema(&pydantic, OLD).unwrap();
    assert_eq!(s.required, vec!["date".to_string()]);
}

#[test]
fn a_schema_refusal_names_the_rule_and_revision() {
    let p = form(flat(json!({"addr": {"type":"object","properties":{}}})));
    let (rule, code, msg) = refusal(&decide(&p, OLD));
    assert_eq!((rule, code), ("elicitation.schema", -32001));
    assert_eq!(
        msg,
        "rootfence policy: elicitation forms in protocol 2025-06-18 are flat objects of primitive fields (property \"addr\": nested objects are not allowed)"
    );
}

#[test]
fn the_reference_servers_form_passes() {
    // server-everything's trigger-elicitation-request (abridged to one of
    // each kind), including a description that mentions "pin".
    let schema = json!({"type":"object","properties":{
        "name":{"title":"String","type":"string","description":"Your full, legal name"},
        "check":{"title":"Boolean","type":"boolean","description":"Agree to the terms and conditions"},
        "email":{"title":"String with email format","type":"string","format":"email","description":"Your email address (will be verified, and never shared with anyone else)"},
        "integer":{"title":"Integer","type":"integer","description":"Your favorite integer (do not give us your phone number, pin, or other sensitive info)","minimum":1,"maximum":100,"default":42},
        "untitledMultipleSelectEnum":{"type":"array","title":"Untitled Multiple Select Enum","description":"Choose your favorite instruments","minItems":1,"maxItems":3,"items":{"type":"string","enum":["Guitar","Piano"]},"default":["Guitar"]},
        "titledSingleSelectEnum":{"type":"string","title":"Titled Single Select Enum","oneOf":[{"const":"hero-1","title":"Superman"}],"default":"hero-1"},
        "legacyTitledEnum":{"type":"string","enum":["pet-1","pet-2"],"enumNames":["Cats","Dogs"],"default":"pet-1"}},
        "required":["name"]});
    let d = decide(
        &json!({"message":"Please provide inputs for the following fields:","requestedSchema":schema}),
        NEW,
    );
    match d {
        ElicitDecision::Form { summary, .. } => {
            assert!(
                summary.contains("name:string") && summary.contains("check:boolean"),
                "{summary}"
            )
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------
// Sensitive data

#[test]
fn sensitive_fields_are_refused_wherever_they_appear() {
    for (params, place) in [
        (
            form(flat(json!({"password": {"type":"string"}}))),
            "field \"password\"",
        ),
        (
            form(flat(json!({"apiKey": {"type":"string"}}))),
            "field \"apiKey\"",
        ),
        (
            form(flat(json!({"github_token": {"type":"string"}}))),
            "field \"github_token\"",
        ),
        (
            form(flat(
                json!({"x": {"type":"string","title":"Credit card number"}}),
            )),
            "the title of field \"x\"",
        ),
        (
            form(flat(
                json!({"x": {"type":"string","description":"Your SSN"}}),
            )),
            "the description of field \"x\"",
        ),
        (
            json!({"message":"Enter your bank PIN code","requestedSchema":flat(json!({"x":{"type":"string"}}))}),
            "the message",
        ),
        (
            form(
                json!({"type":"object","title":"Wallet seed phrase","properties":{"w":{"type":"string"}}}),
            ),
            "the form's title",
        ),
        (
            form(flat(
                json!({"m": {"type":"string","oneOf":[{"const":"a","title":"My OTP"}]}}),
            )),
            "an option label",
        ),
        (
            form(flat(
                json!({"k": {"type":"string","enum":["a"],"enumNames":["Private key"]}}),
            )),
            "an option label",
        ),
        (
            form(flat(json!({"contraseña": {"type":"string"}}))),
            "field \"contraseña\"",
        ),
    ] {
        let (rule, code, msg) = refusal(&decide(&params, NEW));
        assert_eq!(
            (rule, code),
            ("elicitation.refuse_sensitive", -32001),
            "{params}"
        );
        assert!(
            msg.starts_with("rootfence policy: elicitation.refuse_sensitive = true ("),
            "{msg}"
        );
        assert!(msg.contains(place), "{msg} should name {place}");
    }
}

#[test]
fn sensitive_terms_hidden_by_unicode_are_refused_in_every_revision() {
    let zwsp = "pass\u{200B}word";
    let shy = "pass\u{AD}word";
    let wj = "pass\u{2060}word";
    let wide = "ｐａｓｓｗｏｒｄ";
    let cyrillic = "раssword";
    let greek = "ΑΡΙ_ΚΕΥ";
    let cases = [
        (form(flat(json!({zwsp: {"type":"string"}}))), "field"),
        (form(flat(json!({cyrillic: {"type":"string"}}))), "field"),
        (form(flat(json!({"pw": {"type":"string"}}))), "field \"pw\""),
        (
            form(flat(json!({"userPin": {"type":"integer"}}))),
            "field \"userPin\"",
        ),
        (
            form(flat(json!({"x": {"type":"string","title":wide}}))),
            "the title of field \"x\"",
        ),
        (
            form(flat(json!({"x": {"type":"string","description":shy}}))),
            "the description of field \"x\"",
        ),
        (
            form(flat(
                json!({"x": {"type":"string","description":format!("Your {greek}")}}),
            )),
            "the description of field \"x\"",
        ),
        (
            form(flat(
                json!({"m": {"type":"string","enum":["a"],"enumNames":[wj]}}),
            )),
            "an option label",
        ),
        (
            json!({"message": format!("Enter your {cyrillic}"), "requestedSchema": flat(json!({"x":{"type":"string"}}))}),
            "the message",
        ),
        (
            form(json!({"type":"object","title":"ѕесrеt","properties":{"w":{"type":"string"}}})),
            "the form's title",
        ),
    ];
    for rev in [OLD, NEW, Revision::V2026_07_28] {
        for (params, place) in &cases {
            let (rule, code, msg) = refusal(&decide(params, rev));
            assert_eq!(
                (rule, code),
                ("elicitation.refuse_sensitive", -32001),
                "{rev}: {params}"
            );
            assert!(msg.contains(place), "{rev}: {msg} should name {place}");
        }
    }
    // The allowed counterparts: the same forms without the secret.
    for rev in [OLD, NEW, Revision::V2026_07_28] {
        for ok in [
            form(flat(json!({"name": {"type":"string","title":"Ｎａｍｅ"}}))),
            form(flat(json!({"pinned": {"type":"boolean"}}))),
            // A yes/no field named pin cannot carry a PIN.
            form(flat(
                json!({"pin": {"type":"boolean","description":"Pin this note?"}}),
            )),
            form(flat(
                json!({"спиннер": {"type":"string","description":"Имя пользователя"}}),
            )),
        ] {
            assert!(
                matches!(decide(&ok, rev), ElicitDecision::Form { .. }),
                "{rev}: {ok} {:?}",
                decide(&ok, rev)
            );
        }
    }
}

#[test]
fn sensitive_check_can_be_turned_off_and_extended() {
    let p = form(flat(json!({"password": {"type":"string"}})));
    let off = ElicitationSection {
        refuse_sensitive: false,
        ..ElicitationSection::default()
    };
    assert!(matches!(check(&off, &p, NEW), ElicitDecision::Form { .. }));
    let extra = ElicitationSection {
        sensitive_terms: vec!["employee number".into()],
        ..ElicitationSection::default()
    };
    let q = form(flat(json!({"employeeNumber": {"type":"string"}})));
    assert!(matches!(decide(&q, NEW), ElicitDecision::Form { .. }));
    let (rule, _, msg) = refusal(&check(&extra, &q, NEW));
    assert_eq!(rule, "elicitation.refuse_sensitive");
    assert!(msg.contains("elicitation.sensitive_terms"), "{msg}");
    // Enum values themselves are not checked (choosing "password" as a
    // login method is not giving one).
    let choice = form(flat(
        json!({"method": {"type":"string","enum":["password","passkey"]}}),
    ));
    assert!(matches!(decide(&choice, NEW), ElicitDecision::Form { .. }));
}

// ---------------------------------------------------------------------
// URL mode

#[test]
fn url_mode() {
    let url_on = ElicitationSection {
        url: true,
        ..ElicitationSection::default()
    };
    let req = |u: &str| json!({"mode":"url","message":"Authorize","elicitationId":"e1","url":u});
    match check(&url_on, &req("https://auth.example.com/cb?token=abc"), NEW) {
        ElicitDecision::Url { host } => assert_eq!(host, "auth.example.com"),
        other => panic!("{other:?}"),
    }
    for (u, rule, setting) in [
        (
            "http://example.com",
            "elicitation.url.https",
            "elicitation URLs must be plain https URLs",
        ),
        (
            "https://u:p@example.com",
            "elicitation.url.userinfo",
            "elicitation URLs must be plain https URLs",
        ),
        (
            "https://127.0.0.1",
            "elicitation.url_allow_ip",
            "elicitation.url_allow_ip = false",
        ),
        (
            "https://[::1]",
            "elicitation.url_allow_ip",
            "elicitation.url_allow_ip = false",
        ),
        (
            "https://localhost.",
            "elicitation.url_allow_localhost",
            "elicitation.url_allow_localhost = false",
        ),
        (
            "https://foo.localhost",
            "elicitation.url_allow_localhost",
            "elicitation.url_allow_localhost = false",
        ),
    ] {
        let (r, code, msg) = refusal(&check(&url_on, &req(u), NEW));
        assert_eq!((r, code), (rule, -32001), "{u}");
        assert!(
            msg.starts_with(&format!("rootfence policy: {setting} (")),
            "{u}: {msg}"
        );
    }
    // The message of a URL request is not checked for sensitive terms: URL
    // mode is where secrets belong.
    let pw = json!({"mode":"url","message":"Set your password","elicitationId":"e2","url":"https://example.com/"});
    assert!(matches!(
        check(&url_on, &pw, NEW),
        ElicitDecision::Url { .. }
    ));
    let no_url = json!({"mode":"url","message":"x","elicitationId":"e3"});
    assert_eq!(
        refusal(&check(&url_on, &no_url, NEW)).0,
        "elicitation.request"
    );
}

// ---------------------------------------------------------------------
// Answers

fn answer_schema() -> FormSchema {
    parse_schema(
        &json!({"type":"object","properties":{
            "name":{"type":"string","minLength":2,"maxLength":5},
            "email":{"type":"string","format":"email"},
            "born":{"type":"string","format":"date"},
            "at":{"type":"string","format":"date-time"},
            "site":{"type":"string","format":"uri"},
            "age":{"type":"integer","minimum":0,"maximum":150},
            "ratio":{"type":"number","minimum":0,"maximum":1},
            "ok":{"type":"boolean"},
            "color":{"type":"string","enum":["red","green"]},
            "hero":{"type":"string","oneOf":[{"const":"h1","title":"S"}]},
            "tags":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"string","enum":["a","b","c"]}}},
            "required":["name","age"]}),
        NEW,
    )
    .unwrap()
}

#[test]
fn valid_answers_pass() {
    let s = answer_schema();
    for content in [
        json!({"name":"Ann","age":30}),
        json!({"name":"Ann","age":30.0}),
        json!({"name":"Ann","age":0,"ratio":0.5,"ok":false,"color":"red","hero":"h1","tags":["a","c"]}),
        json!({"name":"Zoë","age":150,"email":"a@b.example","born":"2000-02-29","at":"2025-01-02T03:04:05.678+01:00","site":"https://x.example/p"}),
        json!({"name":"Ann","age":1,"at":"2025-01-02T03:04:05Z"}),
        json!({"name":"Ann","age":1,"ok":null,"tags":null}),
    ] {
        let r = check_answer(&s, &json!({"action":"accept","content":content}));
        assert!(r.is_ok(), "{content}: {r:?}");
    }
    for action in ["decline", "cancel"] {
        assert_eq!(
            check_answer(&s, &json!({"action":action})).unwrap().action,
            action
        );
    }
}

#[test]
fn invalid_answers_are_refused() {
    let s = answer_schema();
    for (content, why) in [
        (json!({"age":3}), "required field \"name\" is missing"),
        (json!({"name":"Ann"}), "required field \"age\" is missing"),
        (json!({"name":"Ann","age":3,"extra":1}), "did not ask for"),
        (json!({"name":5,"age":3}), "expected a string"),
        (json!({"name":"A","age":3}), "length 1"),
        (json!({"name":"Annabel","age":3}), "length 7"),
        (json!({"name":"Ann","age":3.5}), "expected an integer"),
        (json!({"name":"Ann","age":"3"}), "expected a number"),
        (json!({"name":"Ann","age":151}), "outside"),
        (json!({"name":"Ann","age":-1}), "outside"),
        (json!({"name":"Ann","age":3,"ratio":1.01}), "outside"),
        (
            json!({"name":"Ann","age":3,"ok":"yes"}),
            "expected a boolean",
        ),
        (
            json!({"name":"Ann","age":3,"color":"blue"}),
            "not one of the options",
        ),
        (
            json!({"name":"Ann","age":3,"hero":"Superman"}),
            "not one of the options",
        ),
        (json!({"name":"Ann","age":3,"tags":[]}), "0 items"),
        (
            json!({"name":"Ann","age":3,"tags":["a","b","c"]}),
            "3 items",
        ),
        (
            json!({"name":"Ann","age":3,"tags":["z"]}),
            "item 0 is not one of the options",
        ),
        (
            json!({"name":"Ann","age":3,"tags":["a","a"]}),
            "item 1 is repeated",
        ),
        (
            json!({"name":"Ann","age":3,"tags":"a"}),
            "expected an array",
        ),
        (
            json!({"name":"Ann","age":3,"email":"not an email"}),
            "not a valid email",
        ),
        (
            json!({"name":"Ann","age":3,"born":"2001-02-29"}),
            "not a valid date",
        ),
        (
            json!({"name":"Ann","age":3,"born":"01/02/2000"}),
            "not a valid date",
        ),
        (
            json!({"name":"Ann","age":3,"at":"2025-01-02 03:04:05"}),
            "not a valid date-time",
        ),
        (
            json!({"name":"Ann","age":3,"at":"2025-01-02T25:00:00Z"}),
            "not a valid date-time",
        ),
        (
            json!({"name":"Ann","age":3,"site":"no scheme"}),
            "not a valid uri",
        ),
        (
            json!({"name":null,"age":3}),
            "field \"name\": expected a string",
        ),
    ] {
        let e = check_answer(&s, &json!({"action":"accept","content":content}))
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{content}: {e:?} should mention {why:?}");
        // The error never quotes the value.
        assert!(
            !e.contains("Annabel") && !e.contains("blue") && !e.contains("151"),
            "{e}"
        );
    }
    for (answer, why) in [
        (json!({"action":"accept"}), "missing"),
        (
            json!({"action":"accept","content":[1]}),
            "content must be an object",
        ),
        (json!({"action":"maybe"}), "unknown action"),
        (json!({"content":{}}), "no action"),
        (Value::Null, "no action"),
    ] {
        let e = check_answer(&s, &answer).unwrap_err().to_string();
        assert!(e.contains(why), "{answer}: {e:?}");
    }
}

#[test]
fn a_secret_asked_through_a_default_or_a_label_is_refused() {
    for (params, place) in [
        (
            form(flat(
                json!({"token": {"type":"string","enum":["a"]}, "note": {"type":"string","default":"paste your GitHub password here"}}),
            )),
            "the default of field \"note\"",
        ),
        (
            form(flat(
                json!({"k": {"type":"array","items":{"type":"string","enum":["a","b"]},"default":["a"],"description":"x"}, "m": {"type":"string","default":"your API key"}}),
            )),
            "the default of field \"m\"",
        ),
        (
            form(flat(
                json!({"c": {"type":"string","oneOf":[{"const":"a","title":"Enter your password"}]}}),
            )),
            "an option label",
        ),
        (
            form(flat(
                json!({"d": {"type":"string","description":"Your bank PIN code"}}),
            )),
            "the description of field \"d\"",
        ),
    ] {
        let (rule, _, msg) = refusal(&decide(&params, NEW));
        assert_eq!(rule, "elicitation.refuse_sensitive", "{params}");
        assert!(msg.contains(place), "{msg} should name {place}");
    }
    // In 2025-06-18 a string field has no `default`: refused by the schema.
    let old = form(flat(
        json!({"note": {"type":"string","default":"paste your GitHub password here"}}),
    ));
    assert!(matches!(decide(&old, OLD), ElicitDecision::Refuse(_)));
    // The allowed twin: a harmless default.
    let ok = form(flat(
        json!({"note": {"type":"string","default":"nothing to add"}}),
    ));
    assert!(matches!(decide(&ok, NEW), ElicitDecision::Form { .. }));
}
