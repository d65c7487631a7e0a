//! User sessions: flows of requests with think time between them, values taken from
//! responses into variables for later requests, and a cookie jar per session: the load
//! model of tsung, JMeter and Gatling (issue 32).
//!
//! This crate is the pure part: types read from a plan, checked once, and the per-session
//! state a worker keeps, all testable without a network. It knows nothing of the engine;
//! the engine compiles a flow's `${...}` templates and runs sessions with it.
//!
//! # Layout
//! - [`think`]: [`Think`], the pause after a response: fixed, uniform or exponential,
//!   read from `think = "1s"`, `{ uniform = [...] }`, `{ exponential = "1s" }`, sampled in
//!   nanoseconds without allocating.
//! - [`extract`]: [`Extract`] rules that take a value from a response (JSON Pointer, a
//!   JSONPath subset, a regular expression, a header) into a session's [`Vars`];
//!   [`apply_all`] applies a request's rules, parsing the body as JSON once. Per-response
//!   failures are a `Copy` enum, [`ExtractFailure`].
//! - [`cookie`]: [`CookieJar`], one session's cookies by RFC 6265: `Set-Cookie` parsed
//!   and stored (domain, path, expiry, Secure), the `Cookie` header written for a request.
//! - [`spec`]: [`Flow`], a flow as a plan writes it: request steps and loops of steps,
//!   checked when read (unique names, no nested loops, extract rules, unknown keys), with
//!   [`Flow::variables_used_before_set`] and [`Flow::variables_named_like_columns`]
//!   against the data file's columns, [`Flow::variables`] for the templates' variable
//!   slots, and [`Flow::walk`] over the steps a session sends, loops unrolled by position.
//!
//! # Use
//! ```
//! use loadlab_session::{apply_all, CookieJar, Flow, Vars};
//!
//! let flow: Flow = toml::from_str(r#"
//!     think = { exponential = "1s" }
//!     [[steps]]
//!     name = "login"
//!     method = "POST"
//!     path = "/login"
//!     extract = [{ var = "token", json = "/token" }]
//!     [[steps]]
//!     loop = 2
//!     steps = [{ name = "feed", path = "/feed?t=${token}" }]
//! "#).unwrap();
//! assert!(flow.variables_used_before_set(&[]).is_empty());
//! assert_eq!(flow.walk().map(|s| s.step.name.as_str()).collect::<Vec<_>>(),
//!            ["login", "feed", "feed"]);
//!
//! let (mut vars, mut jar) = (Vars::new(), CookieJar::new());
//! let login = flow.walk().next().unwrap().step;
//! let headers = [("Set-Cookie", "sid=42; Path=/; HttpOnly")];
//! apply_all(&login.extract, &headers, br#"{"token":"abc"}"#, &mut vars).unwrap();
//! jar.store(headers[0].1.as_bytes(), "shop.test", "/login", 1_700_000_000).unwrap();
//! assert_eq!(vars.get("token"), Some("abc"));
//! assert_eq!(jar.header("shop.test", "/feed", false, 1_700_000_001).as_deref(), Some("sid=42"));
//! ```

pub mod cookie;
pub mod extract;
pub mod spec;
pub mod think;

pub use cookie::{CookieJar, Rejected, Stored};
pub use extract::{apply_all, Extract, ExtractError, ExtractFailure, Headers, Source, Vars};
pub use spec::{
    ColumnClash, Connection, Flow, Item, Loop, Position, SpecError, Step, StepRef, UnsetVariable,
};
pub use think::{Think, ThinkError};
