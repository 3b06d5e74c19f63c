//! The board's sensor readings as router events: the board's poller and `sensor_read` raise
//! them, and a rule matches their fields.

use std::sync::Arc;

use serde_json::json;

use crate::board::Host;
use crate::board::tools::SensorRead;
use crate::testing::Fixture;

#[tokio::test]
async fn readings_are_raised_as_router_events() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let rules = Arc::new(crate::router::Rules::open(&f.ws));
    let mut queue = rules.take_queue().unwrap();
    h.connect({
        let rules = Arc::clone(&rules);
        move |e| {
            rules.raise(e);
        }
    });
    f.call(SensorRead(Arc::clone(&h)), json!({"device": "climate"})).await.unwrap();
    let crate::router::Work::Event(e) = queue.try_recv().unwrap() else { panic!("not an event") };
    assert_eq!(e.kind(), "sensor.reading");
    use chela_core::router::Value as Field;
    assert_eq!(e.get("device"), Some(&Field::Str("climate".into())));
    assert_eq!(e.get("sensor"), Some(&Field::Str("aht20".into())));
    assert!(matches!(e.get("humidity"), Some(Field::Float(h)) if (0.0..=100.0).contains(h)), "{e:?}");
    // A rule with a threshold on the field fires on it.
    let mut router = chela_core::router::Router::new();
    router
        .add_rule(json!({"id": "damp", "match": {"type": "sensor.reading"}, "only_if": [{"field": "humidity", "op": "gt", "value": 1}], "actions": [{"type": "send", "text": "humid"}]}))
        .unwrap();
    assert_eq!(router.handle_event(&e, 0).fired.len(), 1);
    assert_eq!(h.poll(&f.ws, &crate::clock::Clock::system()), 3, "the poller reads the three sensors");
    for _ in 0..3 {
        assert!(matches!(queue.try_recv(), Ok(crate::router::Work::Event(_))));
    }
}
