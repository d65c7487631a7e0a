//! Line charts as inline SVG, written by hand: axes with readable ticks (linear, or
//! decades on a log scale), one polyline per series with a point marker each carrying a
//! `<title>` (the browser's own hover read-out), optional reference lines (an SLO bound,
//! a knee, the diagonal), and a legend whose entries toggle their series (the report's
//! small script looks for `data-series`). No JavaScript is needed to read a chart, and
//! it prints.

use std::fmt::Write;

/// Escapes text for HTML and SVG (element content and attribute values).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dash {
    /// A solid line.
    Solid,
    /// Dashes.
    Dashed,
    /// Dots.
    Dotted,
    /// Dashes and dots.
    DashDot,
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in data units, in x order.
    pub points: Vec<(f64, f64)>,
    /// Palette index (series of one configuration share it).
    pub color: usize,
    /// Line style (one per statistic).
    pub dash: Dash,
}

/// A reference line across the plot.
#[derive(Clone, Debug)]
pub struct Mark {
    /// Where, in data units.
    pub at: f64,
    /// Its label.
    pub label: String,
    /// Its hover read-out (the label when empty).
    pub note: String,
    /// Palette index, or `None` for grey.
    pub color: Option<usize>,
    /// A horizontal mark starts here (x, data units) instead of at the left edge: a bound
    /// that applies from some x on (the p99 bound from the 99th percentile).
    pub from_x: Option<f64>,
}

/// A shaded range across the plot's height: a knee measured as a range (the last load
/// sustained to the first not sustained).
#[derive(Clone, Debug)]
pub struct Band {
    /// Where it starts and ends, in data units.
    pub from: f64,
    /// Where it ends.
    pub to: f64,
    /// Its label.
    pub label: String,
    /// Its hover read-out (the label when empty).
    pub note: String,
    /// Palette index, or `None` for grey.
    pub color: Option<usize>,
}

/// A chart and what it draws.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// Heading inside the chart.
    pub title: String,
    /// X axis label, with its unit.
    pub x_label: String,
    /// Y axis label, with its unit.
    pub y_label: String,
    /// Log scale on x.
    pub x_log: bool,
    /// Log scale on y.
    pub y_log: bool,
    /// The lines.
    pub series: Vec<Series>,
    /// Horizontal reference lines (y values).
    pub h_marks: Vec<Mark>,
    /// Vertical reference lines (x values).
    pub v_marks: Vec<Mark>,
    /// Shaded ranges of x (knees).
    pub v_bands: Vec<Band>,
    /// The x axis spans at least this range (charts that share a time axis).
    pub x_span: Option<(f64, f64)>,
    /// The y axis spans at least this range (small multiples read on one scale).
    pub y_span: Option<(f64, f64)>,
    /// Draw y = k·x (achieved against offered: k = 1 for requests, the requests of one
    /// session for a flow's sessions).
    pub diagonal: Option<f64>,
    /// Tick labels on x for the percentile plot: `(x, label)`; empty for numeric ticks.
    pub x_ticks: Vec<(f64, String)>,
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];
const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// The color of palette entry `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            if from_zero {
                lo = lo.min(0.0);
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            let step = nice_step((hi - lo) / 5.0);
            lo = (lo / step).floor() * step;
            hi = (hi / step).ceil() * step;
        }
        Axis { lo, hi, log }
    }

    /// 0..1 along the axis.
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            let v = v.max(self.lo * 1e-3);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            let mut v = self.lo;
            while v <= self.hi * 1.000_001 {
                t.push(v);
                v *= 10.0;
            }
            t
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let mut t = Vec::new();
            let mut v = self.lo;
            while v <= self.hi + step * 1e-6 {
                t.push(v);
                v += step;
            }
            t
        }
    }
}

/// 1, 2 or 5 times a power of ten, near `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    p * if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// A number for a tick or a read-out: few digits, thousands as `k`.
pub fn short_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(v)
    } else {
        format!("{}", (v * 1000.0).round() / 1000.0)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Chart {
    /// The chart as an `<svg>` element (a `figure` of the report).
    pub fn render(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let xa = Axis::new(
            xs.chain(self.v_marks.iter().map(|m| m.at))
                .chain(self.v_bands.iter().flat_map(|b| [b.from, b.to]))
                .chain(self.x_span.iter().flat_map(|&(a, b)| [a, b])),
            self.x_log,
            !self.x_log && self.x_span.is_none(),
        );
        let ys = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let diag: Vec<f64> = match self.diagonal {
            Some(k) => vec![k * xa.lo, k * xa.hi],
            None => Vec::new(),
        };
        let ya = Axis::new(
            ys.chain(self.h_marks.iter().map(|m| m.at))
                .chain(diag.iter().copied())
                .chain(self.y_span.iter().flat_map(|&(a, b)| [a, b])),
            self.y_log,
            !self.y_log,
        );
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let px = |x: f64| LEFT + xa.frac(x).clamp(0.0, 1.0) * pw;
        let py = |y: f64| TOP + (1.0 - ya.frac(y).clamp(0.0, 1.0)) * ph;
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{}">"#,
            esc(&self.title)
        );
        let _ = write!(
            o,
            r#"<text x="{LEFT}" y="16" class="title">{}</text>"#,
            esc(&self.title)
        );
        // Grid and ticks.
        for t in ya.ticks() {
            let y = py(t);
            let _ = write!(
                o,
                r#"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                short_num(t)
            );
        }
        let x_ticks: Vec<(f64, String)> = if self.x_ticks.is_empty() {
            xa.ticks().into_iter().map(|t| (t, short_num(t))).collect()
        } else {
            self.x_ticks.clone()
        };
        for (t, label) in &x_ticks {
            let x = px(*t);
            let _ = write!(
                o,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" class="grid"/><text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
                TOP + ph,
                TOP + ph + 16.0,
                esc(label)
            );
        }
        let _ = write!(
            o,
            r#"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" class="frame"/><text x="{:.1}" y="{:.1}" class="label" text-anchor="middle">{}</text><text transform="translate(14 {:.1}) rotate(-90)" class="label" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 8.0,
            esc(&self.x_label),
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        if let Some(k) = self.diagonal.filter(|k| *k > 0.0) {
            let (x0, x1) = (xa.lo.max(ya.lo / k), xa.hi.min(ya.hi / k));
            let title = if k == 1.0 {
                "achieved = offered".to_string()
            } else {
                format!("achieved = offered × {} requests per session", short_num(k))
            };
            let _ = write!(
                o,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="ref"><title>{title}</title></line>"#,
                px(x0),
                py(k * x0),
                px(x1),
                py(k * x1)
            );
        }
        for (i, b) in self.v_bands.iter().enumerate() {
            let (x0, x1) = (px(b.from), px(b.to));
            let note = if b.note.is_empty() { &b.label } else { &b.note };
            let fill = b.color.map_or("#888", color);
            let _ = write!(
                o,
                r#"<rect x="{x0:.1}" y="{TOP}" width="{:.1}" height="{ph:.1}" class="band" fill="{fill}" fill-opacity="0.13"><title>{}</title></rect><text x="{:.1}" y="{:.1}" class="mark"><title>{}</title>{}</text>"#,
                (x1 - x0).max(1.5),
                esc(note),
                x0 + 3.0,
                TOP + ph - 6.0 - 12.0 * (i % 4) as f64,
                esc(note),
                esc(&b.label)
            );
        }
        for m in &self.h_marks {
            let y = py(m.at);
            let x0 = m.from_x.map_or(LEFT, &px);
            let _ = write!(
                o,
                r#"<line x1="{x0:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" class="ref"{}><title>{}</title></line><text x="{:.1}" y="{:.1}" class="mark" text-anchor="end">{}</text>"#,
                LEFT + pw,
                stroke(m.color),
                esc(&m.label),
                LEFT + pw - 4.0,
                y - 4.0,
                esc(&m.label)
            );
        }
        for (i, m) in self.v_marks.iter().enumerate() {
            let x = px(m.at);
            let note = if m.note.is_empty() { &m.label } else { &m.note };
            // Labels stagger down so that marks close together stay readable.
            let _ = write!(
                o,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" class="ref"{}><title>{}</title></line><text x="{:.1}" y="{:.1}" class="mark"><title>{}</title>{}</text>"#,
                TOP + ph,
                stroke(m.color),
                esc(note),
                x + 3.0,
                TOP + 12.0 + 12.0 * (i % 4) as f64,
                esc(note),
                esc(&m.label)
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = color(s.color);
            let dash = match s.dash {
                Dash::Solid => "",
                Dash::Dashed => r#" stroke-dasharray="7 4""#,
                Dash::Dotted => r#" stroke-dasharray="2 3""#,
                Dash::DashDot => r#" stroke-dasharray="8 3 2 3""#,
            };
            let pts: Vec<String> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
                .collect();
            let _ = write!(
                o,
                r#"<g data-series="{i}"><polyline points="{}" fill="none" stroke="{c}" stroke-width="1.8"{dash}/>"#,
                pts.join(" ")
            );
            // Markers with read-outs, unless the series is a dense time line.
            if s.points.len() <= 60 {
                for (x, y) in s
                    .points
                    .iter()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                {
                    let _ = write!(
                        o,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"><title>{}: {} at {}</title></circle>"#,
                        px(*x),
                        py(*y),
                        esc(&s.name),
                        short_num(*y),
                        short_num(*x)
                    );
                }
            }
            o.push_str("</g>");
        }
        o.push_str("</svg>");
        // The legend, outside the SVG so that it wraps; each entry toggles its series.
        if !self.series.is_empty() {
            o.push_str(r#"<div class="legend">"#);
            for (i, s) in self.series.iter().enumerate() {
                let style = match s.dash {
                    Dash::Solid => "solid",
                    Dash::Dashed => "dashed",
                    Dash::Dotted => "dotted",
                    Dash::DashDot => "double",
                };
                let _ = write!(
                    o,
                    r#"<button type="button" data-toggle="{i}"><span style="border-top:3px {style} {}"></span>{}</button>"#,
                    color(s.color),
                    esc(&s.name)
                );
            }
            o.push_str("</div>");
        }
        o
    }
}

fn stroke(c: Option<usize>) -> String {
    c.map(|c| format!(r#" style="stroke:{}""#, color(c)))
        .unwrap_or_default()
}

/// At most `n` points of `points`, evenly picked, the first and last kept, and each kept
/// point the largest `y` of the points it stands for (a spike in a long series survives).
pub fn downsample(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    if points.len() <= n || n < 2 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(n);
    points
        .chunks(per)
        .map(|c| {
            let x = c[0].0;
            let y = c.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
            (x, y)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn axes_pick_readable_ticks() {
        let a = Axis::new([3.0, 47.0].into_iter(), false, true);
        assert_eq!((a.lo, a.hi), (0.0, 50.0));
        assert_eq!(a.ticks(), vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        let l = Axis::new([0.3, 420.0].into_iter(), true, false);
        assert_eq!((l.lo, l.hi), (0.1, 1000.0));
        assert_eq!(l.ticks().len(), 5);
        assert!((l.frac(10.0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_chart_has_its_series_marks_and_read_outs() {
        let c = Chart {
            title: "p99 <of> s".into(),
            x_label: "offered (req/s)".into(),
            y_label: "latency (ms)".into(),
            y_log: true,
            series: vec![Series {
                name: "workers=2 p99".into(),
                points: vec![(10.0, 1.0), (50.0, 900.0)],
                color: 0,
                dash: Dash::Solid,
            }],
            h_marks: vec![Mark {
                at: 100.0,
                label: "SLO p99 100 ms".into(),
                note: String::new(),
                color: None,
                from_x: None,
            }],
            v_marks: vec![Mark {
                at: 30.0,
                label: "knee".into(),
                note: String::new(),
                color: Some(0),
                from_x: None,
            }],
            ..Chart::default()
        }
        .render();
        assert!(c.contains("p99 &lt;of&gt; s"));
        assert!(c.contains(r#"data-series="0""#) && c.contains(r#"data-toggle="0""#));
        assert!(c.contains("<title>workers=2 p99: 900 at 50</title>"), "{c}");
        assert!(c.contains("SLO p99 100 ms") && c.contains(">knee<"));
        assert_eq!(c.matches("<circle").count(), 2);
    }

    #[test]
    fn downsampling_keeps_spikes_and_bounds_the_points() {
        let mut pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, 1.0)).collect();
        pts[777].1 = 50.0;
        let d = downsample(&pts, 100);
        assert!(d.len() <= 100);
        assert!(d.iter().any(|p| p.1 == 50.0));
        assert_eq!(d[0].0, 0.0);
    }
}
