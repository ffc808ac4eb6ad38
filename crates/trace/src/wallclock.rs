//! Wall-clock timestamps without a time zone (`YYYY-MM-DD[ HH:MM:SS[.fraction]]`),
//! as Philly and Azure write them. Parsed by hand to keep the dependency tree
//! lean; the result is microseconds since 1970-01-01 00:00:00 of the same
//! (unknown) zone, which is all a trace needs: only differences matter.

use cotenant_core::limits::{MAX_UNIX_SECONDS, MIN_UNIX_SECONDS};

use crate::error::TraceError;
use crate::text::Row;

/// Parses a timestamp to microseconds since the epoch of its own zone.
/// Returns a short reason on failure.
pub fn parse_wall_clock_us(text: &str) -> Result<i64, String> {
    match canonical_us(text.as_bytes()) {
        Some(us) => Ok(us),
        None => parse_any_form_us(text),
    }
}

/// [`parse_wall_clock_us`] for every form it accepts, without the common
/// forms' shortcut.
fn parse_any_form_us(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (date, time) = match text.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t.trim())),
        None => (text, None),
    };
    let days = parse_date(date)?;
    let micros_of_day = match time {
        Some(t) => parse_time_of_day_us(t)?,
        None => 0,
    };
    Ok(days * 86_400_000_000 + micros_of_day)
}

/// The common forms `YYYY-MM-DD HH:MM:SS` (or `T` between) and `YYYY-MM-DD`,
/// all digits where digits go and a valid date and time, read by position;
/// `None` for anything else, which the general parser then reads (or names as
/// bad). Where it answers, it answers as the general parser does
/// (`canonical_forms_are_read_as_the_general_parser_reads_them`).
fn canonical_us(b: &[u8]) -> Option<i64> {
    let date_only = match b.len() {
        10 => true,
        19 if matches!(b[10], b' ' | b'T') && b[13] == b':' && b[16] == b':' => false,
        _ => return None,
    };
    if b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let digits = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |v, &c| c.is_ascii_digit().then(|| v * 10 + i64::from(c - b'0')))
    };
    let year = digits(0, 4)?;
    let month = u32::try_from(digits(5, 7)?).ok()?;
    let day = u32::try_from(digits(8, 10)?).ok()?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if date_only {
        return Some(days * 86_400_000_000);
    }
    let (hour, minute, second) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    if hour >= 24 || minute >= 60 || second >= 61 {
        return None;
    }
    Some(days * 86_400_000_000 + ((hour * 60 + minute) * 60 + second) * 1_000_000)
}

/// Formats microseconds since the epoch back as `YYYY-MM-DD HH:MM:SS` (for messages).
pub fn format_wall_clock(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", sod / 3600, sod / 60 % 60, sod % 60)
}

fn parse_date(date: &str) -> Result<i64, String> {
    let bad = || format!("expected a date YYYY-MM-DD, got {date:?}");
    let [y, m, d] = split3(date, '-').ok_or_else(bad)?;
    let year: i64 = y.parse().map_err(|_| bad())?;
    let month: u32 = m.parse().map_err(|_| bad())?;
    let day: u32 = d.parse().map_err(|_| bad())?;
    if y.len() != 4 || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(bad());
    }
    Ok(days_from_civil(year, month, day))
}

fn parse_time_of_day_us(time: &str) -> Result<i64, String> {
    let bad = || format!("expected a time HH:MM:SS, got {time:?}");
    let (hms, fraction) = match time.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (time, None),
    };
    let [h, m, s] = split3(hms, ':').ok_or_else(bad)?;
    let hour: i64 = h.parse().map_err(|_| bad())?;
    let minute: i64 = m.parse().map_err(|_| bad())?;
    let second: i64 = s.parse().map_err(|_| bad())?;
    if !(0..24).contains(&hour) || !(0..60).contains(&minute) || !(0..61).contains(&second) {
        return Err(bad());
    }
    let micros = match fraction {
        Some(f) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => fraction_to_us(f),
        Some(_) => return Err(bad()),
        None => 0,
    };
    Ok(((hour * 60 + minute) * 60 + second) * 1_000_000 + micros)
}

/// Exactly three `separator`-separated parts, without allocating; `None` otherwise.
fn split3(text: &str, separator: char) -> Option<[&str; 3]> {
    let mut parts = text.split(separator);
    let three = [parts.next()?, parts.next()?, parts.next()?];
    parts.next().is_none().then_some(three)
}

/// `"1234567"` (7 digits, Azure) -> 123_456 us: truncated to microseconds.
fn fraction_to_us(fraction: &str) -> i64 {
    let mut us = 0i64;
    for (i, b) in fraction.bytes().take(6).enumerate() {
        us += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
    }
    us
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A wall-clock timestamp field, within [`cotenant_core::limits::MIN_UNIX_SECONDS`, `MAX_UNIX_SECONDS`].
pub(crate) fn wall_clock_field(row: &Row<'_>, column: usize) -> Result<i64, TraceError> {
    let us = parse_wall_clock_us(row.str(column)).map_err(|reason| row.error(column, reason))?;
    let secs = us.div_euclid(1_000_000);
    if !(MIN_UNIX_SECONDS..=MAX_UNIX_SECONDS).contains(&secs) {
        return Err(row.error(
            column,
            format!(
                "{:?} is outside the accepted range {} to {} (core::limits::MIN_UNIX_SECONDS, MAX_UNIX_SECONDS)",
                row.str(column),
                format_wall_clock(MIN_UNIX_SECONDS * 1_000_000),
                format_wall_clock(MAX_UNIX_SECONDS * 1_000_000),
            ),
        ));
    }
    Ok(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(parse_wall_clock_us("1970-01-01"), Ok(0));
        assert_eq!(parse_wall_clock_us("1970-01-02 00:00:01"), Ok(86_401_000_000));
        // 2017-11-06 00:00:00 UTC is 1509926400 in Unix time.
        assert_eq!(parse_wall_clock_us("2017-11-06"), Ok(1_509_926_400_000_000));
        assert_eq!(parse_wall_clock_us("2000-02-29T12:00:00"), Ok(951_825_600_000_000));
        assert_eq!(parse_wall_clock_us("2023-11-16 18:15:46.3046760"), Ok(1_700_158_546_304_676));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        #[test]
        fn canonical_forms_are_read_as_the_general_parser_reads_them(
            y in proptest::prop_oneof![proptest::sample::select(vec![0u32, 1900, 2000, 2016, 2017, 2100, 9999]), 0u32..10_000],
            mo in proptest::sample::select(vec![0u32, 1, 2, 4, 11, 12, 13]),
            d in proptest::sample::select(vec![0u32, 1, 15, 28, 29, 30, 31, 32]),
            h in proptest::sample::select(vec![0u32, 7, 23, 24, 25]),
            mi in proptest::sample::select(vec![0u32, 30, 59, 60]),
            s in proptest::sample::select(vec![0u32, 30, 59, 60, 61, 62]),
            sep in proptest::sample::select(vec![" ", "T", " ", "T", "  ", "t", ""]),
            date_only in proptest::bool::ANY,
            noise in proptest::option::of((0usize..19, proptest::sample::select(vec![b'x', b'+', b' ', b'9', b'-', b':']))),
        ) {
            let mut text = if date_only {
                format!("{y:04}-{mo:02}-{d:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02}{sep}{h:02}:{mi:02}:{s:02}")
            };
            if let Some((at, byte)) = noise {
                if at < text.len() {
                    let mut bytes = text.into_bytes();
                    bytes[at] = byte;
                    text = String::from_utf8(bytes).expect("ASCII");
                }
            }
            let fast = canonical_us(text.as_bytes());
            let general = parse_any_form_us(&text);
            if let Some(us) = fast {
                proptest::prop_assert_eq!(Ok(us), general.clone(), "{:?}", text);
            }
            proptest::prop_assert_eq!(parse_wall_clock_us(&text), general, "{:?}", text);
        }
    }

    #[test]
    fn round_trip_format() {
        let us = parse_wall_clock_us("2017-12-22 08:02:11").expect("valid");
        assert_eq!(format_wall_clock(us), "2017-12-22 08:02:11");
    }

    #[test]
    fn rejects_bad_dates() {
        for bad in [
            "2017-13-01",
            "2017-02-29",
            "17-01-01",
            "2017-01-01 25:00:00",
            "x",
            "2017-01-01 10:00",
            "2017-01-01 1:2:3.x",
        ] {
            assert!(parse_wall_clock_us(bad).is_err(), "{bad}");
        }
    }
}
