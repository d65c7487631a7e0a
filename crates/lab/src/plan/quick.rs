//! `--quick`: the plan's `[quick]` table laid over the file before it is validated.

use super::{PlanError, PlanFile};

/// Replaces the load and matrix settings that `[quick]` gives; a quick matrix parameter the
/// plan does not define is an error.
pub(super) fn apply(file: &mut PlanFile, origin: &str) -> Result<(), PlanError> {
    let Some(q) = file.quick.clone() else {
        return Ok(());
    };
    if q.steps.is_some() || q.knee.is_some() {
        file.load.steps = q.steps;
        file.load.knee = q.knee;
    }
    if let Some(d) = q.step_duration {
        file.load.step_duration = d;
    }
    if let Some(d) = q.warmup {
        file.load.warmup = d;
    }
    if let Some(d) = q.pause {
        file.load.pause = d;
    }
    for (k, v) in q.matrix {
        if !file.matrix.contains_key(&k) {
            return Err(PlanError::Field {
                path: origin.into(),
                field: format!("quick.matrix.{k}"),
                value: format!("{v:?}"),
                allowed: "a parameter that [matrix] defines".into(),
            });
        }
        file.matrix.insert(k, v);
    }
    if let Some(k) = q.tune_knee {
        file.tune.get_or_insert_with(Default::default).knee = Some(k);
    }
    if let Some(d) = q.tune_step_duration {
        file.tune.get_or_insert_with(Default::default).step_duration = Some(d);
    }
    if let Some(n) = q.requests {
        for s in &mut file.scenario {
            s.requests = Some(n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> PlanFile {
        toml::from_str(text).unwrap()
    }

    const PLAN: &str = r#"
name = "q"
[matrix]
workers = [1, 2, 4]
[[scenario]]
name = "s"
url = "http://127.0.0.1:1/"
requests = 1000
[load]
knee = { start = 100, max = 10000 }
step_duration = "10s"
[quick]
steps = [50]
step_duration = "2s"
matrix = { workers = [1] }
requests = 10
"#;

    #[test]
    fn quick_replaces_steps_durations_matrix_and_requests() {
        let mut f = file(PLAN);
        apply(&mut f, "p").unwrap();
        assert_eq!(f.load.steps, Some(vec![50.0]));
        assert!(f.load.knee.is_none(), "steps replace the knee");
        assert_eq!(f.load.step_duration, "2s");
        assert_eq!(f.matrix["workers"].len(), 1);
        assert_eq!(f.scenario[0].requests, Some(10));
    }

    #[test]
    fn a_quick_matrix_parameter_must_exist() {
        let mut f = file(&PLAN.replace("matrix = { workers", "matrix = { threads"));
        let e = apply(&mut f, "p").unwrap_err().to_string();
        assert!(e.contains("quick.matrix.threads"), "{e}");
    }

    #[test]
    fn without_a_quick_table_nothing_changes() {
        let text = PLAN.split("[quick]").next().unwrap();
        let mut f = file(text);
        apply(&mut f, "p").unwrap();
        assert_eq!(f.load.step_duration, "10s");
        assert!(f.load.knee.is_some());
    }
}
