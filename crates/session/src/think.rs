//! [`Think`]: the pause a user takes between two requests of a session, fixed or drawn
//! from a distribution, sampled per pause without allocating.
//!
//! # Syntax
//! A duration is the text every loadlab duration takes: `"250ms"`, `"1.5s"`, `"1m 30s"`,
//! or a bare number of seconds as text (`"2"`, `"0.5"`).
//! - `think = "1s"`: always 1 s ([`Think::Fixed`]; `"0s"` is [`Think::None`]).
//! - `think = { uniform = ["500ms", "1.5s"] }`: uniform between the two, both included
//!   ([`Think::Uniform`]).
//! - `think = { exponential = "1s" }`: exponential with that mean, cut at
//!   [`EXPONENTIAL_CAP`] × the mean ([`Think::Exponential`]).
//!
//! A TOML number (`think = 1`) is refused: the unit must be written, so that `1` is never
//! read as seconds by one person and milliseconds by another.

use std::fmt;
use std::time::Duration;

use rand::{Rng, RngCore};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An exponential pause is cut at this many times its mean, so that one unlucky draw
/// cannot stall a session: e^−10 ≈ 0.005 % of draws are cut, which lowers the mean by the
/// same 0.005 % ([`Think::mean_ns`] gives the mean with the cut).
pub const EXPONENTIAL_CAP: u32 = 10;

/// The forms a think time takes, for error messages.
pub const THINK_SYNTAX: &str = "think = \"1s\", think = { uniform = [\"500ms\", \"1.5s\"] } \
                                or think = { exponential = \"1s\" }";

/// The pause after a response before the session's next request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Think {
    /// No pause.
    #[default]
    None,
    /// Always this long (above 0: a zero pause is [`Think::None`]).
    Fixed(Duration),
    /// Uniform in `[lo, hi]`, both ends included, to the nanosecond.
    Uniform {
        /// The shortest pause.
        lo: Duration,
        /// The longest pause (at least `lo`).
        hi: Duration,
    },
    /// Exponential (a Poisson user) with this mean (above 0), each draw cut at
    /// [`EXPONENTIAL_CAP`] × the mean.
    Exponential {
        /// The mean before the cut.
        mean: Duration,
    },
}

/// Why a think time is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThinkError {
    /// The text is not a duration.
    #[error("think time: {0}; write {THINK_SYNTAX}")]
    BadDuration(String),
    /// A uniform range whose low end is above its high end.
    #[error(
        "think time: uniform range [{lo}, {hi}] has its low end above its high end; \
         write the shorter first, e.g. think = {{ uniform = [\"500ms\", \"1.5s\"] }}"
    )]
    Reversed {
        /// The low end as written.
        lo: String,
        /// The high end as written.
        hi: String,
    },
    /// An exponential mean of 0.
    #[error(
        "think time: an exponential mean must be above 0; write e.g. \
         think = {{ exponential = \"1s\" }}, or think = \"0s\" for no pause"
    )]
    ZeroMean,
    /// A table whose key is none of `uniform` and `exponential`, or that has several keys.
    #[error("think time: {0}; write {THINK_SYNTAX}")]
    BadForm(String),
}

/// Parses a duration as loadlab's flags and plans do: humantime text (`"250ms"`, `"1.5s"`,
/// `"1m 30s"`) or a bare number of seconds (`"2"`, `"0.5"`); negative values are refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "`{s}` is negative: a pause is 0 or more, e.g. 250ms"
        ));
    }
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("`{s}` is not a duration: use e.g. 250ms, 1.5s, 2m"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("`{s}` is not a duration ({e}): use e.g. 250ms, 1.5s, 2m"))
}

fn duration(s: &str) -> Result<Duration, ThinkError> {
    parse_duration(s).map_err(ThinkError::BadDuration)
}

fn text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Nanoseconds of `d`, saturating (585 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Think {
    /// A fixed pause; 0 is [`Think::None`].
    pub fn fixed(d: Duration) -> Think {
        if d.is_zero() {
            Think::None
        } else {
            Think::Fixed(d)
        }
    }

    /// A uniform pause in `[lo, hi]`; `lo > hi` is refused.
    pub fn uniform(lo: Duration, hi: Duration) -> Result<Think, ThinkError> {
        if lo > hi {
            return Err(ThinkError::Reversed {
                lo: text(lo),
                hi: text(hi),
            });
        }
        Ok(Think::Uniform { lo, hi })
    }

    /// An exponential pause with this mean; 0 is refused.
    pub fn exponential(mean: Duration) -> Result<Think, ThinkError> {
        if mean.is_zero() {
            return Err(ThinkError::ZeroMean);
        }
        Ok(Think::Exponential { mean })
    }

    /// One pause, in nanoseconds. Allocates nothing; `Fixed` and `None` draw nothing
    /// from `rng`.
    pub fn sample(&self, rng: &mut impl RngCore) -> u64 {
        match *self {
            Think::None => 0,
            Think::Fixed(d) => nanos(d),
            Think::Uniform { lo, hi } => rng.gen_range(nanos(lo)..=nanos(hi)),
            Think::Exponential { mean } => {
                // 53 random bits: u in [0, 1), so 1 − u is in (0, 1] and its logarithm is
                // finite.
                let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                let mean = nanos(mean) as f64;
                let x = -mean * (1.0 - u).ln();
                x.min(mean * f64::from(EXPONENTIAL_CAP)) as u64
            }
        }
    }

    /// The mean pause in nanoseconds, as [`Think::sample`] draws them (an exponential's
    /// includes the cut at [`EXPONENTIAL_CAP`] × its mean: mean × (1 − e^−cap)).
    pub fn mean_ns(&self) -> f64 {
        match *self {
            Think::None => 0.0,
            Think::Fixed(d) => nanos(d) as f64,
            Think::Uniform { lo, hi } => (nanos(lo) as f64 + nanos(hi) as f64) / 2.0,
            Think::Exponential { mean } => {
                nanos(mean) as f64 * (1.0 - (-f64::from(EXPONENTIAL_CAP)).exp())
            }
        }
    }

    /// The longest pause [`Think::sample`] can draw, in nanoseconds.
    pub fn max_ns(&self) -> u64 {
        match *self {
            Think::None => 0,
            Think::Fixed(d) => nanos(d),
            Think::Uniform { hi, .. } => nanos(hi),
            Think::Exponential { mean } => nanos(mean).saturating_mul(u64::from(EXPONENTIAL_CAP)),
        }
    }
}

impl std::str::FromStr for Think {
    type Err = ThinkError;

    /// A fixed pause: `"1s"`, `"250ms"` (`"0s"`: none).
    fn from_str(s: &str) -> Result<Think, ThinkError> {
        duration(s).map(Think::fixed)
    }
}

impl fmt::Display for Think {
    /// As written in a plan: `1s`, `uniform 500ms..1s 500ms`, `exponential 1s`, `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Think::None => f.write_str("none"),
            Think::Fixed(d) => write!(f, "{}", humantime::format_duration(d)),
            Think::Uniform { lo, hi } => write!(
                f,
                "uniform {}..{}",
                humantime::format_duration(lo),
                humantime::format_duration(hi)
            ),
            Think::Exponential { mean } => {
                write!(f, "exponential {}", humantime::format_duration(mean))
            }
        }
    }
}

impl Serialize for Think {
    /// The TOML forms: `"0s"`, `"1s"`, `{ uniform = ["500ms", "1s 500ms"] }`,
    /// `{ exponential = "1s" }`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Think::None => s.serialize_str("0s"),
            Think::Fixed(d) => s.serialize_str(&text(d)),
            Think::Uniform { lo, hi } => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("uniform", &[text(lo), text(hi)])?;
                m.end()
            }
            Think::Exponential { mean } => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("exponential", &text(mean))?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Think {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Think, D::Error> {
        d.deserialize_any(ThinkVisitor)
    }
}

struct ThinkVisitor;

impl ThinkVisitor {
    fn number<E: de::Error>(shown: &str) -> E {
        E::custom(ThinkError::BadForm(format!(
            "`{shown}` has no unit (write \"{shown}s\" or \"{shown}ms\")"
        )))
    }
}

impl<'de> Visitor<'de> for ThinkVisitor {
    type Value = Think;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a think time: {THINK_SYNTAX}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Think, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Think, E> {
        Err(Self::number(&v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Think, E> {
        Err(Self::number(&v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Think, E> {
        Err(Self::number(&v.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Think, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom(ThinkError::BadForm(
                "an empty table".into(),
            )));
        };
        let think = match key.as_str() {
            "uniform" => {
                let range: Vec<String> = map.next_value().map_err(|e| {
                    de::Error::custom(ThinkError::BadForm(format!(
                        "`uniform` takes two durations, [\"LO\", \"HI\"] ({e})"
                    )))
                })?;
                let [lo, hi] = range.as_slice() else {
                    return Err(de::Error::custom(ThinkError::BadForm(format!(
                        "`uniform` takes two durations, [\"LO\", \"HI\"], not {}",
                        range.len()
                    ))));
                };
                let (lo_d, hi_d) = (
                    duration(lo).map_err(de::Error::custom)?,
                    duration(hi).map_err(de::Error::custom)?,
                );
                if lo_d > hi_d {
                    return Err(de::Error::custom(ThinkError::Reversed {
                        lo: lo.clone(),
                        hi: hi.clone(),
                    }));
                }
                Think::Uniform { lo: lo_d, hi: hi_d }
            }
            "exponential" => {
                let mean: String = map.next_value().map_err(|e| {
                    de::Error::custom(ThinkError::BadForm(format!(
                        "`exponential` takes its mean, a duration such as \"1s\" ({e})"
                    )))
                })?;
                Think::exponential(duration(&mean).map_err(de::Error::custom)?)
                    .map_err(de::Error::custom)?
            }
            other => {
                return Err(de::Error::custom(ThinkError::BadForm(format!(
                    "unknown distribution `{other}` (known: uniform, exponential)"
                ))))
            }
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(ThinkError::BadForm(format!(
                "one distribution per think time: `{extra}` beside `{key}`"
            ))));
        }
        Ok(think)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[derive(Debug, Deserialize, Serialize)]
    struct Doc {
        think: Think,
    }

    fn parse(toml_text: &str) -> Result<Think, String> {
        toml::from_str::<Doc>(toml_text)
            .map(|d| d.think)
            .map_err(|e| e.message().to_string())
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The mean of `n` draws, in nanoseconds, and the smallest and largest draw.
    fn draws(t: Think, n: usize) -> (f64, u64, u64) {
        let mut rng = SmallRng::seed_from_u64(7);
        let (mut sum, mut lo, mut hi) = (0.0, u64::MAX, 0);
        for _ in 0..n {
            let x = t.sample(&mut rng);
            sum += x as f64;
            lo = lo.min(x);
            hi = hi.max(x);
        }
        (sum / n as f64, lo, hi)
    }

    fn assert_within_2pct(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 0.02 * want,
            "mean {got} is not within 2 % of {want}"
        );
    }

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(parse(r#"think = "1s""#).unwrap(), Think::Fixed(ms(1000)));
        assert_eq!(parse(r#"think = "250ms""#).unwrap(), Think::Fixed(ms(250)));
        assert_eq!(parse(r#"think = "1.5s""#).unwrap(), Think::Fixed(ms(1500)));
        assert_eq!(parse(r#"think = "2""#).unwrap(), Think::Fixed(ms(2000)));
        assert_eq!(parse(r#"think = "0s""#).unwrap(), Think::None);
        assert_eq!(
            parse(r#"think = { uniform = ["500ms", "1.5s"] }"#).unwrap(),
            Think::Uniform {
                lo: ms(500),
                hi: ms(1500)
            }
        );
        assert_eq!(
            parse(r#"think = { exponential = "1s" }"#).unwrap(),
            Think::Exponential { mean: ms(1000) }
        );
    }

    #[test]
    fn round_trips_through_toml_and_json() {
        for t in [
            Think::None,
            Think::Fixed(ms(1500)),
            Think::Uniform {
                lo: ms(500),
                hi: ms(1500),
            },
            Think::Exponential { mean: ms(1000) },
        ] {
            let text = toml::to_string(&Doc { think: t }).unwrap();
            assert_eq!(parse(&text).unwrap(), t, "{text}");
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Think>(&json).unwrap(), t, "{json}");
        }
    }

    #[test]
    fn reversed_uniform_range_is_refused_with_the_right_syntax() {
        let e = parse(r#"think = { uniform = ["2s", "1s"] }"#).unwrap_err();
        assert!(
            e.contains("[2s, 1s] has its low end above its high end"),
            "{e}"
        );
        assert!(
            e.contains(r#"think = { uniform = ["500ms", "1.5s"] }"#),
            "{e}"
        );
        assert!(Think::uniform(ms(2), ms(1)).is_err());
        assert!(Think::uniform(ms(1), ms(1)).is_ok());
    }

    #[test]
    fn negative_durations_are_refused() {
        let e = parse(r#"think = "-1s""#).unwrap_err();
        assert!(e.contains("`-1s` is negative"), "{e}");
        assert!(e.contains(THINK_SYNTAX), "{e}");
        let e = parse(r#"think = { uniform = ["-1s", "1s"] }"#).unwrap_err();
        assert!(e.contains("`-1s` is negative"), "{e}");
        let e = parse(r#"think = { exponential = "-1s" }"#).unwrap_err();
        assert!(e.contains("`-1s` is negative"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_shapes_are_refused_with_the_right_syntax() {
        let e = parse(r#"think = { gauss = "1s" }"#).unwrap_err();
        assert!(e.contains("unknown distribution `gauss`"), "{e}");
        assert!(e.contains(THINK_SYNTAX), "{e}");
        let e = parse(r#"think = { uniform = ["1s"] }"#).unwrap_err();
        assert!(e.contains("two durations"), "{e}");
        let e = parse(r#"think = { uniform = "1s" }"#).unwrap_err();
        assert!(e.contains("two durations"), "{e}");
        let e = parse(r#"think = { exponential = "1s", uniform = ["1s", "2s"] }"#).unwrap_err();
        assert!(e.contains("one distribution per think time"), "{e}");
        let e = parse(r#"think = {}"#).unwrap_err();
        assert!(e.contains("an empty table"), "{e}");
        let e = parse(r#"think = { exponential = "0s" }"#).unwrap_err();
        assert!(e.contains("must be above 0"), "{e}");
        let e = parse(r#"think = "soon""#).unwrap_err();
        assert!(e.contains("`soon` is not a duration"), "{e}");
        let e = parse(r#"think = 1"#).unwrap_err();
        assert!(e.contains("`1` has no unit"), "{e}");
        let e = parse(r#"think = 1.5"#).unwrap_err();
        assert!(e.contains("`1.5` has no unit"), "{e}");
    }

    #[test]
    fn fixed_and_none_draw_their_value() {
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(Think::None.sample(&mut rng), 0);
        assert_eq!(Think::Fixed(ms(250)).sample(&mut rng), 250_000_000);
        assert_eq!(Think::Fixed(ms(250)).mean_ns(), 250e6);
        assert_eq!(Think::None.mean_ns(), 0.0);
        assert_eq!(Think::fixed(Duration::ZERO), Think::None);
    }

    #[test]
    fn uniform_mean_is_within_2pct_and_bounds_hold() {
        let t = Think::Uniform {
            lo: ms(500),
            hi: ms(1500),
        };
        let (mean, lo, hi) = draws(t, 100_000);
        assert_within_2pct(mean, t.mean_ns());
        assert_eq!(t.mean_ns(), 1e9);
        assert!(lo >= 500_000_000 && hi <= 1_500_000_000, "{lo} {hi}");
        // The whole range is used.
        assert!(lo < 510_000_000 && hi > 1_490_000_000, "{lo} {hi}");
        assert_eq!(t.max_ns(), 1_500_000_000);
    }

    #[test]
    fn exponential_mean_is_within_2pct_and_the_cap_holds() {
        let t = Think::Exponential { mean: ms(1000) };
        let (mean, _, hi) = draws(t, 100_000);
        assert_within_2pct(mean, t.mean_ns());
        assert_within_2pct(t.mean_ns(), 1e9);
        assert!(hi <= 10_000_000_000, "{hi}");
        assert_eq!(t.max_ns(), 10_000_000_000);
        // A draw of u near 1 would be unbounded: the cap holds there too.
        struct Top;
        impl RngCore for Top {
            fn next_u32(&mut self) -> u32 {
                u32::MAX
            }
            fn next_u64(&mut self) -> u64 {
                u64::MAX
            }
            fn fill_bytes(&mut self, dest: &mut [u8]) {
                dest.fill(0xff);
            }
            fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
                dest.fill(0xff);
                Ok(())
            }
        }
        assert_eq!(t.sample(&mut Top), 10_000_000_000);
    }

    #[test]
    fn display_reads_as_written() {
        assert_eq!(Think::None.to_string(), "none");
        assert_eq!(Think::Fixed(ms(1500)).to_string(), "1s 500ms");
        assert_eq!(
            Think::uniform(ms(500), ms(1500)).unwrap().to_string(),
            "uniform 500ms..1s 500ms"
        );
        assert_eq!(
            Think::exponential(ms(1000)).unwrap().to_string(),
            "exponential 1s"
        );
    }
}
