//! `elicitation/create`: the policy's decision on a request, the restricted
//! form schema of each protocol revision, and the check of the host's
//! answer against that schema. Pure: no I/O, no session state.

use serde_json::{Map, Value};

mod errors;

pub use errors::{AnswerError, FieldError, SchemaError, ValueError};

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
                &why.to_string(),
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
pub fn parse_schema(raw: &Value, revision: Revision) -> Result<FormSchema, SchemaError> {
    let obj = raw.as_object().ok_or(SchemaError::NotObject)?;
    // Top level: the spec's members, plus annotations SDKs emit (pydantic
    // adds `title`; zod-to-JSON-schema adds `additionalProperties: false`).
    for (k, v) in obj {
        match k.as_str() {
            "type" | "properties" | "required" => {}
            "$schema" | "title" | "description" => {
                if !v.is_string() {
                    return Err(SchemaError::NotString(k.clone()));
                }
            }
            "additionalProperties" if v == &Value::Bool(false) => {}
            "$ref" | "$defs" | "definitions" => {
                return Err(SchemaError::Reference(k.clone()));
            }
            other => {
                return Err(SchemaError::Keyword(other.to_string()));
            }
        }
    }
    if obj.get("type") != Some(&Value::String("object".into())) {
        return Err(SchemaError::NotObjectType);
    }
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or(SchemaError::NoProperties)?;
    let mut fields = Vec::with_capacity(props.len());
    for (name, p) in props {
        let f = parse_field(p, revision).map_err(|error| SchemaError::Property {
            name: name.clone(),
            error,
        })?;
        fields.push((name.clone(), f));
    }
    let mut required = Vec::new();
    if let Some(r) = obj.get("required") {
        let arr = r.as_array().ok_or(SchemaError::RequiredNotNames)?;
        for n in arr {
            let n = n.as_str().ok_or(SchemaError::RequiredNotNames)?;
            if !props.contains_key(n) {
                return Err(SchemaError::RequiredUnknown(n.to_string()));
            }
            if !required.iter().any(|x: &String| x == n) {
                required.push(n.to_string());
            }
        }
    }
    Ok(FormSchema { fields, required })
}

fn parse_field(p: &Value, revision: Revision) -> Result<Field, FieldError> {
    let obj = p.as_object().ok_or(FieldError::NotObject)?;
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err(FieldError::TypeNotString),
        None if obj.contains_key("$ref") => return Err(FieldError::Reference),
        None => return Err(FieldError::NoType),
    };
    let allowed = allowed_keywords(ty, obj, revision)?;
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(FieldError::Keyword {
            keyword: k.clone(),
            ty: ty.to_string(),
            revision,
        });
    }
    for k in ["title", "description"] {
        if obj.get(k).is_some_and(|v| !v.is_string()) {
            return Err(FieldError::NotString(k));
        }
    }
    let field = match ty {
        "string" if obj.contains_key("enum") => {
            let values = string_list(obj.get("enum"), "enum")?;
            if let Some(names) = obj.get("enumNames") {
                let names = string_list(Some(names), "enumNames")?;
                if names.len() != values.len() {
                    return Err(FieldError::EnumNamesCount);
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
        check_value(&field, d).map_err(FieldError::Default)?;
    }
    Ok(field)
}

/// The keywords a field of type `ty` may have in `revision` (2025-11-25
/// added `default` everywhere, titled options and multi-select).
fn allowed_keywords(
    ty: &str,
    obj: &Map<String, Value>,
    revision: Revision,
) -> Result<&'static [&'static str], FieldError> {
    let new = revision >= Revision::V2025_11_25;
    let needs_new = |what| Err(FieldError::NeedsNewer { what, revision });
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
        ("object", _) => return Err(FieldError::Nested),
        (other, _) => return Err(FieldError::Type(other.to_string())),
    })
}

/// The bounds `low` and `high` (keyword, value) are in order, or one is
/// missing.
fn in_order<T: PartialOrd>(
    (low, a): (&'static str, Option<T>),
    (high, b): (&'static str, Option<T>),
) -> Result<(), FieldError> {
    match (a, b) {
        (Some(a), Some(b)) if a > b => Err(FieldError::Inverted { low, high }),
        _ => Ok(()),
    }
}

/// A free string field: lengths and format.
fn string_field(obj: &Map<String, Value>) -> Result<Field, FieldError> {
    let min_len = count(obj, "minLength")?;
    let max_len = count(obj, "maxLength")?;
    in_order(("minLength", min_len), ("maxLength", max_len))?;
    let format = match obj.get("format") {
        None => None,
        Some(Value::String(f)) => Some(match f.as_str() {
            "email" => Format::Email,
            "uri" => Format::Uri,
            "date" => Format::Date,
            "date-time" => Format::DateTime,
            other => return Err(FieldError::Format(other.to_string())),
        }),
        Some(_) => return Err(FieldError::NotString("format")),
    };
    Ok(Field::String {
        min_len,
        max_len,
        format,
    })
}

/// A number field: its bounds.
fn number_field(obj: &Map<String, Value>, integer: bool) -> Result<Field, FieldError> {
    let bound = |k: &'static str| -> Result<Option<f64>, FieldError> {
        match obj.get(k) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or(FieldError::NotNumber(k)),
        }
    };
    let (min, max) = (bound("minimum")?, bound("maximum")?);
    in_order(("minimum", min), ("maximum", max))?;
    Ok(Field::Number { integer, min, max })
}

/// A multi-select of string options (`type: "array"`).
fn multi_choice_field(obj: &Map<String, Value>) -> Result<Field, FieldError> {
    let items = obj
        .get("items")
        .and_then(Value::as_object)
        .ok_or(FieldError::NoItems)?;
    let values = if items.contains_key("anyOf") {
        if let Some(k) = items.keys().find(|k| *k != "anyOf") {
            return Err(FieldError::AnyOfWith(k.clone()));
        }
        titled_options(items.get("anyOf"), "items.anyOf")?
    } else {
        if let Some(k) = items.keys().find(|k| *k != "type" && *k != "enum") {
            return Err(FieldError::ItemsKeyword(k.clone()));
        }
        if items.get("type") != Some(&Value::String("string".into())) {
            return Err(FieldError::ItemsNotString);
        }
        string_list(items.get("enum"), "items.enum")?
    };
    let min_items = count(obj, "minItems")?;
    let max_items = count(obj, "maxItems")?;
    in_order(("minItems", min_items), ("maxItems", max_items))?;
    Ok(Field::MultiChoice {
        values,
        min_items,
        max_items,
    })
}

fn count(obj: &Map<String, Value>, k: &'static str) -> Result<Option<u64>, FieldError> {
    match obj.get(k) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(FieldError::NotCount(k)),
    }
}

fn string_list(v: Option<&Value>, what: &'static str) -> Result<Vec<String>, FieldError> {
    let arr = v
        .and_then(Value::as_array)
        .ok_or(FieldError::NotStrings(what))?;
    if arr.is_empty() {
        return Err(FieldError::Empty(what));
    }
    arr.iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .ok_or(FieldError::NotStrings(what))
        })
        .collect()
}

fn titled_options(v: Option<&Value>, what: &'static str) -> Result<Vec<String>, FieldError> {
    let arr = v
        .and_then(Value::as_array)
        .ok_or(FieldError::NotOptions(what))?;
    if arr.is_empty() {
        return Err(FieldError::Empty(what));
    }
    let mut out = Vec::with_capacity(arr.len());
    for o in arr {
        let o = o.as_object().ok_or(FieldError::NotOptions(what))?;
        if let Some(k) = o.keys().find(|k| *k != "const" && *k != "title") {
            return Err(FieldError::OptionKeyword {
                what,
                keyword: k.clone(),
            });
        }
        let c = o
            .get("const")
            .and_then(Value::as_str)
            .ok_or(FieldError::OptionConst(what))?;
        if !o.get("title").is_some_and(Value::is_string) {
            return Err(FieldError::OptionTitle(what));
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
pub fn check_answer(schema: &FormSchema, result: &Value) -> Result<AnswerSummary, AnswerError> {
    let action = result
        .get("action")
        .and_then(Value::as_str)
        .ok_or(AnswerError::NoAction)?;
    match action {
        "decline" | "cancel" => {
            return Ok(AnswerSummary {
                action: action.to_string(),
                fields: 0,
            });
        }
        "accept" => {}
        other => return Err(AnswerError::UnknownAction(other.to_string())),
    }
    let empty = Map::new();
    let content = match result.get("content") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err(AnswerError::ContentNotObject),
    };
    for (k, v) in content {
        let Some((_, f)) = schema.fields.iter().find(|(n, _)| n == k) else {
            return Err(AnswerError::Unasked(k.clone()));
        };
        // `null` for an optional field means "left empty" (the Python SDK
        // allows it); a required field must have a value.
        if v.is_null() && !schema.required.contains(k) {
            continue;
        }
        check_value(f, v).map_err(|error| AnswerError::Field {
            name: k.clone(),
            error,
        })?;
    }
    if let Some(missing) = schema.required.iter().find(|r| !content.contains_key(*r)) {
        return Err(AnswerError::Missing(missing.clone()));
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

fn check_value(f: &Field, v: &Value) -> Result<(), ValueError> {
    match f {
        Field::String {
            min_len,
            max_len,
            format,
        } => {
            let s = v.as_str().ok_or(ValueError::Expected("a string"))?;
            let len = s.chars().count() as u64;
            if min_len.is_some_and(|m| len < m) || max_len.is_some_and(|m| len > m) {
                return Err(ValueError::Length {
                    len,
                    min: *min_len,
                    max: *max_len,
                });
            }
            if let Some(fmt) = format
                && !format_ok(*fmt, s)
            {
                return Err(ValueError::Format(*fmt));
            }
            Ok(())
        }
        Field::Number { integer, min, max } => {
            let x = v.as_f64().ok_or(ValueError::Expected("a number"))?;
            if *integer && !(v.is_i64() || v.is_u64() || x.fract() == 0.0) {
                return Err(ValueError::Expected("an integer"));
            }
            if min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m) {
                return Err(ValueError::Range {
                    min: *min,
                    max: *max,
                });
            }
            Ok(())
        }
        Field::Boolean => v
            .as_bool()
            .map(|_| ())
            .ok_or(ValueError::Expected("a boolean")),
        Field::Choice(values) => {
            let s = v.as_str().ok_or(ValueError::Expected("a string"))?;
            if values.iter().any(|x| x == s) {
                Ok(())
            } else {
                Err(ValueError::NotAnOption)
            }
        }
        Field::MultiChoice {
            values,
            min_items,
            max_items,
        } => {
            let strings = ValueError::Expected("an array of strings");
            let arr = v.as_array().ok_or(strings.clone())?;
            let n = arr.len() as u64;
            if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                return Err(ValueError::Count(n));
            }
            for (i, x) in arr.iter().enumerate() {
                let s = x.as_str().ok_or(strings.clone())?;
                if !values.iter().any(|v| v == s) {
                    return Err(ValueError::ItemNotAnOption(i));
                }
                if arr[..i].contains(x) {
                    return Err(ValueError::Repeated(i));
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
