//! [`JobSet`]: the engine's pending and running sets, as the policy view shows them.
//!
//! Job ids are dense (a workload numbers its jobs 0..n), so a set of them is a
//! bitmap: insert, remove and membership are a bit each, with no search and no
//! allocation, where a `BTreeSet` searched its tree and moved keys within nodes
//! (about 8% of a FIFO run). A second bitmap marks the non-empty words, so that
//! iteration in id order skips empty stretches 4,096 ids at a time. Iteration
//! hands out `&JobId`, as a `BTreeSet`'s does, from a table of ids (`ids[i] ==
//! JobId(i)`) that grows with the largest id seen.

use crate::ids::JobId;

/// A set of job ids, iterated in id order (submission order), as a `BTreeSet<JobId>` is.
#[derive(Clone, Default)]
pub struct JobSet {
    /// Bit `i % 64` of `words[i / 64]`: job `i` is in the set.
    words: Vec<u64>,
    /// Bit `w % 64` of `summary[w / 64]`: `words[w]` is not zero.
    summary: Vec<u64>,
    /// `ids[i] == JobId(i)`: what iteration refers to.
    ids: Vec<JobId>,
    len: usize,
}

impl JobSet {
    pub fn new() -> JobSet {
        JobSet::default()
    }

    /// Makes room for ids `0..ids` at once.
    pub fn reserve(&mut self, ids: usize) {
        self.grow(ids);
    }

    fn grow(&mut self, ids: usize) {
        if ids <= self.ids.len() {
            return;
        }
        let words = ids.div_ceil(64);
        self.words.resize(words, 0);
        self.summary.resize(words.div_ceil(64), 0);
        let have = self.ids.len() as u32;
        self.ids.extend((have..ids as u32).map(JobId));
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, id: &JobId) -> bool {
        let i = id.index();
        self.words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Adds `id`; false if it was already in the set.
    pub fn insert(&mut self, id: JobId) -> bool {
        let i = id.index();
        self.grow(i + 1);
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.summary[w / 64] |= 1 << (w % 64);
        self.len += 1;
        true
    }

    /// Takes `id` out; false if it was not in the set.
    pub fn remove(&mut self, id: &JobId) -> bool {
        if !self.contains(id) {
            return false;
        }
        let i = id.index();
        let w = i / 64;
        self.words[w] &= !(1u64 << (i % 64));
        if self.words[w] == 0 {
            self.summary[w / 64] &= !(1u64 << (w % 64));
        }
        self.len -= 1;
        true
    }

    /// The members in id order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { set: self, from: 0, left: self.len }
    }

    /// The smallest member.
    pub fn first(&self) -> Option<&JobId> {
        self.iter().next()
    }

    /// The largest member.
    pub fn last(&self) -> Option<&JobId> {
        let s = self.summary.iter().rposition(|&s| s != 0)?;
        let w = s * 64 + 63 - self.summary[s].leading_zeros() as usize;
        Some(&self.ids[w * 64 + 63 - self.words[w].leading_zeros() as usize])
    }

    /// The smallest member at or after id `from`, as an index.
    fn next_from(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let here = self.words.get(w)? & (!0u64 << (from % 64));
        if here != 0 {
            return Some(w * 64 + here.trailing_zeros() as usize);
        }
        // The next non-empty word after `w`, from the summary.
        let next = w + 1;
        let mut s = next / 64;
        let mut mask = !0u64 << (next % 64);
        loop {
            let marked = self.summary.get(s)? & mask;
            if marked != 0 {
                let w = s * 64 + marked.trailing_zeros() as usize;
                return Some(w * 64 + self.words[w].trailing_zeros() as usize);
            }
            s += 1;
            mask = !0;
        }
    }
}

/// [`JobSet::iter`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    set: &'a JobSet,
    /// The next member is at this index or later.
    from: usize,
    /// Members not yet handed out.
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a JobId;

    #[inline]
    fn next(&mut self) -> Option<&'a JobId> {
        if self.left == 0 {
            return None;
        }
        let i = self.set.next_from(self.from)?;
        self.from = i + 1;
        self.left -= 1;
        Some(&self.set.ids[i])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a JobSet {
    type Item = &'a JobId;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<JobId> for JobSet {
    fn from_iter<I: IntoIterator<Item = JobId>>(ids: I) -> JobSet {
        let mut set = JobSet::new();
        set.extend(ids);
        set
    }
}

impl Extend<JobId> for JobSet {
    fn extend<I: IntoIterator<Item = JobId>>(&mut self, ids: I) {
        for id in ids {
            self.insert(id);
        }
    }
}

/// Equal when the members are (whatever room either has made).
impl PartialEq for JobSet {
    fn eq(&self, other: &JobSet) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for JobSet {}

impl std::fmt::Debug for JobSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// Ids 0, 63, 64 and 4,096 sit at the edges of a word and of a summary word:
    /// inserted out of order, they come back in id order; the last is 4,096.
    #[test]
    fn word_and_summary_edges_iterate_in_order() {
        let set: JobSet = [4096, 64, 0, 63].into_iter().map(JobId).collect();
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), [0, 63, 64, 4096].map(JobId));
        assert_eq!((set.first(), set.last(), set.len()), (Some(&JobId(0)), Some(&JobId(4096)), 4));
        assert!(set.contains(&JobId(63)) && !set.contains(&JobId(62)) && !set.contains(&JobId(99_999)));
    }

    proptest! {
        /// Any sequence of inserts and removes (ids up to 20,000, so several summary
        /// words) leaves the set equal to a `BTreeSet` given the same: the same
        /// answers to insert, remove and contains, the same members in the same
        /// order, the same length, first and last, and any suffix of the iteration.
        #[test]
        fn behaves_as_a_btree_set(
            ops in prop::collection::vec((any::<bool>(), prop_oneof![0u32..600, 0u32..20_000]), 0..400),
            skip in 0usize..50,
        ) {
            let (mut set, mut plain) = (JobSet::new(), BTreeSet::new());
            for (insert, id) in ops {
                let id = JobId(id);
                if insert {
                    prop_assert_eq!(set.insert(id), plain.insert(id));
                } else {
                    prop_assert_eq!(set.remove(&id), plain.remove(&id));
                }
                prop_assert_eq!(set.contains(&id), plain.contains(&id));
            }
            prop_assert!(set.iter().eq(plain.iter()));
            prop_assert!(set.iter().skip(skip).eq(plain.iter().skip(skip)));
            prop_assert_eq!(set.iter().len(), plain.len());
            prop_assert_eq!((set.len(), set.is_empty()), (plain.len(), plain.is_empty()));
            prop_assert_eq!((set.first(), set.last()), (plain.first(), plain.last()));
        }
    }
}
