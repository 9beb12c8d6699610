//! `elicitation/create`: the policy's decision on a request, the restricted
//! form schema of each protocol revision, and the check of the host's
//! answer against that schema. Pure: no I/O, no session state.

use serde_json::{Map, Value};

use super::sensitive::Terms;
use super::url::{self, UrlRules};
use super::{Refusal, Revision};
use crate::policy::ElicitationSection;

/// One form field's type and constraints.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// `type: "string"` without enum.
    String {
        /// `minLength`
        min_len: Option<u64>,
        /// `maxLength`
        max_len: Option<u64>,
        /// `format`
        format: Option<Format>,
    },
    /// `type: "number"` or `"integer"`.
    Number {
        /// `"integer"`
        integer: bool,
        /// `minimum`
        min: Option<f64>,
        /// `maximum`
        max: Option<f64>,
    },
    /// `type: "boolean"`.
    Boolean,
    /// A single choice among strings (`enum`, or titled `oneOf` consts).
    Choice(Vec<String>),
    /// Several choices among strings (`type: "array"`, 2025-11-25).
    MultiChoice {
        /// The allowed values.
        values: Vec<String>,
        /// `minItems`
        min_items: Option<u64>,
        /// `maxItems`
        max_items: Option<u64>,
    },
}

/// A string `format` the form schema allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `email`
    Email,
    /// `uri`
    Uri,
    /// `date` (RFC 3339 full-date)
    Date,
    /// `date-time` (RFC 3339)
    DateTime,
}

impl Format {
    /// The name as written in a schema.
    pub fn name(self) -> &'static str {
        match self {
            Format::Email => "email",
            Format::Uri => "uri",
            Format::Date => "date",
            Format::DateTime => "date-time",
        }
    }
}

/// A validated form schema: what the host's `accept` content is checked
/// against.
#[derive(Debug, Clone, PartialEq)]
pub struct FormSchema {
    /// The properties, sorted by name.
    pub fields: Vec<(String, Field)>,
    /// `required`
    pub required: Vec<String>,
}

/// What the guard decided on an `elicitation/create`.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitDecision {
    /// Forward a form request; check the answer against `schema` (when the
    /// policy's `validate_response` is on).
    Form {
        /// The schema the answer must match.
        schema: FormSchema,
        /// For the audit log: field names and types.
        summary: String,
    },
    /// Forward a URL-mode request.
    Url {
        /// The URL's host, for the audit log.
        host: String,
    },
    /// Answer the server with an error.
    Refuse(Refusal),
}

/// Decide on an `elicitation/create` with `params`, in protocol
/// `revision`.
pub fn check(policy: &ElicitationSection, params: &Value, revision: Revision) -> ElicitDecision {
    if !policy.allow {
        return ElicitDecision::Refuse(Refusal::policy(
            "elicitation.allow",
            "elicitation.allow = false",
            "this server may not ask the user for input",
        ));
    }
    let Some(params) = params.as_object() else {
        return ElicitDecision::Refuse(Refusal::malformed(
            "elicitation.request",
            "elicitation/create params must be an object",
        ));
    };
    let mode = match params.get("mode") {
        None => "form",
        Some(Value::String(m)) => m.as_str(),
        Some(_) => {
            return ElicitDecision::Refuse(Refusal::malformed(
                "elicitation.request",
                "elicitation/create mode must be a string",
            ));
        }
    };
    match mode {
        "form" => check_form(policy, params, revision),
        "url" if revision < Revision::V2025_11_25 => ElicitDecision::Refuse(Refusal::malformed(
            "elicitation.request",
            &format!("URL-mode elicitation does not exist in protocol {revision}"),
        )),
        "url" => check_url(policy, params),
        other => ElicitDecision::Refuse(Refusal::malformed(
            "elicitation.request",
            &format!("unknown elicitation mode {other:?}"),
        )),
    }
}

fn check_url(policy: &ElicitationSection, params: &Map<String, Value>) -> ElicitDecision {
    if !policy.url {
        return ElicitDecision::Refuse(Refusal::policy(
            "elicitation.url",
            "elicitation.url = false",
            "URL-mode elicitation is not allowed for this server",
        ));
    }
    let Some(u) = params.get("url").and_then(Value::as_str) else {
        return ElicitDecision::Refuse(Refusal::malformed(
            "elicitation.request",
            "a URL-mode elicitation needs a url string",
        ));
    };
    let rules = UrlRules {
        allow_ip: policy.url_allow_ip,
        allow_localhost: policy.url_allow_localhost,
    };
    match url::check(u, rules) {
        Ok(host) => ElicitDecision::Url { host },
        Err(r) => {
            let key = match r.rule {
                "elicitation.url_allow_ip" => Some("elicitation.url_allow_ip = false"),
                "elicitation.url_allow_localhost" => {
                    Some("elicitation.url_allow_localhost = false")
                }
                _ => None,
            };
            ElicitDecision::Refuse(match key {
                Some(k) => Refusal::policy(r.rule, k, &r.detail),
                None => Refusal::policy(
                    r.rule,
                    "elicitation URLs must be plain https URLs",
                    &r.detail,
                ),
            })
        }
    }
}

fn check_form(
    policy: &ElicitationSection,
    params: &Map<String, Value>,
    revision: Revision,
) -> ElicitDecision {
    if !policy.form {
        return ElicitDecision::Refuse(Refusal::policy(
            "elicitation.form",
            "elicitation.form = false",
            "form-mode elicitation is not allowed for this server",
        ));
    }
    let message = match params.get("message") {
        Some(Value::String(m)) => m.as_str(),
        _ => {
            return ElicitDecision::Refuse(Refusal::malformed(
                "elicitation.request",
                "elicitation/create needs a message string",
            ));
        }
    };
    let Some(raw) = params.get("requestedSchema") else {
        return ElicitDecision::Refuse(Refusal::malformed(
            "elicitation.request",
            "a form elicitation needs a requestedSchema",
        ));
    };
    let schema = match parse_schema(raw, revision) {
        Ok(s) => s,
        Err(why) => {
            return ElicitDecision::Refuse(Refusal::policy(
                "elicitation.schema",
                &format!(
                    "elicitation forms in protocol {revision} are flat objects of primitive fields"
                ),
                &why,
            ));
        }
    };
    if policy.refuse_sensitive {
        let terms = Terms::new(&policy.sensitive_terms);
        for (place, text, kind) in sensitive_texts(message, raw) {
            let hit = match kind {
                Text::Free => terms.find(&text),
                Text::TypedFieldName => terms.find_field_name(&text),
            };
            if let Some(hit) = hit {
                let family = if hit.family == "policy" {
                    "a term in elicitation.sensitive_terms".to_string()
                } else {
                    format!("{} data", hit.family)
                };
                return ElicitDecision::Refuse(Refusal::policy(
                    "elicitation.refuse_sensitive",
                    "elicitation.refuse_sensitive = true",
                    &format!(
                        "{place} matches the sensitive term {:?} ({family}); forms must not ask for secrets, use URL mode",
                        hit.term
                    ),
                ));
            }
        }
    }
    let summary = schema
        .fields
        .iter()
        .map(|(n, f)| format!("{n}:{}", f.kind()))
        .collect::<Vec<_>>()
        .join(",");
    ElicitDecision::Form { schema, summary }
}

/// What a checked text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Text {
    /// A message, title, description or option label.
    Free,
    /// The name of a field whose value is typed in (a string or a number,
    /// not a choice or a yes/no): short secret names (`pw`, `pin`) count.
    TypedFieldName,
}

/// The texts checked for sensitive terms, each with where it is and what
/// it is.
fn sensitive_texts(message: &str, schema: &Value) -> Vec<(String, String, Text)> {
    let mut out = vec![("the message".to_string(), message.to_string(), Text::Free)];
    for k in ["title", "description"] {
        if let Some(t) = schema.get(k).and_then(Value::as_str) {
            out.push((format!("the form's {k}"), t.to_string(), Text::Free));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let typed = match p.get("type").and_then(Value::as_str) {
                Some("string") => p.get("enum").is_none() && p.get("oneOf").is_none(),
                Some("number" | "integer") => true,
                _ => false,
            };
            let kind = if typed {
                Text::TypedFieldName
            } else {
                Text::Free
            };
            out.push((format!("field {name:?}"), name.clone(), kind));
            for k in ["title", "description"] {
                if let Some(t) = p.get(k).and_then(Value::as_str) {
                    out.push((
                        format!("the {k} of field {name:?}"),
                        t.to_string(),
                        Text::Free,
                    ));
                }
            }
            // Option labels (`enumNames`, titled options) and defaults.
            // (The options' values are not: choosing "password" as a
            // login method is not giving one.)
            let labels = p
                .get("enumNames")
                .into_iter()
                .chain(p.get("oneOf"))
                .chain(p.pointer("/items/anyOf"))
                .filter_map(Value::as_array)
                .flatten()
                .filter_map(|v| {
                    v.as_str()
                        .or_else(|| v.get("title").and_then(Value::as_str))
                });
            for l in labels {
                out.push((
                    format!("an option label of field {name:?}"),
                    l.to_string(),
                    Text::Free,
                ));
            }
            let defaults = match p.get("default") {
                Some(Value::String(d)) => vec![d.as_str()],
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            for d in defaults {
                out.push((
                    format!("the default of field {name:?}"),
                    d.to_string(),
                    Text::Free,
                ));
            }
        }
    }
    out
}

impl Field {
    fn kind(&self) -> &'static str {
        match self {
            Field::String { .. } => "string",
            Field::Number { integer: true, .. } => "integer",
            Field::Number { .. } => "number",
            Field::Boolean => "boolean",
            Field::Choice(_) => "choice",
            Field::MultiChoice { .. } => "multi-choice",
        }
    }
}

/// Parse and validate `requestedSchema` against the restricted subset of
/// `revision`. The error says what is outside it.
pub fn parse_schema(raw: &Value, revision: Revision) -> Result<FormSchema, String> {
    let obj = raw.as_object().ok_or("requestedSchema must be an object")?;
    // Top level: the spec's members, plus annotations SDKs emit (pydantic
    // adds `title`; zod-to-JSON-schema adds `additionalProperties: false`).
    for (k, v) in obj {
        match k.as_str() {
            "type" | "properties" | "required" => {}
            "$schema" | "title" | "description" => {
                if !v.is_string() {
                    return Err(format!("requestedSchema {k} must be a string"));
                }
            }
            "additionalProperties" if v == &Value::Bool(false) => {}
            "$ref" | "$defs" | "definitions" => {
                return Err(format!(
                    "requestedSchema uses {k}: references are not allowed"
                ));
            }
            other => {
                return Err(format!(
                    "requestedSchema has the keyword {other:?}, which elicitation forms do not allow"
                ));
            }
        }
    }
    if obj.get("type") != Some(&Value::String("object".into())) {
        return Err("requestedSchema must have type \"object\"".into());
    }
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or("requestedSchema must have a properties object")?;
    let mut fields = Vec::with_capacity(props.len());
    for (name, p) in props {
        let f = parse_field(p, revision).map_err(|e| format!("property {name:?}: {e}"))?;
        fields.push((name.clone(), f));
    }
    let mut required = Vec::new();
    if let Some(r) = obj.get("required") {
        let arr = r
            .as_array()
            .ok_or("required must be an array of property names")?;
        for n in arr {
            let n = n
                .as_str()
                .ok_or("required must be an array of property names")?;
            if !props.contains_key(n) {
                return Err(format!("required names {n:?}, which is not a property"));
            }
            if !required.iter().any(|x: &String| x == n) {
                required.push(n.to_string());
            }
        }
    }
    Ok(FormSchema { fields, required })
}

fn parse_field(p: &Value, revision: Revision) -> Result<Field, String> {
    let obj = p.as_object().ok_or("a property must be an object")?;
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("type must be a single string".into()),
        None if obj.contains_key("$ref") => return Err("$ref is not allowed".into()),
        None => return Err("every property needs a type".into()),
    };
    let allowed = allowed_keywords(ty, obj, revision)?;
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "the keyword {k:?} is not allowed on a {ty} field in protocol {revision}"
        ));
    }
    for k in ["title", "description"] {
        if obj.get(k).is_some_and(|v| !v.is_string()) {
            return Err(format!("{k} must be a string"));
        }
    }
    let field = match ty {
        "string" if obj.contains_key("enum") => {
            let values = string_list(obj.get("enum"), "enum")?;
            if let Some(names) = obj.get("enumNames") {
                let names = string_list(Some(names), "enumNames")?;
                if names.len() != values.len() {
                    return Err("enumNames must have one name per enum value".into());
                }
            }
            Field::Choice(values)
        }
        "string" if obj.contains_key("oneOf") => {
            Field::Choice(titled_options(obj.get("oneOf"), "oneOf")?)
        }
        "string" => string_field(obj)?,
        "number" | "integer" => number_field(obj, ty == "integer")?,
        "boolean" => Field::Boolean,
        // "array": a multi-select of string options.
        _ => multi_choice_field(obj)?,
    };
    if let Some(d) = obj.get("default") {
        check_value(&field, d).map_err(|e| format!("default: {e}"))?;
    }
    Ok(field)
}

/// The keywords a field of type `ty` may have in `revision` (2025-11-25
/// added `default` everywhere, titled options and multi-select).
fn allowed_keywords(
    ty: &str,
    obj: &Map<String, Value>,
    revision: Revision,
) -> Result<&'static [&'static str], String> {
    let new = revision >= Revision::V2025_11_25;
    let needs_new = |what: &str| {
        Err(format!(
            "{what} need protocol 2025-11-25 (this session: {revision})"
        ))
    };
    Ok(match (ty, new) {
        ("string", true) if obj.contains_key("enum") => &[
            "type",
            "title",
            "description",
            "enum",
            "enumNames",
            "default",
        ],
        ("string", false) if obj.contains_key("enum") => {
            &["type", "title", "description", "enum", "enumNames"]
        }
        ("string", true) if obj.contains_key("oneOf") => {
            &["type", "title", "description", "oneOf", "default"]
        }
        ("string", false) if obj.contains_key("oneOf") => {
            return needs_new("titled options (oneOf)");
        }
        ("string", true) => &[
            "type",
            "title",
            "description",
            "minLength",
            "maxLength",
            "format",
            "default",
        ],
        ("string", false) => &[
            "type",
            "title",
            "description",
            "minLength",
            "maxLength",
            "format",
        ],
        ("number" | "integer", true) => &[
            "type",
            "title",
            "description",
            "minimum",
            "maximum",
            "default",
        ],
        ("number" | "integer", false) => &["type", "title", "description", "minimum", "maximum"],
        ("boolean", _) => &["type", "title", "description", "default"],
        ("array", true) => &[
            "type",
            "title",
            "description",
            "minItems",
            "maxItems",
            "items",
            "default",
        ],
        ("array", false) => return needs_new("arrays (multi-select)"),
        ("object", _) => return Err("nested objects are not allowed".into()),
        (other, _) => return Err(format!("type {other:?} is not allowed")),
    })
}

/// A free string field: lengths and format.
fn string_field(obj: &Map<String, Value>) -> Result<Field, String> {
    let min_len = count(obj, "minLength")?;
    let max_len = count(obj, "maxLength")?;
    if let (Some(a), Some(b)) = (min_len, max_len)
        && a > b
    {
        return Err("minLength is greater than maxLength".into());
    }
    let format = match obj.get("format") {
        None => None,
        Some(Value::String(f)) => Some(match f.as_str() {
            "email" => Format::Email,
            "uri" => Format::Uri,
            "date" => Format::Date,
            "date-time" => Format::DateTime,
            other => {
                return Err(format!(
                    "format {other:?} is not allowed (email, uri, date, date-time)"
                ));
            }
        }),
        Some(_) => return Err("format must be a string".into()),
    };
    Ok(Field::String {
        min_len,
        max_len,
        format,
    })
}

/// A number field: its bounds.
fn number_field(obj: &Map<String, Value>, integer: bool) -> Result<Field, String> {
    let bound = |k: &str| -> Result<Option<f64>, String> {
        match obj.get(k) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or(format!("{k} must be a number")),
        }
    };
    let (min, max) = (bound("minimum")?, bound("maximum")?);
    if let (Some(a), Some(b)) = (min, max)
        && a > b
    {
        return Err("minimum is greater than maximum".into());
    }
    Ok(Field::Number { integer, min, max })
}

/// A multi-select of string options (`type: "array"`).
fn multi_choice_field(obj: &Map<String, Value>) -> Result<Field, String> {
    let items = obj
        .get("items")
        .and_then(Value::as_object)
        .ok_or("a multi-select needs an items object")?;
    let values = if items.contains_key("anyOf") {
        if let Some(k) = items.keys().find(|k| *k != "anyOf") {
            return Err(format!("items with anyOf may not have {k:?}"));
        }
        titled_options(items.get("anyOf"), "items.anyOf")?
    } else {
        if let Some(k) = items.keys().find(|k| *k != "type" && *k != "enum") {
            return Err(format!(
                "items may only have type and enum (or anyOf), not {k:?}"
            ));
        }
        if items.get("type") != Some(&Value::String("string".into())) {
            return Err(
                "items must be of type string (arrays of objects or numbers are not allowed)"
                    .into(),
            );
        }
        string_list(items.get("enum"), "items.enum")?
    };
    let min_items = count(obj, "minItems")?;
    let max_items = count(obj, "maxItems")?;
    if let (Some(a), Some(b)) = (min_items, max_items)
        && a > b
    {
        return Err("minItems is greater than maxItems".into());
    }
    Ok(Field::MultiChoice {
        values,
        min_items,
        max_items,
    })
}

fn count(obj: &Map<String, Value>, k: &str) -> Result<Option<u64>, String> {
    match obj.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or(format!("{k} must be a non-negative integer")),
    }
}

fn string_list(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    let arr = v
        .and_then(Value::as_array)
        .ok_or(format!("{what} must be an array of strings"))?;
    if arr.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    arr.iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .ok_or(format!("{what} must be an array of strings"))
        })
        .collect()
}

fn titled_options(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    let arr = v
        .and_then(Value::as_array)
        .ok_or(format!("{what} must be an array of {{const, title}}"))?;
    if arr.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    let mut out = Vec::with_capacity(arr.len());
    for o in arr {
        let o = o
            .as_object()
            .ok_or(format!("{what} must be an array of {{const, title}}"))?;
        if let Some(k) = o.keys().find(|k| *k != "const" && *k != "title") {
            return Err(format!(
                "{what} options may only have const and title, not {k:?}"
            ));
        }
        let c = o
            .get("const")
            .and_then(Value::as_str)
            .ok_or(format!("{what} options need a string const"))?;
        if !o.get("title").is_some_and(Value::is_string) {
            return Err(format!("{what} options need a string title"));
        }
        out.push(c.to_string());
    }
    Ok(out)
}

/// Check the host's answer (`result` of `elicitation/create`) against
/// `schema`. Decline and cancel pass; accept's `content` must match: every
/// required field present, no field the form did not ask for, every value
/// of its field's type, length, range, format and options. `null` is
/// accepted for an optional field (left empty).
pub fn check_answer(schema: &FormSchema, result: &Value) -> Result<AnswerSummary, String> {
    let action = result
        .get("action")
        .and_then(Value::as_str)
        .ok_or("the answer has no action")?;
    match action {
        "decline" | "cancel" => {
            return Ok(AnswerSummary {
                action: action.to_string(),
                fields: 0,
            });
        }
        "accept" => {}
        other => return Err(format!("unknown action {other:?}")),
    }
    let empty = Map::new();
    let content = match result.get("content") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err("content must be an object".into()),
    };
    for (k, v) in content {
        let Some((_, f)) = schema.fields.iter().find(|(n, _)| n == k) else {
            return Err(format!("content has {k:?}, which the form did not ask for"));
        };
        // `null` for an optional field means "left empty" (the Python SDK
        // allows it); a required field must have a value.
        if v.is_null() && !schema.required.contains(k) {
            continue;
        }
        check_value(f, v).map_err(|e| format!("field {k:?}: {e}"))?;
    }
    if let Some(missing) = schema.required.iter().find(|r| !content.contains_key(*r)) {
        return Err(format!("the required field {missing:?} is missing"));
    }
    Ok(AnswerSummary {
        action: action.to_string(),
        fields: content.len(),
    })
}

/// What the audit log says of an answer: never the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerSummary {
    /// accept, decline or cancel.
    pub action: String,
    /// How many fields the content had.
    pub fields: usize,
}

fn check_value(f: &Field, v: &Value) -> Result<(), String> {
    match f {
        Field::String {
            min_len,
            max_len,
            format,
        } => {
            let s = v.as_str().ok_or("expected a string")?;
            let n = s.chars().count() as u64;
            if min_len.is_some_and(|m| n < m) || max_len.is_some_and(|m| n > m) {
                return Err(format!(
                    "length {n} is outside {}..{}",
                    min_len.map_or(String::new(), |m| m.to_string()),
                    max_len.map_or(String::new(), |m| m.to_string())
                ));
            }
            if let Some(fmt) = format
                && !format_ok(*fmt, s)
            {
                return Err(format!("not a valid {}", fmt.name()));
            }
            Ok(())
        }
        Field::Number { integer, min, max } => {
            let x = v.as_f64().ok_or("expected a number")?;
            if *integer && !(v.is_i64() || v.is_u64() || x.fract() == 0.0) {
                return Err("expected an integer".into());
            }
            if min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m) {
                return Err(format!(
                    "the number is outside {}..{}",
                    min.map_or(String::new(), |m| m.to_string()),
                    max.map_or(String::new(), |m| m.to_string())
                ));
            }
            Ok(())
        }
        Field::Boolean => v
            .as_bool()
            .map(|_| ())
            .ok_or_else(|| "expected a boolean".into()),
        Field::Choice(values) => {
            let s = v.as_str().ok_or("expected a string")?;
            if values.iter().any(|x| x == s) {
                Ok(())
            } else {
                Err("the value is not one of the options".into())
            }
        }
        Field::MultiChoice {
            values,
            min_items,
            max_items,
        } => {
            let arr = v.as_array().ok_or("expected an array of strings")?;
            let n = arr.len() as u64;
            if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                return Err(format!("{n} items is outside the allowed count"));
            }
            for (i, x) in arr.iter().enumerate() {
                let s = x.as_str().ok_or("expected an array of strings")?;
                if !values.iter().any(|v| v == s) {
                    return Err(format!("item {i} is not one of the options"));
                }
                if arr[..i].contains(x) {
                    return Err(format!("item {i} is repeated"));
                }
            }
            Ok(())
        }
    }
}

fn format_ok(f: Format, s: &str) -> bool {
    match f {
        Format::Email => {
            let Some((local, domain)) = s.rsplit_once('@') else {
                return false;
            };
            !local.is_empty()
                && !domain.is_empty()
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        Format::Uri => {
            let Some((scheme, rest)) = s.split_once(':') else {
                return false;
            };
            let mut cs = scheme.chars();
            cs.next().is_some_and(|c| c.is_ascii_alphabetic())
                && cs.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        Format::Date => date_ok(s),
        Format::DateTime => {
            let Some((d, t)) = s.split_once(['T', 't']) else {
                return false;
            };
            date_ok(d) && time_ok(t)
        }
    }
}

fn digits(s: &str, n: usize) -> Option<u32> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// An RFC 3339 full-date: `YYYY-MM-DD`, a day of the calendar.
fn date_ok(s: &str) -> bool {
    let mut it = s.split('-');
    let (Some(y), Some(m), Some(d), None) = (it.next(), it.next(), it.next(), it.next()) else {
        return false;
    };
    let (Some(y), Some(m), Some(d)) = (digits(y, 4), digits(m, 2), digits(d, 2)) else {
        return false;
    };
    let (Ok(y), Ok(m), Ok(d)) = (i16::try_from(y), i8::try_from(m), i8::try_from(d)) else {
        return false;
    };
    jiff::civil::Date::new(y, m, d).is_ok()
}

fn time_ok(t: &str) -> bool {
    // hh:mm:ss[.frac](Z|±hh:mm)
    let (clock, zone) = if let Some(c) = t.strip_suffix(['Z', 'z']) {
        (c, None)
    } else if let Some(i) = t.rfind(['+', '-']) {
        (&t[..i], Some(&t[i + 1..]))
    } else {
        return false;
    };
    if let Some(z) = zone {
        let Some((h, m)) = z.split_once(':') else {
            return false;
        };
        if !(digits(h, 2).is_some_and(|h| h < 24) && digits(m, 2).is_some_and(|m| m < 60)) {
            return false;
        }
    }
    let (hms, frac) = match clock.split_once('.') {
        Some((a, f)) => (a, Some(f)),
        None => (clock, None),
    };
    if frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let mut it = hms.split(':');
    let (Some(h), Some(m), Some(s), None) = (it.next(), it.next(), it.next(), it.next()) else {
        return false;
    };
    digits(h, 2).is_some_and(|h| h < 24)
        && digits(m, 2).is_some_and(|m| m < 60)
        && digits(s, 2).is_some_and(|s| s <= 60)
}

#[cfg(test)]
mod tests;
