//! `report.html`: the bundle as one self-contained page. Charts are inline SVG
//! ([`crate::svg`]); the tables are `report.md` itself, rendered to HTML; a few lines of
//! inline script toggle a chart's series from its legend (hover read-outs are the SVG's own
//! `<title>`s). No network access, no external file: it opens from disk and prints.
//!
//! What it draws: first the answer ([`crate::answer`]), before any chart. Per scenario:
//! latency (p50, p99, p99.9, mean) against offered load, one colour per configuration, the
//! SLO bound and each knee shaded from the last load held to the first not held; achieved
//! against offered with the diagonal; errors by class against offered load (when there were
//! any); the percentile distribution of the steps on each side of each knee;
//! for a scenario of named requests, at those same steps, one chart per step with the
//! percentile curve of each name and of all requests together.
//! Per step (folded): the per-second timeline (achieved, errors, p99) and the target's
//! probes (CPU, RSS, listen overflows, TIME_WAIT), one unit per chart, every chart of the
//! step on the same time span. Long series are
//! downsampled for drawing ([`svg::downsample`], keeping spikes); percentiles always come
//! from the full histograms.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use loadlab_engine::records::decode_histogram;
use loadlab_lab::bundle::{ConfigRecord, StepRecord};
use loadlab_lab::plan::{Model, Plan};

use crate::svg::{self, esc, Chart, Dash, Mark, Series};
use loadlab_lab::diagnosis::LatencySplit;

/// Points per drawn time series at most.
const MAX_POINTS: usize = 300;

/// The inline style sheet.
const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 48px;color:#222}
h1{font-size:24px;margin-top:24px}h2{font-size:20px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}h3{font-size:16px}
.env{color:#555}
figure{display:inline-block;vertical-align:top;margin:8px 12px 16px 0;width:500px;max-width:100%}
svg.chart{width:100%;height:auto;background:#fff}
svg .title{font-size:13px;font-weight:600}svg .tick{font-size:10px;fill:#555}svg .label{font-size:11px;fill:#333}svg .mark{font-size:10px;fill:#444;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#bbb}svg .ref{stroke:#888;stroke-dasharray:4 3}
.legend{display:flex;flex-wrap:wrap;gap:4px 10px;font-size:11px}
.legend button{border:0;background:none;padding:0;font:inherit;cursor:pointer;color:#333}
.legend button span{display:inline-block;width:22px;margin-right:4px;vertical-align:middle}
.legend button.off{opacity:.35;text-decoration:line-through}
details{border:1px solid #e4e4e4;border-radius:4px;padding:4px 8px;margin:6px 0}summary{cursor:pointer}
.ok{color:#2a7a2a}.bad{color:#b22}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:2px 6px;font-size:13px}th{background:#f6f6f6}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}code{font-size:12px}
@media print{details{border:0}details>summary{list-style:none}.legend button.off{display:none}figure{break-inside:avoid}}
"#;

/// Toggles a series when its legend entry is clicked.
const SCRIPT: &str = r#"
document.querySelectorAll('.legend button').forEach(function(b){
  b.addEventListener('click',function(){
    var f=b.closest('figure'); if(!f) return;
    var g=f.querySelector('[data-series="'+b.getAttribute('data-toggle')+'"]'); if(!g) return;
    var hide=g.style.display!=='none'; g.style.display=hide?'none':''; b.classList.toggle('off',hide);
  });
});
"#;

/// Where `report.html` of a bundle is.
pub fn html_path(dir: &Path) -> PathBuf {
    dir.join("report.html")
}

/// Renders `report.html` of the bundle in `dir` and writes it; returns its path.
pub fn write_html(dir: &Path) -> std::io::Result<PathBuf> {
    let page = render_html(dir)?;
    let path = html_path(dir);
    std::fs::write(&path, page)?;
    Ok(path)
}

/// The page for the bundle in `dir` (`report.md` is rendered fresh, not read).
pub fn render_html(dir: &Path) -> std::io::Result<String> {
    Ok(render_view(&crate::view::Bundle::load(dir)?))
}

/// The page for a loaded bundle (its report.md rendered from the same view).
pub(crate) fn render_view(b: &crate::view::Bundle) -> String {
    let dir = b.dir.as_path();
    let (plan, env, steps, configs) = (&b.plan, &b.env, &b.steps, &b.configs);
    let (markdown, _) = crate::markdown::render_view(b);

    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>loadlab report: {}</title><style>{STYLE}</style></head><body>",
        esc(&plan.name)
    );
    let _ = write!(o, "<h1>loadlab report: {}</h1>", esc(&plan.name));
    if !plan.description.trim().is_empty() {
        let _ = write!(o, "<p>{}</p>", esc(plan.description.trim()));
    }
    if let Some(e) = &env {
        let _ = write!(
            o,
            "<p class=\"env\">Run {} on {} ({} cores), kernel {}, loadlab {}{}. Latency is measured from each request's intended send time. Hover a point for its value; click a legend entry to hide or show its line.</p>",
            esc(&e.started_at),
            esc(&e.cpu_model),
            e.cores,
            esc(&e.kernel),
            esc(&e.loadlab_version),
            crate::markdown::scale(plan, |set| format!("<code>--matrix {}</code>", esc(set)))
        );
    }

    // `loadlab tune`: its answer before any chart.
    if let Some(Ok(t)) = crate::tune::read(dir) {
        let text = crate::tune::text(&t);
        let parser = pulldown_cmark::Parser::new_ext(&text, pulldown_cmark::Options::ENABLE_TABLES);
        o.push_str("<section class=\"tune md\">");
        pulldown_cmark::html::push_html(&mut o, parser);
        o.push_str("</section>");
    }
    // The answer before any chart: each knee, its why, the SLO clauses around it.
    let answer = crate::answer::markdown(plan, steps, configs);
    if !answer.is_empty() {
        let parser =
            pulldown_cmark::Parser::new_ext(&answer, pulldown_cmark::Options::ENABLE_TABLES);
        o.push_str("<section class=\"answer md\" id=\"answer\">");
        pulldown_cmark::html::push_html(&mut o, parser);
        o.push_str("</section>");
    }

    let config_order: Vec<&str> =
        configs
            .iter()
            .map(|c| c.config.as_str())
            .fold(Vec::new(), |mut v, c| {
                if !v.contains(&c) {
                    v.push(c);
                }
                v
            });
    let mut config_order = config_order;
    for s in steps {
        if !config_order.contains(&s.config.as_str()) {
            config_order.push(&s.config);
        }
    }
    let color_of = |config: &str| config_order.iter().position(|c| *c == config).unwrap_or(0);
    let unit = match plan.unit() {
        "req/s" => "offered load (req/s)",
        "msg/s" => "offered load (msg/s)",
        "events/s" => "offered load (events/s)",
        "sessions/s" => "offered load (sessions/s)",
        u @ ("users" | "open connections" | "open streams") => u,
        _ => "requests in flight",
    };

    for sc in &plan.scenarios {
        let mine: Vec<&StepRecord> = steps.iter().filter(|s| s.scenario == sc.name).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = write!(
            o,
            "<section class=\"scenario\" data-scenario=\"{0}\"><h2>{0}</h2>",
            esc(&sc.name)
        );
        o.push_str(&scenario_charts(
            plan,
            &sc.name,
            &mine,
            configs,
            &config_order,
            unit,
            &color_of,
        ));
        o.push_str(&names_charts(plan, &sc.name, &mine, configs, &config_order));
        o.push_str("</section>");
    }

    // The tables of report.md, the same words.
    o.push_str("<h2>Tables</h2><div class=\"md\">");
    // report.md's title, description and run line are the page's header already.
    let body = markdown
        .find("Sustained means")
        .map_or(markdown.as_str(), |i| &markdown[i..]);
    let parser = pulldown_cmark::Parser::new_ext(body, pulldown_cmark::Options::ENABLE_TABLES);
    let mut md = String::new();
    pulldown_cmark::html::push_html(&mut md, parser);
    o.push_str(&md);
    o.push_str("</div>");

    // Every step, folded.
    o.push_str("<h2>Steps</h2><p>Each step's seconds: what loadlab measured (achieved, errors, p99) and what the probes saw of the target and the kernel, on one time axis (seconds of the measured window; the warm-up is negative).</p>");
    for s in steps {
        o.push_str(&step_details(s));
    }

    o.push_str("<h2>Environment and plan</h2>");
    if let Some(e) = &env {
        let _ = write!(
            o,
            "<details><summary>environment.json</summary><pre>{}</pre></details>",
            esc(&serde_json::to_string_pretty(e).unwrap_or_default())
        );
    }
    let _ = write!(
        o,
        "<details><summary>plan</summary><pre>{}</pre></details>",
        esc(&serde_json::to_string_pretty(&plan).unwrap_or_default())
    );
    let _ = write!(o, "<script>{SCRIPT}</script></body></html>");
    o
}

/// The runs of one scenario and configuration, one per load (the last run at a load
/// stands for it: a confirmation repeats the search's), in load order.
fn per_load<'a>(steps: &[&'a StepRecord], config: &str) -> Vec<&'a StepRecord> {
    let mut by_load: BTreeMap<u64, &StepRecord> = BTreeMap::new();
    for s in steps.iter().filter(|s| s.config == config) {
        by_load.insert(s.load.to_bits(), s);
    }
    let mut v: Vec<&StepRecord> = by_load.into_values().collect();
    v.sort_by(|a, b| a.load.total_cmp(&b.load));
    v
}

fn scenario_charts(
    plan: &Plan,
    scenario: &str,
    steps: &[&StepRecord],
    configs: &[ConfigRecord],
    config_order: &[&str],
    unit: &str,
    color_of: &dyn Fn(&str) -> usize,
) -> String {
    let mut latency = Chart {
        title: format!("{scenario}: latency against load"),
        x_label: unit.into(),
        y_label: "latency (ms, log scale)".into(),
        y_log: true,
        ..Chart::default()
    };
    let mut achieved = Chart {
        title: format!("{scenario}: achieved against offered"),
        x_label: unit.into(),
        y_label: "achieved (successful req/s)".into(),
        // A flow's sessions offer their requests each: the line is offered × that.
        diagonal: (plan.load.model == Model::Open).then(|| {
            steps
                .iter()
                .find_map(|s| s.result.sessions.as_ref())
                .map_or(1.0, |x| x.requests_per_session as f64)
        }),
        ..Chart::default()
    };
    let mut errors = Chart {
        title: format!("{scenario}: errors by class against load"),
        x_label: unit.into(),
        y_label: "failed requests (% of attempts)".into(),
        ..Chart::default()
    };
    let mut dist = Chart {
        title: format!("{scenario}: latency percentiles, last step held and first not"),
        x_label: "percentile".into(),
        y_label: "latency (ms, log scale)".into(),
        y_log: true,
        x_ticks: percentile_ticks(),
        ..Chart::default()
    };
    if let Some(p99) = plan.slo.p99_ms {
        latency.h_marks.push(slo_mark(p99, None));
        // On the percentile axis the bound holds from the 99th percentile on.
        dist.h_marks.push(slo_mark(p99, Some(percentile_x(99.0))));
    }
    // Knee ranges, with the configurations that have each.
    let mut knees: BTreeMap<(u64, u64), Vec<(&str, usize)>> = BTreeMap::new();
    // The error classes any step of the scenario had, in the engine's order.
    let classes: Vec<loadlab_engine::ErrorClass> = loadlab_engine::ErrorClass::ALL
        .iter()
        .copied()
        .filter(|c| steps.iter().any(|s| s.result.errors[*c] > 0))
        .collect();
    let dashes = [Dash::Solid, Dash::Dashed, Dash::Dotted, Dash::DashDot];
    // Where each step's mean latency went, one chart per configuration.
    let mut splits: Vec<Chart> = Vec::new();
    // The configurations drawn, with their colours.
    let mut drawn: Vec<(&str, usize)> = Vec::new();
    for config in config_order {
        let runs = per_load(steps, config);
        if runs.is_empty() {
            continue;
        }
        let c = color_of(config);
        drawn.push((config, c));
        let parts: Vec<LatencySplit> = runs
            .iter()
            .filter_map(|s| LatencySplit::of(s.load, &s.result))
            .collect();
        let part = |f: &dyn Fn(&LatencySplit) -> f64| -> Vec<(f64, f64)> {
            parts.iter().map(|p| (p.load, f(p))).collect()
        };
        splits.push(Chart {
            title: if config_order.len() > 1 {
                format!("{scenario} · {config}: where the mean latency went")
            } else {
                format!("{scenario}: where the mean latency went")
            },
            x_label: unit.into(),
            y_label: "mean latency (ms)".into(),
            series: vec![
                Series {
                    name: "the server (service time)".into(),
                    points: part(&|p| p.service_ms),
                    color: 0,
                    dash: Dash::Solid,
                },
                Series {
                    name: "queued in loadlab (a connection or the schedule)".into(),
                    points: part(&|p| p.queued_ms),
                    color: 1,
                    dash: Dash::Dashed,
                },
                Series {
                    name: "connecting".into(),
                    points: part(&|p| p.connect_ms),
                    color: 2,
                    dash: Dash::Dotted,
                },
            ],
            ..Chart::default()
        });
        let stat = |f: &dyn Fn(&StepRecord) -> Option<f64>| -> Vec<(f64, f64)> {
            runs.iter().filter_map(|s| Some((s.load, f(s)?))).collect()
        };
        for (name, dash, pts) in [
            ("p50", Dash::Dotted, stat(&|s| s.result.latency_ms.p50)),
            ("p99", Dash::Solid, stat(&|s| s.result.latency_ms.p99)),
            ("p99.9", Dash::Dashed, stat(&|s| s.result.latency_ms.p999)),
            ("mean", Dash::DashDot, stat(&|s| s.result.latency_ms.mean)),
        ] {
            latency.series.push(Series {
                name: format!("{config} {name}"),
                points: pts,
                color: c,
                dash,
            });
        }
        achieved.series.push(Series {
            name: config.to_string(),
            points: stat(&|s| Some(s.result.achieved_rps)),
            color: c,
            dash: Dash::Solid,
        });
        for (i, class) in classes.iter().enumerate() {
            errors.series.push(Series {
                name: if config_order.len() > 1 {
                    format!("{config} {}", class.name())
                } else {
                    class.name().to_string()
                },
                points: stat(&|s| {
                    let attempts = s.result.attempts().max(1) as f64;
                    Some(100.0 * s.result.errors[*class] as f64 / attempts)
                }),
                color: if config_order.len() > 1 { c } else { i },
                dash: if config_order.len() > 1 {
                    dashes[i % dashes.len()]
                } else {
                    Dash::Solid
                },
            });
        }
        let (knee, first_unsustained) = knee_of(configs, scenario, config, &runs);
        {
            // A knee is shaded from the last load sustained to the first not sustained.
            if let (Some(lo), Some(hi)) = (knee, first_unsustained) {
                knees
                    .entry((lo.to_bits(), hi.to_bits()))
                    .or_default()
                    .push((config, c));
            }
            // The distributions on either side of the knee.
            let [below, above] = knee_steps(&runs, knee, first_unsustained);
            for (s, dash, what) in [
                (below, Dash::Solid, "sustained"),
                (above, Dash::Dashed, "not sustained"),
            ] {
                if let Some(s) = s {
                    dist.series.push(Series {
                        name: format!("{config} at {} ({what})", svg::short_num(s.load)),
                        points: percentile_curve(&s.result.histograms.latency),
                        color: c,
                        dash,
                    });
                }
            }
        }
    }
    // Each configuration's own knee band, for its small multiples.
    let mut own_bands: Vec<(&str, svg::Band)> = Vec::new();
    for ((lo, hi), at) in knees {
        let (lo, hi) = (f64::from_bits(lo), f64::from_bits(hi));
        let band = svg::Band {
            from: lo,
            to: hi,
            label: format!("knee {}–{}", svg::short_num(lo), svg::short_num(hi)),
            note: format!(
                "knee between {} and {}: {}",
                svg::short_num(lo),
                svg::short_num(hi),
                at.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
            ),
            color: (at.len() == 1).then(|| at[0].1),
        };
        latency.v_bands.push(band.clone());
        achieved.v_bands.push(band.clone());
        errors.v_bands.push(band.clone());
        for (config, _) in &at {
            own_bands.push((config, band.clone()));
            if let Some((i, _)) = drawn.iter().enumerate().find(|(_, (c, _))| c == config) {
                splits[i].v_bands.push(svg::Band {
                    color: None,
                    ..band.clone()
                });
            }
        }
    }
    // Beyond two configurations, the charts with a line per configuration and figure are
    // drawn once per configuration instead, on shared scales (a legend stays short).
    let many = drawn.len() > 2;
    let mut charts: Vec<Chart> = Vec::new();
    if many {
        charts.extend(small_multiples(&latency, &drawn, &own_bands, false));
        charts.push(achieved);
        charts.extend(small_multiples(&errors, &drawn, &own_bands, true));
    } else {
        charts.extend([latency, achieved, errors]);
    }
    charts.push(dist);
    let span = shared_span(&splits);
    charts.extend(splits.into_iter().map(|c| Chart { y_span: span, ..c }));
    let mut o = String::new();
    for chart in charts {
        if chart.series.iter().all(|s| s.points.is_empty()) {
            continue;
        }
        let _ = write!(o, "<figure>{}</figure>", chart.render());
    }
    o
}

/// The y range of every point of `charts`, for small multiples read on one scale.
fn shared_span(charts: &[Chart]) -> Option<(f64, f64)> {
    let ys = charts
        .iter()
        .flat_map(|c| c.series.iter())
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite() && *y > 0.0);
    ys.fold(None, |acc, y| match acc {
        None => Some((y, y)),
        Some((lo, hi)) => Some((f64::min(lo, y), f64::max(hi, y))),
    })
}

/// One chart per configuration from a chart whose series are named `CONFIG FIGURE`: each
/// with that configuration's series (named by the figure alone) and its own knee bands
/// (`bands`), the x and y scales of the whole. With `recolor`, the series of each are
/// coloured in turn (one colour per figure) instead of by configuration.
fn small_multiples(
    whole: &Chart,
    drawn: &[(&str, usize)],
    bands: &[(&str, svg::Band)],
    recolor: bool,
) -> Vec<Chart> {
    let xs = whole
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let x_span = xs.fold(None, |acc: Option<(f64, f64)>, x| match acc {
        None => Some((x, x)),
        Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
    });
    let y_span = shared_span(std::slice::from_ref(whole));
    drawn
        .iter()
        .map(|(config, _)| {
            let prefix = format!("{config} ");
            let series: Vec<Series> = whole
                .series
                .iter()
                .filter_map(|s| s.name.strip_prefix(&prefix).map(|n| (n, s)))
                .enumerate()
                .map(|(i, (name, s))| Series {
                    name: name.to_string(),
                    color: if recolor { i } else { s.color },
                    dash: if recolor { Dash::Solid } else { s.dash },
                    ..s.clone()
                })
                .collect();
            let v_bands = bands
                .iter()
                .filter(|(c, _)| c == config)
                .map(|(_, b)| b.clone())
                .collect();
            Chart {
                title: format!("{} · {config}", whole.title),
                series,
                v_bands,
                x_span,
                y_span,
                ..whole.clone()
            }
        })
        .collect()
}

/// The knee of a scenario in a configuration: the highest value sustained and the first
/// not sustained, from the search's outcome, or from fixed steps (the Markdown report's
/// [`crate::knee::fixed_knee`], so the page and the table say the same).
fn knee_of(
    configs: &[ConfigRecord],
    scenario: &str,
    config: &str,
    runs: &[&StepRecord],
) -> (Option<f64>, Option<f64>) {
    let searched = configs
        .iter()
        .find(|r| r.config == config)
        .and_then(|r| r.knees.iter().find(|k| k.scenario == scenario));
    match searched {
        Some(k) => (k.outcome.knee, k.outcome.first_unsustained),
        None => {
            let f = crate::knee::fixed_knee(runs);
            (f.best, f.fail)
        }
    }
}

/// The steps on either side of the knee, whose percentile curves the report draws: the
/// step at the knee (without one, the highest step held) and the first not sustained.
fn knee_steps<'a>(
    runs: &[&'a StepRecord],
    knee: Option<f64>,
    first_unsustained: Option<f64>,
) -> [Option<&'a StepRecord>; 2] {
    let held = knee.or_else(|| {
        runs.iter()
            .filter(|s| s.verdict.sustained)
            .map(|s| s.load)
            .reduce(f64::max)
    });
    let below = held.and_then(|v| runs.iter().find(|s| s.load == v).copied());
    let above = first_unsustained.and_then(|v| runs.iter().find(|s| s.load == v).copied());
    [below, above]
}

/// Per request name, for a scenario whose steps ran named requests: the percentile curve
/// of each name and of all requests together, at the steps the scenario's percentile chart
/// draws ([`knee_steps`]: the step at the knee and the first not sustained), one chart per
/// configuration and step, each curve from its own full histogram. The SLO's p99 bound is
/// marked, and each name's own latency bounds where they differ from the plan's.
fn names_charts(
    plan: &Plan,
    scenario: &str,
    steps: &[&StepRecord],
    configs: &[ConfigRecord],
    config_order: &[&str],
) -> String {
    let mut o = String::new();
    let unit = match plan.unit() {
        u @ ("req/s" | "msg/s" | "events/s" | "sessions/s" | "users") => u,
        "open connections" => "open",
        "open streams" => "streams",
        _ => "in flight",
    };
    for config in config_order {
        let runs = per_load(steps, config);
        if runs.iter().all(|s| s.result.by_name.is_empty()) {
            continue;
        }
        let (knee, first_unsustained) = knee_of(configs, scenario, config, &runs);
        for chart in names_against_load(
            plan,
            scenario,
            config,
            config_order.len() > 1,
            &runs,
            knee,
            first_unsustained,
        ) {
            if chart.series.iter().any(|x| !x.points.is_empty()) {
                let _ = write!(
                    o,
                    "<figure class=\"names-load\">{}</figure>",
                    chart.render()
                );
            }
        }
        let [below, above] = knee_steps(&runs, knee, first_unsustained);
        for (s, what) in [(below, "sustained"), (above, "not sustained")] {
            let Some(s) = s.filter(|s| !s.result.by_name.is_empty()) else {
                continue;
            };
            let mut chart = Chart {
                title: format!(
                    "{scenario} · {config} at {} {unit} ({what}): percentiles by request name",
                    svg::short_num(s.load)
                ),
                x_label: "percentile".into(),
                y_label: "latency (ms, log scale)".into(),
                y_log: true,
                x_ticks: percentile_ticks(),
                ..Chart::default()
            };
            if let Some(p99) = plan.slo.p99_ms {
                chart.h_marks.push(slo_mark(p99, Some(percentile_x(99.0))));
            }
            chart.series.push(Series {
                name: "all requests".into(),
                points: percentile_curve(&s.result.histograms.latency),
                color: 0,
                dash: Dash::Dashed,
            });
            for (i, n) in s.result.by_name.iter().enumerate() {
                let failed = s.verdict.names.iter().any(|v| v.name == n.name);
                chart.series.push(Series {
                    name: format!("{} ({})", n.name, if failed { "✗" } else { "✓" }),
                    points: percentile_curve(&n.latency_histogram),
                    color: i + 1,
                    dash: Dash::Solid,
                });
                // The name's own latency bounds, where they are not the plan's.
                let plan_bounds = plan.slo.latency_bounds();
                let own = plan.slo.names.iter().find(|b| b.name == n.name);
                for (q, bound) in own.map(|b| b.slo.latency_bounds()).unwrap_or_default() {
                    if !plan_bounds.contains(&(q, bound)) {
                        chart.h_marks.push(Mark {
                            at: bound,
                            label: format!("{} p{q} {bound} ms", n.name),
                            note: String::new(),
                            color: Some(i + 1),
                            from_x: Some(percentile_x(q)),
                        });
                    }
                }
            }
            if chart.series.iter().any(|x| !x.points.is_empty()) {
                let _ = write!(o, "<figure class=\"names\">{}</figure>", chart.render());
            }
        }
    }
    o
}

/// Per request name against load, in one configuration: each name's p99 (and the p99 of
/// all requests, dashed) and each name's failed requests as a share of its own attempts,
/// with the configuration's knee band. A name's line ends where it received no response.
fn names_against_load(
    plan: &Plan,
    scenario: &str,
    config: &str,
    several: bool,
    runs: &[&StepRecord],
    knee: Option<f64>,
    first_unsustained: Option<f64>,
) -> [Chart; 2] {
    let unit = match plan.unit() {
        "req/s" => "offered load (req/s)",
        "msg/s" => "offered load (msg/s)",
        "events/s" => "offered load (events/s)",
        "sessions/s" => "offered load (sessions/s)",
        u @ ("users" | "open connections" | "open streams") => u,
        _ => "requests in flight",
    };
    let title = |what: &str| {
        if several {
            format!("{scenario} · {config}: {what} by request name against load")
        } else {
            format!("{scenario}: {what} by request name against load")
        }
    };
    let mut latency = Chart {
        title: title("p99 latency"),
        x_label: unit.into(),
        y_label: "p99 latency (ms, log scale)".into(),
        y_log: true,
        ..Chart::default()
    };
    let mut errors = Chart {
        title: title("failed requests"),
        x_label: unit.into(),
        y_label: "failed requests (% of the name's attempts)".into(),
        ..Chart::default()
    };
    if let Some(p99) = plan.slo.p99_ms {
        latency.h_marks.push(slo_mark(p99, None));
    }
    if let (Some(lo), Some(hi)) = (knee, first_unsustained) {
        let band = svg::Band {
            from: lo,
            to: hi,
            label: format!("knee {}–{}", svg::short_num(lo), svg::short_num(hi)),
            note: format!(
                "knee between {} and {}",
                svg::short_num(lo),
                svg::short_num(hi)
            ),
            color: None,
        };
        latency.v_bands.push(band.clone());
        errors.v_bands.push(band);
    }
    latency.series.push(Series {
        name: "all requests".into(),
        points: runs
            .iter()
            .filter_map(|s| Some((s.load, s.result.latency_ms.p99?)))
            .collect(),
        color: 0,
        dash: Dash::Dashed,
    });
    // The names in the order they first appear.
    let mut names: Vec<&str> = Vec::new();
    for s in runs {
        for n in &s.result.by_name {
            if !names.contains(&n.name.as_str()) {
                names.push(&n.name);
            }
        }
    }
    for (i, name) in names.iter().enumerate() {
        fn of<'a>(s: &'a StepRecord, name: &str) -> Option<&'a loadlab_engine::result::NameResult> {
            s.result.by_name.iter().find(|n| n.name == name)
        }
        latency.series.push(Series {
            name: name.to_string(),
            points: runs
                .iter()
                .filter_map(|s| Some((s.load, of(s, name)?.latency_ms.p99?)))
                .collect(),
            color: i + 1,
            dash: Dash::Solid,
        });
        errors.series.push(Series {
            name: name.to_string(),
            points: runs
                .iter()
                .filter_map(|s| {
                    let n = of(s, name)?;
                    let attempts = n.attempts();
                    (attempts > 0)
                        .then(|| (s.load, 100.0 * n.errors_total as f64 / attempts as f64))
                })
                .collect(),
            color: i + 1,
            dash: Dash::Solid,
        });
    }
    [latency, errors]
}

/// x of the percentile plot at `percent` (99 for p99): `-log10(1 - percent / 100)` (0 % at
/// 0, 90 % at 1, 99 % at 2, ...).
fn percentile_x(percent: f64) -> f64 {
    -(1.0 - percent / 100.0).max(1e-6).log10()
}

/// The plan's p99 bound as a line across a latency chart, from `from_x` on (the percentile
/// axis: where the bound starts to hold) or across the whole plot.
fn slo_mark(p99: f64, from_x: Option<f64>) -> Mark {
    Mark {
        at: p99,
        label: format!("SLO p99 {p99} ms"),
        note: String::new(),
        color: None,
        from_x,
    }
}

/// The ticks of the percentile axis: 0, 90, 99, 99.9, 99.99 and 99.999 %.
fn percentile_ticks() -> Vec<(f64, String)> {
    [0.0, 90.0, 99.0, 99.9, 99.99, 99.999]
        .iter()
        .map(|p: &f64| (percentile_x(*p), format!("{p}%")))
        .collect()
}

/// Latency at percentiles from 0 to 99.999 %, from a full histogram (encoded as the
/// result stores it); empty when it does not decode or holds nothing.
fn percentile_curve(histogram: &str) -> Vec<(f64, f64)> {
    let Ok(h) = decode_histogram(histogram) else {
        return Vec::new();
    };
    if h.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut x = 0.0;
    while x <= 5.0 + 1e-9 {
        let q = 1.0 - 10f64.powf(-x);
        out.push((x, h.value_at_quantile(q) as f64 / 1000.0));
        x += 0.1;
    }
    out
}

/// One step, folded: its verdict in the summary, its timeline charts inside.
fn step_details(s: &StepRecord) -> String {
    let r = &s.result;
    let warmup = r.warmup_s;
    let verdict = if s.verdict.sustained {
        "<span class=\"ok\">sustained</span>".to_string()
    } else {
        format!(
            "<span class=\"bad\">not sustained: {}{}</span>",
            esc(&s
                .verdict
                .limits
                .iter()
                .map(|l| l.describe())
                .collect::<Vec<_>>()
                .join(", ")),
            s.verdict
                .names_failed()
                .map(|n| format!("; names failed: {}", esc(&n)))
                .unwrap_or_default()
        )
    };
    let why = s
        .diagnosis
        .as_ref()
        .map(|d| format!("; why: {}", esc(d.headline())))
        .unwrap_or_default();
    let mut o = format!(
        "<details class=\"step\"><summary>{} · {} · {} {} — {verdict}{why}</summary>",
        esc(&s.config),
        esc(&s.scenario),
        svg::short_num(s.load),
        match (s.model, s.result.sessions.is_some()) {
            (Model::Open, false) => s.result.protocol.units().rate,
            (Model::Open, true) => "sessions/s",
            (Model::Closed, true) => "users",
            (Model::Closed, false) => "in flight",
        }
    );
    let secs = |f: &dyn Fn(&loadlab_engine::SecondStats) -> Option<f64>| -> Vec<(f64, f64)> {
        svg::downsample(
            &r.per_second
                .iter()
                .filter_map(|x| Some((x.second as f64, f(x)?)))
                .collect::<Vec<_>>(),
            MAX_POINTS,
        )
    };
    let time = "time (s of the measured window)".to_string();
    // Every chart of the step on one time axis: from the warm-up (negative) or the probe's
    // first sample to the window's end or its last sample.
    let probe_times = s
        .probes
        .as_ref()
        .map(|p| {
            p.samples
                .iter()
                .map(|x| x.t_s - warmup)
                .collect::<Vec<f64>>()
        })
        .unwrap_or_default();
    let span = (
        probe_times.iter().copied().fold(0f64, f64::min),
        probe_times
            .iter()
            .copied()
            .fold(r.duration_s.max(r.per_second.len() as f64), f64::max),
    );
    let load = Chart {
        title: "per second: achieved and errors".into(),
        x_label: time.clone(),
        y_label: "requests per second".into(),
        series: vec![
            Series {
                name: "achieved".into(),
                points: secs(&|x| Some(x.successful as f64)),
                color: 0,
                dash: Dash::Solid,
            },
            Series {
                name: "errors".into(),
                points: secs(&|x| Some(x.errors as f64)),
                color: 1,
                dash: Dash::Solid,
            },
        ],
        x_span: Some(span),
        ..Chart::default()
    };
    let p99 = Chart {
        title: "per second: p99 latency".into(),
        x_label: time.clone(),
        y_label: "p99 (ms)".into(),
        series: vec![Series {
            name: "p99".into(),
            points: secs(&|x| x.latency_p99_ms),
            color: 3,
            dash: Dash::Solid,
        }],
        x_span: Some(span),
        ..Chart::default()
    };
    let _ = write!(
        o,
        "<figure>{}</figure><figure>{}</figure>",
        load.render(),
        p99.render()
    );
    if let Some(p) = &s.probes {
        // Per interval: CPU as percent of one core, overflows per second; RSS and
        // TIME_WAIT as seen.
        let mut cpu = Vec::new();
        let mut rss = Vec::new();
        let mut overflows = Vec::new();
        let mut tw = Vec::new();
        for w in p.samples.windows(2) {
            let t = w[1].t_s - warmup;
            let dt = (w[1].t_s - w[0].t_s).max(1e-3);
            if let (Some(a), Some(b)) = (&w[0].process, &w[1].process) {
                let used = (b.cpu_user_s + b.cpu_system_s) - (a.cpu_user_s + a.cpu_system_s);
                cpu.push((t, (used / dt * 100.0).max(0.0)));
                rss.push((t, b.rss_bytes as f64 / 1048576.0));
            }
            overflows.push((
                t,
                w[1].kernel
                    .listen_overflows
                    .saturating_sub(w[0].kernel.listen_overflows) as f64
                    / dt,
            ));
            tw.push((t, w[1].kernel.time_wait as f64));
        }
        // One unit per axis: a chart for each figure.
        let one = |title: &str, y: &str, name: &str, points: &[(f64, f64)], color: usize| Chart {
            title: title.into(),
            x_label: time.clone(),
            y_label: y.into(),
            series: vec![Series {
                name: name.into(),
                points: svg::downsample(points, MAX_POINTS),
                color,
                dash: Dash::Solid,
            }],
            x_span: Some(span),
            ..Chart::default()
        };
        for chart in [
            one("target: CPU", "CPU (% of one core)", "CPU %", &cpu, 2),
            one("target: memory", "RSS (MB)", "RSS MB", &rss, 4),
            one(
                "kernel: listen-queue overflows",
                "overflows per second",
                "listen overflows/s",
                &overflows,
                1,
            ),
            one(
                "kernel: TIME_WAIT",
                "sockets in TIME_WAIT",
                "TIME_WAIT",
                &tw,
                5,
            ),
        ] {
            let _ = write!(o, "<figure>{}</figure>", chart.render());
        }
    }
    o.push_str("</details>");
    o
}

/// `loadlab compare --html`: the comparison's text, and per pair and series the figures of
/// both sides overlaid (p99 and achieved at the loads both ran, the knee ranges marked),
/// one self-contained page like `report.html`.
pub fn render_comparison(c: &crate::compare::Comparison) -> String {
    use crate::compare::text;
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>loadlab compare</title><style>{STYLE}</style></head><body><h1>loadlab compare</h1><ul>"
    );
    for i in &c.inputs {
        let _ = write!(
            o,
            "<li><b>{}</b>: {} ({}, {} step{}{})</li>",
            esc(&i.label),
            esc(&i.path),
            esc(&i.name),
            i.steps,
            if i.steps == 1 { "" } else { "s" },
            i.started_at
                .as_deref()
                .map(|t| format!(", run {}", esc(t)))
                .unwrap_or_default()
        );
    }
    o.push_str("</ul><p class=\"env\">Solid: the baseline; dashed: the other side. Only the loads both ran are drawn; hover a point for its value. The verdict on each difference, with its interval and what it rests on, is in the text below the charts.</p>");
    for p in &c.pairs {
        let _ = write!(o, "<h2>{} against {}</h2>", esc(&p.other), esc(&p.baseline));
        for s in &p.series {
            if s.steps.is_empty() && s.knee.is_none() {
                continue;
            }
            let _ = write!(o, "<section class=\"series\"><h3>{}</h3>", esc(&s.name()));
            let side =
                |label: &str,
                 dash: Dash,
                 color: usize,
                 f: &dyn Fn(&crate::compare::StepComparison) -> Option<f64>| {
                    Series {
                        name: label.to_string(),
                        points: s
                            .steps
                            .iter()
                            .filter_map(|st| Some((st.load, f(st)?)))
                            .collect(),
                        color,
                        dash,
                    }
                };
            let mut knee_marks = Vec::new();
            if let Some(k) = &s.knee {
                for (label, range, color) in
                    [(&p.baseline, &k.baseline, 0), (&p.other, &k.other, 1)]
                {
                    if let (Some(v), Some(_)) = (range.sustained, range.not_sustained) {
                        knee_marks.push(Mark {
                            at: v,
                            label: format!("knee {label} {}", svg::short_num(v)),
                            note: format!("{label}: knee {}", range.describe()),
                            color: Some(color),
                            from_x: None,
                        });
                    }
                }
            }
            let latency = Chart {
                title: format!("{}: p99 latency", s.scenario),
                x_label: format!("load ({})", s.unit),
                y_label: "p99 (ms, log scale)".into(),
                y_log: true,
                series: vec![
                    side(&p.baseline, Dash::Solid, 0, &|st| st.p99.baseline),
                    side(&p.other, Dash::Dashed, 1, &|st| st.p99.other),
                ],
                v_marks: knee_marks.clone(),
                ..Chart::default()
            };
            let achieved = Chart {
                title: format!("{}: achieved", s.scenario),
                x_label: format!("load ({})", s.unit),
                y_label: "achieved (successful req/s)".into(),
                diagonal: (s.unit == "req/s").then_some(1.0),
                series: vec![
                    side(&p.baseline, Dash::Solid, 0, &|st| st.achieved.baseline),
                    side(&p.other, Dash::Dashed, 1, &|st| st.achieved.other),
                ],
                v_marks: knee_marks,
                ..Chart::default()
            };
            for chart in [latency, achieved] {
                if chart.series.iter().any(|x| !x.points.is_empty()) {
                    let _ = write!(o, "<figure>{}</figure>", chart.render());
                }
            }
            o.push_str("</section>");
        }
    }
    let _ = write!(
        o,
        "<h2>The comparison</h2><pre>{}</pre><script>{SCRIPT}</script></body></html>",
        esc(&text::render(c))
    );
    o
}
