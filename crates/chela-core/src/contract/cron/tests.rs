use super::*;

fn plan(json: &str) -> Result<Plan, String> {
    serde_json::from_str::<AddArgs>(json).map_err(|e| alloc::string::ToString::to_string(&e))?.plan(1000)
}

#[test]
fn mimiclaw_arguments_and_the_chips_old_names_plan_the_same_jobs() {
    let every = Plan { trigger: Trigger::Interval { every_s: 60, anchor: 1000 }, delete_after_run: false };
    assert_eq!(plan(r#"{"name":"a","schedule_type":"every","message":"m","interval_s":60}"#), Ok(every.clone()));
    assert_eq!(plan(r#"{"message":"m","every_s":60}"#), Ok(every));
    let once = Plan { trigger: Trigger::Once { at: 1300 }, delete_after_run: true };
    assert_eq!(plan(r#"{"name":"a","schedule_type":"at","message":"m","delay_s":300}"#), Ok(once.clone()));
    assert_eq!(plan(r#"{"message":"m","in_s":300}"#), Ok(once.clone()));
    assert_eq!(plan(r#"{"message":"m","at":1300}"#), Ok(once.clone()));
    assert_eq!(plan(r#"{"name":"a","schedule_type":"at","message":"m","at_epoch":1300}"#), Ok(once));
    let cron = Plan { trigger: Trigger::Cron { expr: "30 8 * * 1-5".into(), tz: None }, delete_after_run: false };
    assert_eq!(plan(r#"{"message":"m","cron":"30 8 * * 1-5"}"#), Ok(cron.clone()));
    assert_eq!(plan(r#"{"name":"a","schedule_type":"cron","message":"m","cron_expr":"30 8 * * 1-5"}"#), Ok(cron));
}

#[test]
fn what_cannot_be_planned_is_said() {
    for (json, want) in [
        (r#"{"message":"m"}"#, "exactly one of"),
        (r#"{"message":"m","every_s":60,"in_s":5}"#, "exactly one of"),
        (r#"{"message":"m","at":1300,"in_s":5}"#, "exactly one of"),
        (r#"{"message":"m","schedule_type":"every"}"#, "need interval_s"),
        (r#"{"message":"m","schedule_type":"every","interval_s":0}"#, "interval_s must be positive"),
        (r#"{"message":"m","schedule_type":"at","at_epoch":999}"#, "is in the past"),
        (r#"{"message":"m","in_s":0}"#, "delay_s must be positive"),
        (r#"{"message":"m","in_s":18446744073709551615}"#, "too large"),
        (r#"{"message":"m","schedule_type":"cron","cron_expr":" "}"#, "need cron_expr"),
        (r#"{"message":"m","schedule_type":"weekly"}"#, "schedule_type must be"),
        (r#"{"message":"m","in_s":5,"tz":"Europe/Paris"}"#, "unknown field"),
    ] {
        let e = plan(json).unwrap_err();
        assert!(e.contains(want), "{json}: {e}");
    }
}

#[test]
fn remove_takes_job_id_or_id() {
    assert_eq!(serde_json::from_str::<RemoveArgs>(r#"{"job_id":"a"}"#).unwrap().job_id, "a");
    assert_eq!(serde_json::from_str::<RemoveArgs>(r#"{"id":"b"}"#).unwrap().job_id, "b");
}
