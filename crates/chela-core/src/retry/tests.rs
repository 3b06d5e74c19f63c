use super::*;

#[test]
fn delays_grow_and_stay_within_the_cap() {
    let b = Backoff::default();
    let d0 = b.delay(0, None, 0.0).unwrap();
    let d1 = b.delay(1, None, 0.0).unwrap();
    assert_eq!(d0, Duration::from_millis(250));
    assert_eq!(d1, Duration::from_millis(500));
    assert_eq!(b.delay(0, None, 0.999_999).unwrap().as_millis(), 499);
    assert!(b.delay(3, None, 1.0).unwrap() <= b.cap);
    let wide = Backoff { max_retries: 40, ..b };
    assert!(wide.delay(39, None, 0.5).unwrap() <= b.cap);
    assert_eq!(b.delay(4, None, 0.0), None);
}

#[test]
fn the_exponential_doubles_from_its_base_and_stops_at_its_cap() {
    let e = Exponential::new(Duration::from_secs(1), Duration::from_secs(60));
    let secs: alloc::vec::Vec<u64> = (0..8).map(|n| e.step(n).as_secs()).collect();
    assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
    assert_eq!(e.step(31), Duration::from_secs(60));
    assert_eq!(e.step(u32::MAX), Duration::from_secs(60), "no overflow past any count");
    let huge = Exponential::new(Duration::from_secs(u64::MAX / 2), Duration::MAX);
    assert_eq!(huge.step(3), Duration::MAX, "saturates instead of overflowing");
}

#[test]
fn retry_after_is_honoured_unless_too_long() {
    let b = Backoff::default();
    assert_eq!(b.delay(0, Some(Duration::from_secs(3)), 0.0), Some(Duration::from_secs(3)));
    assert_eq!(b.delay(0, Some(Duration::from_secs(61)), 0.0), None);
    // A zero retry-after still waits a little.
    assert_eq!(b.delay(2, Some(Duration::ZERO), 0.9), Some(Duration::from_millis(100)));
}

#[test]
fn headers_parse() {
    assert_eq!(parse_retry_after(Some("2"), None), Some(Duration::from_secs(2)));
    assert_eq!(parse_retry_after(Some("2"), Some("150")), Some(Duration::from_millis(150)));
    assert_eq!(parse_retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT"), None), None);
    assert_eq!(parse_retry_after(Some("-1"), None), None);
    assert_eq!(parse_retry_after(None, None), None);
    // Decimals, exactly; a day at most for seconds; what is not a plain decimal is no hint.
    assert_eq!(parse_retry_after(Some(" 1.5 "), None), Some(Duration::from_millis(1500)));
    assert_eq!(parse_retry_after(Some("+.25"), None), Some(Duration::from_millis(250)));
    assert_eq!(parse_retry_after(Some("3."), None), Some(Duration::from_secs(3)));
    assert_eq!(parse_retry_after(Some("999999999999999999999999"), None), Some(Duration::from_secs(86_400)));
    assert_eq!(parse_retry_after(None, Some("0.000001")), Some(Duration::from_nanos(1)));
    assert_eq!(parse_retry_after(None, Some("20.123456789")), Some(Duration::from_nanos(20_123_456)));
    assert_eq!(parse_retry_after(Some("0"), Some("0")), Some(Duration::ZERO));
    for bad in ["", ".", "+", "1e3", "inf", "NaN", "-0.5", "1.2.3", "0x10", "1 2", "٣"] {
        assert_eq!(parse_retry_after(Some(bad), None), None, "{bad:?}");
        assert_eq!(parse_retry_after(Some("7"), Some(bad)), Some(Duration::from_secs(7)), "{bad:?}");
    }
    // A hostile header cannot overflow the Duration (from_secs_f64 would panic).
    let huge = "9".repeat(5000);
    assert_eq!(parse_retry_after(None, Some(&huge)), Some(Duration::from_nanos(u64::MAX)));
    assert_eq!(parse_retry_after(None, Some(&alloc::format!("1.{huge}"))), Some(Duration::from_nanos(1_999_999)));
}
