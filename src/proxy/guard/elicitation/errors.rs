//! What a form elicitation can be refused for: a `requestedSchema` outside
//! the restricted subset ([`SchemaError`], [`FieldError`]), or a host's
//! answer that does not match it ([`AnswerError`], [`ValueError`]). The
//! words are those of the refusal the server (or the host) reads; an
//! answer's error never quotes the value.

use super::Format;
use crate::proxy::guard::Revision;

/// What in a `requestedSchema` is outside the subset of its revision.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// Not a JSON object.
    #[error("requestedSchema must be an object")]
    NotObject,
    /// An annotation (`$schema`, `title`, `description`) that is not a
    /// string.
    #[error("requestedSchema {0} must be a string")]
    NotString(String),
    /// `$ref`, `$defs` or `definitions`.
    #[error("requestedSchema uses {0}: references are not allowed")]
    Reference(String),
    /// A keyword forms do not have.
    #[error("requestedSchema has the keyword {0:?}, which elicitation forms do not allow")]
    Keyword(String),
    /// `type` is not `"object"`.
    #[error("requestedSchema must have type \"object\"")]
    NotObjectType,
    /// No `properties` object.
    #[error("requestedSchema must have a properties object")]
    NoProperties,
    /// A property outside the subset.
    #[error("property {name:?}: {error}")]
    Property {
        /// The property.
        name: String,
        /// What is wrong with it.
        error: FieldError,
    },
    /// `required` is not an array of strings.
    #[error("required must be an array of property names")]
    RequiredNotNames,
    /// `required` names no property.
    #[error("required names {0:?}, which is not a property")]
    RequiredUnknown(String),
}

/// What in one property of a `requestedSchema` is outside the subset.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// Not a JSON object.
    #[error("a property must be an object")]
    NotObject,
    /// `type` is not one string.
    #[error("type must be a single string")]
    TypeNotString,
    /// A reference in place of a type.
    #[error("$ref is not allowed")]
    Reference,
    /// No `type`.
    #[error("every property needs a type")]
    NoType,
    /// A keyword the field's type does not have in this revision.
    #[error("the keyword {keyword:?} is not allowed on a {ty} field in protocol {revision}")]
    Keyword {
        /// The keyword.
        keyword: String,
        /// The field's type.
        ty: String,
        /// The session's revision.
        revision: Revision,
    },
    /// A member that must be a string (`title`, `description`, `format`)
    /// is not.
    #[error("{0} must be a string")]
    NotString(&'static str),
    /// `enumNames` and `enum` differ in length.
    #[error("enumNames must have one name per enum value")]
    EnumNamesCount,
    /// The `default` does not fit the field.
    #[error("default: {0}")]
    Default(ValueError),
    /// A kind of field that came with 2025-11-25.
    #[error("{what} need protocol 2025-11-25 (this session: {revision})")]
    NeedsNewer {
        /// The kind of field.
        what: &'static str,
        /// The session's revision.
        revision: Revision,
    },
    /// `type: "object"`.
    #[error("nested objects are not allowed")]
    Nested,
    /// A type forms do not have.
    #[error("type {0:?} is not allowed")]
    Type(String),
    /// A lower bound above its upper bound.
    #[error("{low} is greater than {high}")]
    Inverted {
        /// The lower bound's keyword.
        low: &'static str,
        /// The upper bound's keyword.
        high: &'static str,
    },
    /// A string `format` forms do not have.
    #[error("format {0:?} is not allowed (email, uri, date, date-time)")]
    Format(String),
    /// A bound that is not a number.
    #[error("{0} must be a number")]
    NotNumber(&'static str),
    /// A count that is not a non-negative integer.
    #[error("{0} must be a non-negative integer")]
    NotCount(&'static str),
    /// A multi-select without an `items` object.
    #[error("a multi-select needs an items object")]
    NoItems,
    /// `items` with `anyOf` and another keyword.
    #[error("items with anyOf may not have {0:?}")]
    AnyOfWith(String),
    /// `items` with a keyword other than `type` and `enum`.
    #[error("items may only have type and enum (or anyOf), not {0:?}")]
    ItemsKeyword(String),
    /// `items` of another type than string.
    #[error("items must be of type string (arrays of objects or numbers are not allowed)")]
    ItemsNotString,
    /// A list of values that is not an array of strings.
    #[error("{0} must be an array of strings")]
    NotStrings(&'static str),
    /// An empty list of values or options.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// A list of options that is not an array of objects.
    #[error("{0} must be an array of {{const, title}}")]
    NotOptions(&'static str),
    /// An option with a member other than `const` and `title`.
    #[error("{what} options may only have const and title, not {keyword:?}")]
    OptionKeyword {
        /// The list.
        what: &'static str,
        /// The member.
        keyword: String,
    },
    /// An option without a string `const`.
    #[error("{0} options need a string const")]
    OptionConst(&'static str),
    /// An option without a string `title`.
    #[error("{0} options need a string title")]
    OptionTitle(&'static str),
}

/// Why a host's answer does not match the form.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// No `action` string.
    #[error("the answer has no action")]
    NoAction,
    /// An action other than accept, decline and cancel.
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    /// `content` is not an object.
    #[error("content must be an object")]
    ContentNotObject,
    /// A field the form did not ask for.
    #[error("content has {0:?}, which the form did not ask for")]
    Unasked(String),
    /// A field whose value does not fit.
    #[error("field {name:?}: {error}")]
    Field {
        /// The field.
        name: String,
        /// Why its value does not fit.
        error: ValueError,
    },
    /// A required field is absent.
    #[error("the required field {0:?} is missing")]
    Missing(String),
}

/// Why a value does not fit its field (never quoting the value).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// Of another JSON type: `a string`, `a number`, `an integer`, ...
    #[error("expected {0}")]
    Expected(&'static str),
    /// A string's length outside its bounds.
    #[error("length {len} is outside {}..{}", bound(.min), bound(.max))]
    Length {
        /// The length in characters.
        len: u64,
        /// `minLength`.
        min: Option<u64>,
        /// `maxLength`.
        max: Option<u64>,
    },
    /// A string not of its `format`.
    #[error("not a valid {}", .0.name())]
    Format(Format),
    /// A number outside its bounds.
    #[error("the number is outside {}..{}", bound(.min), bound(.max))]
    Range {
        /// `minimum`.
        min: Option<f64>,
        /// `maximum`.
        max: Option<f64>,
    },
    /// A choice not among the options.
    #[error("the value is not one of the options")]
    NotAnOption,
    /// A multi-select with too few or too many items.
    #[error("{0} items is outside the allowed count")]
    Count(u64),
    /// An item of a multi-select not among the options.
    #[error("item {0} is not one of the options")]
    ItemNotAnOption(usize),
    /// An item of a multi-select given twice.
    #[error("item {0} is repeated")]
    Repeated(usize),
}

/// A bound as a range shows it: empty when there is none.
fn bound<T: ToString>(b: &Option<T>) -> String {
    b.as_ref().map_or(String::new(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a refused server or host reads: a change of shape or
    /// wording fails here first.
    #[test]
    fn each_refusal_reads_as_sent() {
        let cases: Vec<(String, &str)> = vec![
            (
                SchemaError::Property {
                    name: "when".into(),
                    error: FieldError::Keyword {
                        keyword: "pattern".into(),
                        ty: "string".into(),
                        revision: Revision::V2025_06_18,
                    },
                }
                .to_string(),
                "property \"when\": the keyword \"pattern\" is not allowed on a string field in protocol 2025-06-18",
            ),
            (
                FieldError::NeedsNewer {
                    what: "arrays (multi-select)",
                    revision: Revision::V2025_06_18,
                }
                .to_string(),
                "arrays (multi-select) need protocol 2025-11-25 (this session: 2025-06-18)",
            ),
            (
                FieldError::Default(ValueError::Length {
                    len: 1,
                    min: Some(2),
                    max: None,
                })
                .to_string(),
                "default: length 1 is outside 2..",
            ),
            (
                FieldError::NotOptions("items.anyOf").to_string(),
                "items.anyOf must be an array of {const, title}",
            ),
            (
                AnswerError::Field {
                    name: "age".into(),
                    error: ValueError::Range {
                        min: Some(0.0),
                        max: Some(1.5),
                    },
                }
                .to_string(),
                "field \"age\": the number is outside 0..1.5",
            ),
            (
                AnswerError::Field {
                    name: "born".into(),
                    error: ValueError::Format(Format::DateTime),
                }
                .to_string(),
                "field \"born\": not a valid date-time",
            ),
            (
                AnswerError::Missing("name".into()).to_string(),
                "the required field \"name\" is missing",
            ),
        ];
        for (said, want) in cases {
            assert_eq!(said, want);
        }
    }
}
