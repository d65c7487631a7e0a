//! The configuration matrix: the product of the plan's parameter lists, minus excludes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One combination of matrix values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Stable identifier, also used in file names: `workers=4,backlog=16`, or `default`.
    pub id: String,
    /// Parameter values, parameters in name order (a TOML table does not keep the order
    /// its keys were written in).
    pub params: Vec<(String, String)>,
}

impl Config {
    /// The value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A file-name-safe form of the id.
    pub fn slug(&self) -> String {
        self.id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// Every configuration of the product of `matrix`'s parameter lists that no `exclude`
/// matches, in order (a plan's: [`Plan::configs`](crate::plan::Plan::configs)).
pub fn expand(
    matrix: &[(String, Vec<String>)],
    exclude: &[BTreeMap<String, String>],
) -> Vec<Config> {
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in matrix {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .filter(|c| {
            !exclude.iter().any(|ex| {
                ex.iter()
                    .all(|(k, v)| c.iter().any(|(ck, cv)| ck == k && cv == v))
            })
        })
        .map(|params| Config {
            id: if params.is_empty() {
                "default".into()
            } else {
                params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            },
            params,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_minus_excludes() {
        let list = |name: &str, values: &[&str]| {
            (
                name.to_string(),
                values.iter().map(|v| v.to_string()).collect(),
            )
        };
        let matrix = [
            list("backlog", &["256", "2048"]),
            list("workers", &["1", "8", "64"]),
        ];
        let exclude = [BTreeMap::from([
            ("workers".to_string(), "64".to_string()),
            ("backlog".to_string(), "256".to_string()),
        ])];
        let c = expand(&matrix, &exclude);
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].id, "backlog=256,workers=1");
        assert!(!c.iter().any(|c| c.id == "backlog=256,workers=64"));
        assert_eq!(c[4].get("workers"), Some("64"));
        assert_eq!(c[0].slug(), "backlog_256_workers_1");
        assert_eq!(expand(&[], &[])[0].id, "default");
    }
}
