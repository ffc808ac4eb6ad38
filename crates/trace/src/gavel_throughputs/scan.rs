//! A one-pass scanner for well-formed throughput files in the shape Gavel writes
//! them: no JSON tree and no maps of borrowed keys, only the table's own
//! entries. It reads the common form only and declines (`None`) anything else,
//! which then goes to [`super::parse_fast`] (and from there, if need be, to the
//! plain reader that names the bad entry):
//!
//! - keys without escapes or control characters;
//! - rates written as plain decimals (`4.795294551566172`, `12`): no sign, no
//!   exponent, at most 19 significant digits (serde_json's `u64` significand)
//!   and at most 22 digits after the point. Each is converted exactly as
//!   serde_json converts it (without its `float_roundtrip` feature): the digits
//!   as a `u64`, converted to `f64`, divided by the power of ten, so the bits
//!   are the same (`numbers_are_serde_jsons`);
//! - a `"null"` entry is a rate, every other entry a pair `[own, other]`;
//! - no key repeated within an object, and no two keys that name the same job
//!   type (`"('A', 1)"` and `"('A',1)"`) writing the same entry: where maps keep
//!   the last of such writes by key order, the scan would keep the last in file
//!   order, so it declines instead and the result never depends on order.
//!
//! The table it returns is the one `parse_fast` and the plain reader return
//! (`the_scan_is_the_plain_reader` in the parent's tests).

use std::collections::HashMap;
use std::ops::Range;

use cotenant_perf::throughput::{JobTypeKey, PairRates, ThroughputTable};

use super::{parse_job_key, UNCONSOLIDATED_SUFFIX};

/// `10^k` for `k` in `0..=22`, as f64 literals (each exact): the entries of
/// serde_json's `POW10` table this scanner may use.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

/// One job's object under one worker type, as read.
struct JobEntry<'a> {
    text: &'a str,
    null: Option<f64>,
    /// Its pairs' place in `Scan::pairs`.
    pairs: Range<usize>,
}

/// The text being read and the partner keys seen so far.
struct Scan<'a> {
    b: &'a [u8],
    text: &'a str,
    i: usize,
    /// Each distinct partner key text, parsed once.
    partners: Vec<(&'a str, JobTypeKey)>,
    partner_index: HashMap<&'a str, u32>,
    /// The partners of the last job object read, in its order, and how many
    /// of them the current one has passed: jobs list their partners in the
    /// same order, so the next partner is usually the last job's next one
    /// (one comparison instead of a hash).
    last_order: Vec<u32>,
    order: Vec<u32>,
    /// Every job's pairs, one job after another: (partner index into
    /// `partners`, own, other).
    pairs: Vec<(u32, f64, f64)>,
}

/// The table, if `text` is in the common form described above.
pub(super) fn parse_scan(text: &str) -> Option<ThroughputTable> {
    let mut s = Scan {
        b: text.as_bytes(),
        text,
        i: 0,
        partners: Vec::new(),
        partner_index: HashMap::new(),
        last_order: Vec::new(),
        order: Vec::new(),
        pairs: Vec::new(),
    };
    let mut workers: Vec<(&str, Vec<JobEntry<'_>>)> = Vec::new();
    s.ws();
    s.expect(b'{')?;
    s.ws();
    if !s.eat(b'}') {
        loop {
            let name = s.key()?;
            let unconsolidated = name.ends_with(UNCONSOLIDATED_SUFFIX);
            let jobs = s.worker(unconsolidated)?;
            workers.push((name, jobs));
            if !s.next_member()? {
                break;
            }
        }
    }
    s.ws();
    if s.i != s.b.len() {
        return None;
    }
    // Worker names must differ (a map keeps the last of a repeated one).
    let mut names: Vec<&str> = workers.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    // Base types first, then by name: the GPU types' order, as the readers add them.
    workers.sort_by_key(|(n, _)| (n.ends_with(UNCONSOLIDATED_SUFFIX), *n));
    let Scan { partners, partner_index, pairs, .. } = s;
    let mut table = ThroughputTable::new();
    // Texts naming the same job type get the same id (and a job's two pairs
    // with one id are a rewrite, declined below).
    let ids: Vec<u32> = partners.iter().map(|(_, key)| table.partner_id(key)).collect();
    for (worker, jobs) in workers {
        let (gpu_type, unconsolidated) = match worker.strip_suffix(UNCONSOLIDATED_SUFFIX) {
            Some(base) => (base, true),
            None => (worker, false),
        };
        let t = table.add_gpu_type(gpu_type);
        for job in jobs {
            // A job's key is most often also a partner's, parsed already.
            let parsed;
            let key = match partner_index.get(job.text) {
                Some(&p) => &partners[p as usize].1,
                None => {
                    parsed = parse_job_key(job.text)?;
                    &parsed
                }
            };
            if job.null.is_none() && (unconsolidated || job.pairs.is_empty()) {
                continue;
            }
            let slot = table.type_rates_mut(key, t);
            if let Some(rate) = job.null {
                let field = match unconsolidated {
                    true => &mut slot.unconsolidated_steps_per_s,
                    false => &mut slot.consolidated_steps_per_s,
                };
                // Set twice: two job keys name this job type.
                if field.replace(rate).is_some() {
                    return None;
                }
            }
            if unconsolidated || job.pairs.is_empty() {
                continue;
            }
            slot.reserve_pairs(ids.len());
            for &(p, own, other) in &pairs[job.pairs] {
                let rates = PairRates { own_steps_per_s: own, other_steps_per_s: other };
                // A partner named twice (by one text or two naming one type).
                if slot.insert_pair(ids[p as usize], rates).is_some() {
                    return None;
                }
            }
        }
    }
    Some(table)
}

impl<'a> Scan<'a> {
    /// JSON whitespace (Gavel's file is indented: runs of spaces are skipped
    /// eight at a time).
    fn ws(&mut self) {
        const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
        let (b, mut i) = (self.b, self.i);
        loop {
            while let Some(chunk) = b.get(i..i + 8) {
                if u64::from_ne_bytes(chunk.try_into().expect("eight bytes")) != SPACES {
                    break;
                }
                i += 8;
            }
            match b.get(i) {
                Some(b' ' | b'\n' | b'\r' | b'\t') => i += 1,
                _ => break,
            }
        }
        self.i = i;
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.b.get(self.i) == Some(&c);
        self.i += hit as usize;
        hit
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    /// After a member: `true` at a comma (another member follows), `false` at
    /// the object's closing brace.
    fn next_member(&mut self) -> Option<bool> {
        self.ws();
        if self.eat(b',') {
            self.ws();
            return Some(true);
        }
        self.expect(b'}')?;
        Some(false)
    }

    /// A string without escapes or control characters, then `:`.
    fn key(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.i;
        let len = key_end(&self.b[start..])?;
        self.i = start + len;
        self.expect(b'"')?;
        // Both ends are ASCII quotes: a character boundary of the text.
        let key = self.text.get(start..start + len)?;
        self.ws();
        self.expect(b':')?;
        self.ws();
        Some(key)
    }

    /// A worker type's object of job objects.
    fn worker(&mut self, unconsolidated: bool) -> Option<Vec<JobEntry<'a>>> {
        self.expect(b'{')?;
        self.ws();
        let mut jobs = Vec::new();
        if self.eat(b'}') {
            return Some(jobs);
        }
        loop {
            let text = self.key()?;
            jobs.push(self.job(text, unconsolidated)?);
            if !self.next_member()? {
                break;
            }
        }
        // Job keys must differ within the worker type.
        let mut texts: Vec<&str> = jobs.iter().map(|j| j.text).collect();
        texts.sort_unstable();
        if texts.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        Some(jobs)
    }

    /// One job's object: `"null"` and pairs.
    fn job(&mut self, text: &'a str, unconsolidated: bool) -> Option<JobEntry<'a>> {
        self.expect(b'{')?;
        self.ws();
        let first = self.pairs.len();
        let mut job = JobEntry { text, null: None, pairs: first..first };
        if self.eat(b'}') {
            return Some(job);
        }
        loop {
            let other = self.key()?;
            if other == "null" {
                if job.null.replace(self.number()?).is_some() {
                    return None;
                }
            } else {
                self.expect(b'[')?;
                self.ws();
                let own = self.number()?;
                self.ws();
                self.expect(b',')?;
                self.ws();
                let theirs = self.number()?;
                self.ws();
                self.expect(b']')?;
                if !unconsolidated {
                    let p = self.partner(other)?;
                    self.pairs.push((p, own, theirs));
                }
            }
            if !self.next_member()? {
                break;
            }
        }
        if !self.order.is_empty() {
            std::mem::swap(&mut self.last_order, &mut self.order);
            self.order.clear();
        }
        // Partner keys must differ within the job (a repeat would be a
        // rewrite): checked as the table is built.
        job.pairs.end = self.pairs.len();
        Some(job)
    }

    /// The index of partner key `text`, parsed the first time it is seen.
    fn partner(&mut self, text: &'a str) -> Option<u32> {
        let guess = self.last_order.get(self.order.len()).copied();
        let p = match guess.filter(|&p| self.partners[p as usize].0 == text) {
            Some(p) => p,
            None => match self.partner_index.get(text) {
                Some(&p) => p,
                None => {
                    let key = parse_job_key(text)?;
                    let p = u32::try_from(self.partners.len()).ok()?;
                    self.partners.push((text, key));
                    self.partner_index.insert(text, p);
                    p
                }
            },
        };
        self.order.push(p);
        Some(p)
    }

    /// A plain decimal (see the module's doc), as serde_json converts it.
    fn number(&mut self) -> Option<f64> {
        let (value, used) = plain_decimal(&self.b[self.i..])?;
        self.i += used;
        Some(value)
    }
}

/// The length of a key's text at the start of `b`: up to the first `"`, `\\` or
/// control character (`None` if there is none), eight bytes at a time.
pub(super) fn key_end(b: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // High bit set in the byte of the first zero byte of `x` (and perhaps in
    // later ones, never in earlier ones).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut i = 0;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // Bytes below 0x20 (the same trick, the high bit of non-ASCII bytes masked out).
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let hits = zero(x ^ (ONES * u64::from(b'"'))) | zero(x ^ (ONES * u64::from(b'\\'))) | control;
        if hits != 0 {
            return Some(i + hits.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map(|at| i + at)
}

/// The value of eight ASCII digits (the first the most significant), or `None`
/// if one of the bytes is not a digit.
pub(super) fn eight_digits(chunk: [u8; 8]) -> Option<u64> {
    let x = u64::from_le_bytes(chunk);
    // Each byte 0x30..=0x3f, and below 0x3a (adding 6 carries no byte past 0x3f).
    let all = (x & 0xF0F0_F0F0_F0F0_F0F0) == 0x3030_3030_3030_3030
        && (x.wrapping_add(0x0606_0606_0606_0606) & 0xF0F0_F0F0_F0F0_F0F0) == 0x3030_3030_3030_3030;
    if !all {
        return None;
    }
    let d = x.wrapping_sub(u64::from_le_bytes([b'0'; 8]));
    // Pairs, then fours, then all eight (the first byte is the lowest).
    let d = (d.wrapping_mul(10) + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let d = (d.wrapping_mul(100) + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((d.wrapping_mul(10_000) + (d >> 32)) & 0xFFFF_FFFF)
}

/// A non-negative decimal without exponent at the start of `b` and the bytes it
/// takes, converted bit for bit as serde_json 1 converts it (without the
/// `float_roundtrip` feature): an integer is its `u64` as `f64`; a decimal is
/// the `u64` of all its digits as `f64`, divided by `10^(digits after the
/// point)`. `None` for anything else (a sign, an exponent, a leading zero
/// before a digit, more digits than a `u64` holds, more than 22 after the
/// point, nothing after the point, or a digit, `.`, `e`, `E`, `+` or `-`
/// right after the number), for serde_json to read.
pub(super) fn plain_decimal(b: &[u8]) -> Option<(f64, usize)> {
    let digit = |i: usize| b.get(i).filter(|c| c.is_ascii_digit()).map(|c| u64::from(c - b'0'));
    // As serde_json's `overflow!(significand * 10 + digit, u64::MAX)`.
    let push = |sig: u64, d: u64| sig.checked_mul(10).and_then(|s| s.checked_add(d));
    let mut i = 0;
    let mut sig = digit(0)?;
    i += 1;
    if sig != 0 {
        while let Some(d) = digit(i) {
            sig = push(sig, d)?;
            i += 1;
        }
    }
    let mut after = 0usize;
    if b.get(i) == Some(&b'.') {
        i += 1;
        // Eight digits at a time: the same u64 as digit by digit, declined
        // exactly when digit by digit would overflow (the running value only
        // grows, so it overflows somewhere iff the whole does).
        while let Some(eight) = b.get(i..i + 8).and_then(|c| eight_digits(c.try_into().ok()?)) {
            sig = sig.checked_mul(100_000_000)?.checked_add(eight)?;
            i += 8;
            after += 8;
        }
        while let Some(d) = digit(i) {
            sig = push(sig, d)?;
            i += 1;
            after += 1;
        }
        if after == 0 {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')) {
        return None;
    }
    let value = match after {
        0 => sig as f64,
        k => sig as f64 / *POW10.get(k)?,
    };
    Some((value, i))
}
