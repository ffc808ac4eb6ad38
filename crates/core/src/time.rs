//! Integer time. The engine never reads a clock: every `Time` is passed in.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Microseconds since the run's epoch (for a trace: its first arrival, or the
/// start of the slice that was cut from it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

/// A duration in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span(pub u64);

pub const MICROS_PER_SECOND: u64 = 1_000_000;

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub fn from_secs(secs: u64) -> Time {
        Time(secs.saturating_mul(MICROS_PER_SECOND))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / MICROS_PER_SECOND as f64
    }
    /// Time elapsed since `earlier`; zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Span {
        Span(self.0.saturating_sub(earlier.0))
    }
}

impl Span {
    pub const ZERO: Span = Span(0);

    pub fn from_secs(secs: u64) -> Span {
        Span(secs.saturating_mul(MICROS_PER_SECOND))
    }
    /// Rounds up to the next microsecond, so that work finishes no earlier
    /// than the rate allows. Negative and NaN inputs give zero; huge ones saturate.
    pub fn from_secs_f64_ceil(secs: f64) -> Span {
        if secs.is_nan() || secs <= 0.0 {
            return Span::ZERO;
        }
        let micros = (secs * MICROS_PER_SECOND as f64).ceil();
        if micros >= u64::MAX as f64 {
            Span(u64::MAX)
        } else {
            Span(micros as u64)
        }
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / MICROS_PER_SECOND as f64
    }
}

impl Add<Span> for Time {
    type Output = Time;
    fn add(self, rhs: Span) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<Span> for Time {
    fn add_assign(&mut self, rhs: Span) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Add for Span {
    type Output = Span;
    fn add(self, rhs: Span) -> Span {
        Span(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Span {
    fn add_assign(&mut self, rhs: Span) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for Time {
    type Output = Span;
    /// Saturating: `a - b` is zero when `b` is later.
    fn sub(self, rhs: Time) -> Span {
        self.since(rhs)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_rounding_never_finishes_early() {
        assert_eq!(Span::from_secs_f64_ceil(1.0000001), Span(1_000_001));
        assert_eq!(Span::from_secs_f64_ceil(2.0), Span(2_000_000));
        assert_eq!(Span::from_secs_f64_ceil(-3.0), Span::ZERO);
        assert_eq!(Span::from_secs_f64_ceil(f64::NAN), Span::ZERO);
    }

    #[test]
    fn time_arithmetic_saturates() {
        assert_eq!(Time(5) - Time(9), Span::ZERO);
        assert_eq!(Time::MAX + Span(1), Time::MAX);
    }
}
