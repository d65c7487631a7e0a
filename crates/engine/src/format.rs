//! How loadlab prints numbers for people: loads, milliseconds, percentages and confidences,
//! one definition each for the terminal summary, the lab's verdicts, gates and diagnoses,
//! and the reports (report.md, report.html, the answer, `compare`, the baseline).

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

/// Milliseconds with their unit, as the terminal summary prints them (`850.000ms`,
/// `12.3ms`, `1.25s`), `-` when absent.
pub fn ms_unit(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x >= 1000.0 => format!("{:.2}s", x / 1000.0),
        Some(x) if x >= 10.0 => format!("{x:.1}ms"),
        Some(x) => format!("{x:.3}ms"),
    }
}

/// Milliseconds with their unit and the precision a gate is judged at (`0.125 ms`,
/// `12.50 ms`, `250 ms`).
pub fn ms_precise(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// A fraction as a percentage with the precision a gate is judged at (`0.050 %`,
/// `1.25 %`).
pub fn pct_precise(x: f64) -> String {
    let p = 100.0 * x;
    if p == 0.0 || p >= 1.0 {
        format!("{p:.2} %")
    } else {
        format!("{p:.3} %")
    }
}

/// A fraction as a whole percentage (`42 %`); a share above zero that would round to
/// `0 %` reads `< 1 %`.
pub fn pct_whole(x: f64) -> String {
    let p = 100.0 * x;
    if p > 0.0 && p < 0.5 {
        "< 1 %".to_string()
    } else {
        format!("{:.0} %", p.round())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_percentage_never_reads_zero_for_a_share_above_zero() {
        assert_eq!(pct_whole(0.0), "0 %");
        assert_eq!(pct_whole(0.004), "< 1 %");
        assert_eq!(pct_whole(0.005), "1 %");
        assert_eq!(pct_whole(0.42), "42 %");
    }
}
