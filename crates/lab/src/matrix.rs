//! The configuration matrix: the product of the plan's parameter lists, minus excludes.

use serde::{Deserialize, Serialize};

use crate::plan::Plan;

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

/// Every configuration the plan covers, in order.
pub fn expand(plan: &Plan) -> Vec<Config> {
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in &plan.matrix {
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
            !plan.exclude.iter().any(|ex| {
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
        let text = r#"
            name = "m"
            [matrix]
            backlog = [256, 2048]
            workers = [1, 8, 64]
            [[exclude]]
            workers = 64
            backlog = 256
            [[scenario]]
            name = "s"
            url = "http://127.0.0.1:1/"
            [load]
            steps = [1]
        "#;
        let plan = Plan::parse(text, "t", std::path::Path::new("."), false).unwrap();
        let c = expand(&plan);
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].id, "backlog=256,workers=1");
        assert!(!c.iter().any(|c| c.id == "backlog=256,workers=64"));
        assert_eq!(c[4].get("workers"), Some("64"));
        assert_eq!(c[0].slug(), "backlog_256_workers_1");
    }
}
