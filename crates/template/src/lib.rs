//! Requests that vary: `${...}` templates in the URL, headers and body, values from data
//! files (CSV or JSON Lines), and vegeta-format targets files listing many requests.
//!
//! Everything is parsed and checked once, before the load; the load engine then renders
//! each request into a buffer it reuses, with no heap allocation per request.
//!
//! # Layout
//! - [`template`]: the `${...}` syntax, parsed into a [`Template`] for a [`Slot`] (URL,
//!   header, body) and rendered per request from a [`Draw`] and a [`Generator`].
//! - [`data`]: data files loaded into [`Data`] (CSV with a header, JSON Lines), and how
//!   requests draw rows: [`Order`] and the run's shared [`Cursor`] (rows and `${seq}`).
//! - [`targets`]: vegeta's `http` targets format, read into [`TargetSpec`]s.
//! - [`error`]: where text came from ([`Origin`]) and the one error type
//!   ([`TemplateError`], `SOURCE:LINE:COL: MESSAGE`).
//!
//! # Use
//! ```
//! use loadlab_template::{Cursor, Data, Draw, Generator, Order, Origin, Slot, Template};
//!
//! let data = Data::from_rows("ids.csv", vec!["id".into()], vec![vec!["a b".into()]])?;
//! let url = Template::compile("/users/${id}?n=${seq}", Slot::Url, &Origin::flag("URL"), Some(&data))?;
//! let cursor = Cursor::new();
//! let mut gen = Generator::new(42, 0);
//! let mut out = Vec::with_capacity(url.max_len(Some(&data)));
//! let row = data.pick(Order::Sequential, &cursor, &mut gen).map(|i| data.row(i));
//! url.render(&Draw::new(cursor.next_seq(), row), &mut gen, &mut out);
//! assert_eq!(out, b"/users/a%20b?n=1");
//! # Ok::<(), loadlab_template::TemplateError>(())
//! ```

pub mod data;
pub mod error;
pub mod generator;
pub mod names;
pub mod targets;
pub mod template;

pub use data::{ControlValue, Cursor, Data, Order, UnknownOrder};
pub use error::{Origin, TemplateError};
pub use generator::Generator;
pub use targets::{parse_targets, parse_targets_str, TargetSpec};
pub use template::{Draw, Slot, Template};
