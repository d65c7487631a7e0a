//! The latency model of `HelloService.Say`: how long the backend waits before answering.
//!
//! Syntax (durations in `humantime` form: `5ms`, `1s`, `1s 500ms`):
//! - `fixed:5ms`: always the same delay;
//! - `uniform:2ms..300ms`: uniform between the bounds, both included;
//! - `lognormal:median=20ms,p99=300ms[,max=600ms]`: log-normal with the given median and
//!   99th percentile, clamped to `max` (default: twice the p99), so the tail is bounded.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;

/// The inverse of the standard normal CDF at 0.99.
const Z_P99: f64 = 2.326_347_874_040_841;

/// A latency model could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// The text before `:` is not a known model.
    #[error("unknown latency model `{0}`: expected fixed:D, uniform:MIN..MAX or lognormal:median=D,p99=D[,max=D]")]
    UnknownModel(String),
    /// A duration did not parse.
    #[error("invalid duration `{text}`: {source}")]
    Duration {
        /// The text given.
        text: String,
        /// What `humantime` objected to.
        #[source]
        source: humantime::DurationError,
    },
    /// The model's parameters are missing, unknown or inconsistent.
    #[error("invalid latency model `{model}`: {reason}")]
    Invalid {
        /// The whole model text.
        model: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// How long the backend waits before answering a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyModel {
    /// Always the same delay.
    Fixed(Duration),
    /// Uniform between `min` and `max`, both included.
    Uniform {
        /// Shortest delay.
        min: Duration,
        /// Longest delay.
        max: Duration,
    },
    /// Log-normal with the given median and 99th percentile, clamped to `max`.
    LogNormal {
        /// Half the calls wait less than this.
        median: Duration,
        /// 99 % of the calls wait less than this (before clamping).
        p99: Duration,
        /// No call waits longer than this.
        max: Duration,
    },
}

impl Default for LatencyModel {
    /// "A few ms to a few hundred ms", as the source describes its gRPC server:
    /// `lognormal:median=20ms,p99=300ms,max=600ms`.
    fn default() -> Self {
        LatencyModel::LogNormal {
            median: Duration::from_millis(20),
            p99: Duration::from_millis(300),
            max: Duration::from_millis(600),
        }
    }
}

impl LatencyModel {
    /// Draws one delay. Never outside [`bounds`](Self::bounds).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match *self {
            LatencyModel::Fixed(delay) => delay,
            LatencyModel::Uniform { min, max } => rng.gen_range(min..=max),
            LatencyModel::LogNormal { median, p99, max } => {
                let sigma = (p99.as_secs_f64() / median.as_secs_f64()).ln() / Z_P99;
                let secs = median.as_secs_f64() * (sigma * standard_normal(rng)).exp();
                Duration::from_secs_f64(secs.min(max.as_secs_f64()))
            }
        }
    }

    /// The shortest and longest delay the model can produce.
    pub fn bounds(&self) -> (Duration, Duration) {
        match *self {
            LatencyModel::Fixed(delay) => (delay, delay),
            LatencyModel::Uniform { min, max } => (min, max),
            LatencyModel::LogNormal { max, .. } => (Duration::ZERO, max),
        }
    }
}

/// One draw from N(0, 1) by the Box–Muller transform.
fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1 = 1.0 - rng.gen::<f64>(); // in (0, 1], so ln(u1) is finite
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn duration(text: &str) -> Result<Duration, LatencyError> {
    humantime::parse_duration(text.trim()).map_err(|source| LatencyError::Duration {
        text: text.to_owned(),
        source,
    })
}

fn parse_lognormal(model: &str, params: &str) -> Result<LatencyModel, LatencyError> {
    let invalid = |reason| LatencyError::Invalid {
        model: model.to_owned(),
        reason,
    };
    let (mut median, mut p99, mut max) = (None, None, None);
    for pair in params.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid("expected key=duration pairs"))?;
        let slot = match key.trim() {
            "median" => &mut median,
            "p99" => &mut p99,
            "max" => &mut max,
            _ => return Err(invalid("keys are median, p99 and max")),
        };
        *slot = Some(duration(value)?);
    }
    let median = median.ok_or_else(|| invalid("median is required"))?;
    let p99 = p99.ok_or_else(|| invalid("p99 is required"))?;
    if median.is_zero() || p99 <= median {
        return Err(invalid("need 0 < median < p99 (use fixed: for a constant)"));
    }
    let max = max.unwrap_or(p99 * 2);
    if max < median {
        return Err(invalid("max must be at least the median"));
    }
    Ok(LatencyModel::LogNormal { median, p99, max })
}

impl FromStr for LatencyModel {
    type Err = LatencyError;

    fn from_str(model: &str) -> Result<Self, Self::Err> {
        let (kind, params) = model
            .split_once(':')
            .ok_or_else(|| LatencyError::UnknownModel(model.to_owned()))?;
        match kind.trim() {
            "fixed" => Ok(LatencyModel::Fixed(duration(params)?)),
            "uniform" => {
                let (min, max) = params.split_once("..").ok_or(LatencyError::Invalid {
                    model: model.to_owned(),
                    reason: "expected uniform:MIN..MAX",
                })?;
                let (min, max) = (duration(min)?, duration(max)?);
                if min > max {
                    return Err(LatencyError::Invalid {
                        model: model.to_owned(),
                        reason: "MIN must not exceed MAX",
                    });
                }
                Ok(LatencyModel::Uniform { min, max })
            }
            "lognormal" => parse_lognormal(model, params),
            other => Err(LatencyError::UnknownModel(other.to_owned())),
        }
    }
}

impl fmt::Display for LatencyModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(*d).to_string().replace(' ', "");
        match self {
            LatencyModel::Fixed(delay) => write!(f, "fixed:{}", d(delay)),
            LatencyModel::Uniform { min, max } => write!(f, "uniform:{}..{}", d(min), d(max)),
            LatencyModel::LogNormal { median, p99, max } => {
                write!(
                    f,
                    "lognormal:median={},p99={},max={}",
                    d(median),
                    d(p99),
                    d(max)
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_the_three_models() {
        assert_eq!(
            "fixed:5ms".parse::<LatencyModel>().unwrap(),
            LatencyModel::Fixed(ms(5))
        );
        assert_eq!(
            "uniform:2ms..300ms".parse::<LatencyModel>().unwrap(),
            LatencyModel::Uniform {
                min: ms(2),
                max: ms(300)
            }
        );
        assert_eq!(
            "lognormal:median=20ms,p99=300ms"
                .parse::<LatencyModel>()
                .unwrap(),
            LatencyModel::default()
        );
        assert_eq!(
            "lognormal:p99=1s,median=100ms,max=3s"
                .parse::<LatencyModel>()
                .unwrap(),
            LatencyModel::LogNormal {
                median: ms(100),
                p99: ms(1000),
                max: ms(3000)
            }
        );
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "fixed:0s",
            "uniform:2ms..1s500ms",
            "lognormal:median=20ms,p99=300ms,max=600ms",
        ] {
            let model: LatencyModel = text.parse().unwrap();
            assert_eq!(model.to_string(), text);
            assert_eq!(model.to_string().parse::<LatencyModel>().unwrap(), model);
        }
    }

    #[test]
    fn rejects_bad_models() {
        for bad in [
            "",
            "5ms",
            "gaussian:1ms",
            "fixed:soon",
            "uniform:5ms",
            "uniform:300ms..2ms",
            "lognormal:median=20ms",
            "lognormal:median=20ms,p99=10ms",
            "lognormal:median=20ms,p99=300ms,mean=1ms",
            "lognormal:median=20ms,p99=300ms,max=1ms",
            "lognormal:median",
        ] {
            assert!(bad.parse::<LatencyModel>().is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn samples_stay_inside_bounds() {
        let mut rng = SmallRng::seed_from_u64(7);
        for text in [
            "fixed:5ms",
            "uniform:2ms..300ms",
            "lognormal:median=20ms,p99=300ms",
        ] {
            let model: LatencyModel = text.parse().unwrap();
            let (lo, hi) = model.bounds();
            for _ in 0..10_000 {
                let delay = model.sample(&mut rng);
                assert!(
                    lo <= delay && delay <= hi,
                    "{text}: {delay:?} outside {lo:?}..={hi:?}"
                );
            }
        }
    }

    #[test]
    fn lognormal_hits_its_median_and_p99() {
        let model = LatencyModel::default();
        let mut rng = SmallRng::seed_from_u64(42);
        let mut samples: Vec<Duration> = (0..20_000).map(|_| model.sample(&mut rng)).collect();
        samples.sort();
        let median = samples[samples.len() / 2];
        let p99 = samples[samples.len() * 99 / 100];
        assert!(ms(17) < median && median < ms(23), "median {median:?}");
        assert!(ms(230) < p99 && p99 < ms(390), "p99 {p99:?}");
    }

    #[test]
    fn uniform_covers_its_range() {
        let model: LatencyModel = "uniform:10ms..20ms".parse().unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let samples: Vec<Duration> = (0..2_000).map(|_| model.sample(&mut rng)).collect();
        assert!(samples.iter().any(|d| *d < ms(11)));
        assert!(samples.iter().any(|d| *d > ms(19)));
    }
}
