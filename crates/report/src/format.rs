//! How the reports print numbers: loads, milliseconds, percentages and confidences, one
//! definition each for report.md, report.html, the answer, `compare` and the baseline.

/// Milliseconds: `-` when absent, three significant figures at most.
pub fn ms(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

/// A knee's bound or a step's load: whole from 100 up or when whole, else up to two
/// decimals with trailing zeros dropped (`41.25`, `27.5`), so that a bisected bound reads as
/// it was run.
pub fn load(v: f64) -> String {
    if v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A rate or other figure: whole from 100 up or when whole, one decimal below.
pub fn num(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A signed change in percent: `+38 %`, `-2.5 %`.
pub fn pct(x: f64) -> String {
    let v = 100.0 * x;
    if v.abs() >= 10.0 {
        format!("{v:+.0} %")
    } else {
        format!("{v:+.1} %")
    }
}

/// A fraction as an unsigned percentage: `5 %`.
pub fn pct_abs(x: f64) -> String {
    let v = 100.0 * x;
    if v.fract() == 0.0 || v >= 10.0 {
        format!("{v:.0} %")
    } else {
        format!("{v:.1} %")
    }
}

/// An interval of changes: `+30..+47 %`.
pub fn pct_range(lo: f64, hi: f64) -> String {
    let one = |x: f64| {
        let v = 100.0 * x;
        if v.abs() >= 10.0 {
            format!("{v:+.0}")
        } else {
            format!("{v:+.1}")
        }
    };
    format!("{}..{} %", one(lo), one(hi))
}

/// `99.9 %`.
pub fn confidence(c: f64) -> String {
    let v = 100.0 * c;
    if v.fract() == 0.0 {
        format!("{v:.0} %")
    } else {
        format!("{v} %")
    }
}
