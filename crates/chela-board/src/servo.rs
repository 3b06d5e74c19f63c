//! A hobby servo on a PWM channel: 50 Hz, a pulse of `min_pulse_us` at 0° to `max_pulse_us`
//! at `range_deg`, refused outside the configured `[min_angle, max_angle]`.

use embedded_hal::pwm::SetDutyCycle;

use crate::fault::Fault;

/// The servo's geometry and limits (from board.json `params`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub min_angle: f32,
    pub max_angle: f32,
    pub min_pulse_us: u32,
    pub max_pulse_us: u32,
    /// The angle `max_pulse_us` stands for (180 for most servos).
    pub range_deg: f32,
    pub period_us: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_angle: 0.0,
            max_angle: 180.0,
            min_pulse_us: 500,
            max_pulse_us: 2500,
            range_deg: 180.0,
            period_us: 20_000,
        }
    }
}

impl Limits {
    /// The pulse width for `angle`, or a fault when it is outside the limits.
    pub fn pulse_us(&self, angle: f32) -> Result<f32, Fault> {
        if !angle.is_finite() || angle < self.min_angle || angle > self.max_angle {
            return Err(Fault::OutOfRange {
                what: "servo angle",
                value: angle,
                min: self.min_angle,
                max: self.max_angle,
            });
        }
        let span = (self.max_pulse_us - self.min_pulse_us) as f32;
        Ok(self.min_pulse_us as f32 + angle / self.range_deg * span)
    }

    /// The duty for `angle` with a PWM whose full scale is `max_duty`.
    pub fn duty(&self, angle: f32, max_duty: u16) -> Result<u16, Fault> {
        let pulse = self.pulse_us(angle)?;
        let duty = (pulse / self.period_us as f32 * f32::from(max_duty) + 0.5) as u32;
        Ok(duty.min(u32::from(max_duty)) as u16)
    }

    /// The angle a duty stands for (the inverse of [`Limits::duty`], up to rounding).
    pub fn angle(&self, duty: u16, max_duty: u16) -> f32 {
        let pulse = f32::from(duty) / f32::from(max_duty.max(1)) * self.period_us as f32;
        (pulse - self.min_pulse_us as f32) / (self.max_pulse_us - self.min_pulse_us) as f32 * self.range_deg
    }
}

pub struct Servo<P> {
    pwm: P,
    limits: Limits,
    angle: Option<f32>,
}

impl<P: SetDutyCycle> Servo<P> {
    pub fn new(pwm: P, limits: Limits) -> Self {
        Servo { pwm, limits, angle: None }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Moves to `angle`; outside the limits nothing moves.
    pub fn set_angle(&mut self, angle: f32) -> Result<(), Fault> {
        let duty = self.limits.duty(angle, self.pwm.max_duty_cycle())?;
        self.pwm.set_duty_cycle(duty).map_err(|_| Fault::Bus { what: "servo PWM channel" })?;
        self.angle = Some(angle);
        Ok(())
    }

    /// The last angle set, if any.
    pub fn angle(&self) -> Option<f32> {
        self.angle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn limits_refuse() {
        let l = Limits { min_angle: 10.0, max_angle: 170.0, ..Limits::default() };
        assert!(matches!(l.pulse_us(5.0), Err(Fault::OutOfRange { .. })));
        assert!(matches!(l.pulse_us(f32::NAN), Err(Fault::OutOfRange { .. })));
        assert_eq!(l.pulse_us(90.0).unwrap(), 1500.0);
    }

    proptest! {
        /// The datasheet mapping (linear pulse between the end points) and its inverse.
        #[test]
        fn duty_round_trips(angle in 0.0f32..=180.0, max_duty in 1000u16..=u16::MAX) {
            let l = Limits::default();
            let d = l.duty(angle, max_duty).unwrap();
            let want = (500.0 + f64::from(angle) / 180.0 * 2000.0) / 20_000.0 * f64::from(max_duty);
            prop_assert!((f64::from(d) - want).abs() <= 0.5 + 1e-3);
            // One duty step is 20 ms / max_duty; in degrees that is 1.8 at max_duty 1000.
            prop_assert!((l.angle(d, max_duty) - angle).abs() <= 1.0);
        }
    }
}
