//! `--matrix KNOB=V1,V2`: a matrix list given on the command line, laid over the file after
//! `[quick]` and before validation, so that one plan runs a few of its configurations (or
//! a value the file does not list) without being edited.

use std::fmt;
use std::str::FromStr;

use super::{PlanError, PlanFile};

/// One `--matrix KNOB=V1,V2,...`: the values `KNOB` takes in this run, in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixSet {
    /// A parameter of the plan's `[matrix]`.
    pub knob: String,
    /// Its values, each read as a TOML value would be (`400` a number, `true` a boolean,
    /// anything else text), so that `[[exclude]]` and the report see what the file would.
    pub values: Vec<toml::Value>,
    /// As given, for errors and the report.
    text: String,
}

impl FromStr for MatrixSet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let Some((knob, list)) = s.split_once('=') else {
            return Err(format!(
                "`{s}`: expected KNOB=VALUE[,VALUE...], e.g. threads=2,400"
            ));
        };
        let knob = knob.trim();
        if knob.is_empty() {
            return Err(format!("`{s}`: the parameter name before `=` is empty"));
        }
        let values = list
            .split(',')
            .map(|v| {
                let v = v.trim();
                if v.is_empty() {
                    Err(format!(
                        "`{s}`: an empty value (values are separated by single commas)"
                    ))
                } else {
                    Ok(value(v))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MatrixSet {
            knob: knob.to_string(),
            values,
            text: s.trim().to_string(),
        })
    }
}

impl fmt::Display for MatrixSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A value as TOML reads it when it is a number, a boolean or a quoted string, else the text
/// itself.
fn value(v: &str) -> toml::Value {
    #[derive(serde::Deserialize)]
    struct One {
        v: toml::Value,
    }
    match toml::from_str::<One>(&format!("v = {v}")) {
        Ok(One {
            v:
                v @ (toml::Value::Integer(_)
                | toml::Value::Float(_)
                | toml::Value::Boolean(_)
                | toml::Value::String(_)),
        }) => v,
        _ => toml::Value::String(v.to_string()),
    }
}

/// Replaces each named `[matrix]` list; a parameter the plan does not define, or one set
/// twice, is an error naming `--matrix`.
pub(super) fn apply(
    file: &mut PlanFile,
    origin: &str,
    sets: &[MatrixSet],
) -> Result<(), PlanError> {
    for (i, set) in sets.iter().enumerate() {
        let err = |allowed: String| PlanError::Field {
            path: origin.into(),
            field: "--matrix".into(),
            value: set.text.clone(),
            allowed,
        };
        if !file.matrix.contains_key(&set.knob) {
            let known: Vec<&str> = file.matrix.keys().map(String::as_str).collect();
            return Err(err(if known.is_empty() {
                "nothing: the plan has no [matrix]".into()
            } else {
                format!("a parameter that [matrix] defines ({})", known.join(", "))
            }));
        }
        if sets[..i].iter().any(|s| s.knob == set.knob) {
            return Err(err(format!(
                "one --matrix per parameter ({} is set twice; list its values in one)",
                set.knob
            )));
        }
        file.matrix.insert(set.knob.clone(), set.values.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> MatrixSet {
        s.parse().unwrap()
    }

    #[test]
    fn values_are_read_as_toml_would_read_them() {
        let s = set("threads=2, 400,1.5,true,fast,\"quoted\"");
        assert_eq!(s.knob, "threads");
        assert_eq!(
            s.values,
            vec![
                toml::Value::Integer(2),
                toml::Value::Integer(400),
                toml::Value::Float(1.5),
                toml::Value::Boolean(true),
                toml::Value::String("fast".into()),
                toml::Value::String("quoted".into()),
            ]
        );
        assert_eq!(s.to_string(), "threads=2, 400,1.5,true,fast,\"quoted\"");
    }

    #[test]
    fn malformed_sets_say_what_is_expected() {
        for (bad, says) in [
            ("threads", "expected KNOB=VALUE"),
            ("=2", "name before `=` is empty"),
            ("threads=", "an empty value"),
            ("threads=2,,4", "an empty value"),
        ] {
            let e = bad.parse::<MatrixSet>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
