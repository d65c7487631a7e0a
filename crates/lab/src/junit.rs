//! JUnit XML, as CI servers read it (Jenkins, GitLab, GitHub Actions reporters): one test
//! suite, one test case per check, a failed check as `<failure>` with its figure.

use std::fmt::Write as _;

/// One check: a gate, a compared series.
#[derive(Clone, Debug)]
pub struct Case {
    /// What was checked, e.g. `p99<50ms`.
    pub name: String,
    /// Its group, e.g. `loadlab.slo`.
    pub classname: String,
    /// Why it failed (`None`: it passed).
    pub failure: Option<String>,
    /// Why it did not run (`None`: it ran); a skipped case neither passes nor fails.
    pub skipped: Option<String>,
    /// The figure it was judged on, for the log (`system-out`).
    pub output: String,
}

/// A suite of cases: one run, one lab.
#[derive(Clone, Debug)]
pub struct Suite {
    /// The suite's name, e.g. `loadlab run http://127.0.0.1:8080/`.
    pub name: String,
    /// Seconds the run took.
    pub time_s: f64,
    /// When it started (RFC 3339).
    pub timestamp: String,
    /// Name and value pairs shown with the suite (offered rate, achieved...).
    pub properties: Vec<(String, String)>,
    /// The checks.
    pub cases: Vec<Case>,
}

/// Escapes text for an XML attribute or element.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold at all.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

impl Suite {
    /// The suite as a JUnit XML document.
    pub fn to_xml(&self) -> String {
        let failures = self.cases.iter().filter(|c| c.failure.is_some()).count();
        let skipped = self.cases.iter().filter(|c| c.skipped.is_some()).count();
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            x,
            "<testsuites name=\"loadlab\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{:.3}\">",
            self.cases.len(),
            self.time_s
        );
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{:.3}\" timestamp=\"{}\">",
            esc(&self.name),
            self.cases.len(),
            self.time_s,
            esc(&self.timestamp)
        );
        if !self.properties.is_empty() {
            x.push_str("    <properties>\n");
            for (k, v) in &self.properties {
                let _ = writeln!(
                    x,
                    "      <property name=\"{}\" value=\"{}\"/>",
                    esc(k),
                    esc(v)
                );
            }
            x.push_str("    </properties>\n");
        }
        for c in &self.cases {
            let _ = writeln!(
                x,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"0\">",
                esc(&c.classname),
                esc(&c.name)
            );
            if let Some(f) = &c.failure {
                let _ = writeln!(
                    x,
                    "      <failure message=\"{}\" type=\"gate\">{}</failure>",
                    esc(f),
                    esc(f)
                );
            }
            if let Some(why) = &c.skipped {
                let _ = writeln!(x, "      <skipped message=\"{}\"/>", esc(why));
            }
            if !c.output.is_empty() {
                let _ = writeln!(x, "      <system-out>{}</system-out>", esc(&c.output));
            }
            x.push_str("    </testcase>\n");
        }
        x.push_str("  </testsuite>\n</testsuites>\n");
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_and_text_is_escaped() {
        let s = Suite {
            name: "loadlab run http://h/?a=1&b=2".into(),
            time_s: 1.5,
            timestamp: "2026-11-26T05:00:00Z".into(),
            properties: vec![("offered_rps".into(), "100".into())],
            cases: vec![
                Case {
                    name: "p99<50ms".into(),
                    classname: "loadlab.slo".into(),
                    failure: Some("p99 63.2 ms > 50 ms".into()),
                    skipped: None,
                    output: String::new(),
                },
                Case {
                    name: "errors<1%".into(),
                    classname: "loadlab.slo".into(),
                    failure: None,
                    skipped: None,
                    output: "errors 0.0 %".into(),
                },
                Case {
                    name: "io=uring".into(),
                    classname: "loadlab.config".into(),
                    failure: None,
                    skipped: Some("io_uring refused".into()),
                    output: String::new(),
                },
            ],
        };
        let x = s.to_xml();
        assert!(x.contains("tests=\"3\" failures=\"1\""), "{x}");
        assert!(x.contains("skipped=\"1\""), "{x}");
        assert!(x.contains("<skipped message=\"io_uring refused\"/>"), "{x}");
        assert!(x.contains("name=\"p99&lt;50ms\""), "{x}");
        assert!(x.contains("a=1&amp;b=2"), "{x}");
        assert!(
            x.contains("<failure message=\"p99 63.2 ms &gt; 50 ms\""),
            "{x}"
        );
        assert_eq!(x.matches("<testcase ").count(), 3);
        assert_eq!(x.matches("</testcase>").count(), 3);
    }
}
