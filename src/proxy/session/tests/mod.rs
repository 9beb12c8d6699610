//! Tests of the session core.
