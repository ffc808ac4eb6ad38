//! The round mechanism's per-job state in dense vectors: a [`JobTable`] looks a
//! job up by its id in O(1) (two indexings, no tree search) and walks the
//! tracked jobs in id order, as the `BTreeMap<JobId, _>` it replaces did. A
//! round looks jobs up dozens of times (tree searches were the largest single
//! cost of a gavel-fifo round); memory is 4 bytes per job id seen plus the
//! tracked jobs themselves, so it stays linear in jobs.

use cotenant_core::JobId;

/// Values by job id, iterated in id order (a `BTreeMap<JobId, T>`'s interface,
/// as far as the mechanism uses it).
#[derive(Clone, Debug)]
pub(crate) struct JobTable<T> {
    /// Position + 1 in `values` of each job id (0: not tracked).
    slot: Vec<u32>,
    /// The tracked values, in no order (a removal swaps the last one in).
    values: Vec<(JobId, T)>,
    /// Tracked ids, ascending.
    ids: Vec<JobId>,
}

impl<T> Default for JobTable<T> {
    fn default() -> Self {
        JobTable { slot: Vec::new(), values: Vec::new(), ids: Vec::new() }
    }
}

impl<T> JobTable<T> {
    fn position(&self, id: JobId) -> Option<usize> {
        match self.slot.get(id.index()) {
            Some(&k) if k > 0 => Some(k as usize - 1),
            _ => None,
        }
    }

    pub(crate) fn get(&self, id: &JobId) -> Option<&T> {
        self.position(*id).map(|k| &self.values[k].1)
    }

    pub(crate) fn get_mut(&mut self, id: &JobId) -> Option<&mut T> {
        self.position(*id).map(|k| &mut self.values[k].1)
    }

    pub(crate) fn contains_key(&self, id: &JobId) -> bool {
        self.position(*id).is_some()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// Tracks `value` under `id`; returns the value it replaces, if any.
    pub(crate) fn insert(&mut self, id: JobId, value: T) -> Option<T> {
        if let Some(k) = self.position(id) {
            return Some(std::mem::replace(&mut self.values[k].1, value));
        }
        if self.slot.len() <= id.index() {
            self.slot.resize(id.index() + 1, 0);
        }
        self.values.push((id, value));
        self.slot[id.index()] = u32::try_from(self.values.len()).expect("fewer than 2^32 tracked jobs");
        // Jobs mostly arrive in id order: then this is a push.
        if self.ids.last().is_none_or(|&last| last < id) {
            self.ids.push(id);
        } else {
            let at = self.ids.partition_point(|&other| other < id);
            self.ids.insert(at, id);
        }
        None
    }

    pub(crate) fn remove(&mut self, id: &JobId) -> Option<T> {
        let k = self.position(*id)?;
        self.slot[id.index()] = 0;
        let (_, value) = self.values.swap_remove(k);
        if let Some(&(moved, _)) = self.values.get(k) {
            self.slot[moved.index()] = k as u32 + 1;
        }
        let at = self.ids.partition_point(|&other| other < *id);
        self.ids.remove(at);
        Some(value)
    }

    /// Removes every value (buffers kept; only the slots in use are reset).
    pub(crate) fn clear(&mut self) {
        for &(id, _) in &self.values {
            self.slot[id.index()] = 0;
        }
        self.values.clear();
        self.ids.clear();
    }

    /// Tracked ids, ascending.
    pub(crate) fn keys(&self) -> std::slice::Iter<'_, JobId> {
        self.ids.iter()
    }

    /// (id, value) in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&JobId, &T)> + '_ {
        self.ids.iter().map(move |id| (id, &self.values[self.slot[id.index()] as usize - 1].1))
    }
}

impl<T> std::ops::Index<&JobId> for JobTable<T> {
    type Output = T;
    fn index(&self, id: &JobId) -> &T {
        self.get(id).unwrap_or_else(|| panic!("{id} is not tracked"))
    }
}

/// Linear steps [`Rows::find_from`] takes before it searches the rest.
const FIND_STEPS: usize = 8;

/// Rows of `f64`s by key, walked in key order: a `BTreeMap<K, Vec<f64>>`
/// whose rows all have one width, stored flat (`values[k * width..]` is the
/// row of `keys[k]`). No allocation per row, no tree nodes: a round walks rows
/// side by side by position, and a lookup is a binary search over `keys`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rows<K> {
    /// Ascending, each at most once.
    keys: Vec<K>,
    values: Vec<f64>,
    /// Values per row; adopted from the first row inserted into an empty map.
    width: usize,
}

impl<K> Default for Rows<K> {
    fn default() -> Self {
        Rows { keys: Vec::new(), values: Vec::new(), width: 0 }
    }
}

impl<K: Ord + Copy> Rows<K> {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Keys, ascending.
    pub(crate) fn keys(&self) -> &[K] {
        &self.keys
    }

    /// The keys, and each row (mutable) in key order: a walk over every row
    /// without a bounds check per row.
    pub(crate) fn rows_mut(&mut self) -> (&[K], std::slice::ChunksExactMut<'_, f64>) {
        (&self.keys, self.values.chunks_exact_mut(self.width.max(1)))
    }

    /// Removes every row (buffers kept).
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.values.clear();
    }

    /// The row at position `k` (of `keys()`).
    #[inline]
    pub(crate) fn row(&self, k: usize) -> &[f64] {
        &self.values[k * self.width..(k + 1) * self.width]
    }

    #[inline]
    pub(crate) fn row_mut(&mut self, k: usize) -> &mut [f64] {
        &mut self.values[k * self.width..(k + 1) * self.width]
    }

    /// `Ok(position)` of `key`, or `Err(where it would go)`.
    #[inline]
    pub(crate) fn position(&self, key: &K) -> Result<usize, usize> {
        self.keys.binary_search(key)
    }

    /// The position of `key`, searched linearly from position `from` (a walk
    /// in key order asks for ascending keys: each step is one comparison),
    /// and where the next search may start.
    #[inline]
    pub(crate) fn seek(&self, from: usize, key: &K) -> (Option<usize>, usize) {
        let mut k = from;
        while k < self.keys.len() && self.keys[k] < *key {
            k += 1;
        }
        if k < self.keys.len() && self.keys[k] == *key {
            (Some(k), k + 1)
        } else {
            (None, k)
        }
    }

    /// [`Rows::seek`] for a key that is likely a few rows on: a few linear
    /// steps from `from` (every key before `from` is below `key`), then a
    /// binary search of the rest, so a far key costs no long walk.
    #[inline]
    pub(crate) fn find_from(&self, from: usize, key: &K) -> (Option<usize>, usize) {
        let n = self.keys.len();
        let stop = from.saturating_add(FIND_STEPS).min(n);
        let mut k = from;
        while k < stop && self.keys[k] < *key {
            k += 1;
        }
        if k == stop && k < n {
            return match self.keys[k..].binary_search(key) {
                Ok(i) => (Some(k + i), k + i + 1),
                Err(i) => (None, k + i),
            };
        }
        if k < n && self.keys[k] == *key {
            (Some(k), k + 1)
        } else {
            (None, k)
        }
    }

    #[cfg(test)]
    pub(crate) fn get(&self, key: &K) -> Option<&[f64]> {
        self.position(key).ok().map(|k| self.row(k))
    }

    #[cfg(test)]
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut [f64]> {
        let k = self.position(key).ok()?;
        Some(self.row_mut(k))
    }

    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.position(key).is_ok()
    }

    #[inline]
    fn adopt_width(&mut self, width: usize) {
        if self.keys.is_empty() {
            self.width = width;
            self.values.clear();
        }
        assert_eq!(width, self.width, "rows of one width");
    }

    /// Sets `key`'s row to `width` copies of `value` (a new row, or the one it had).
    pub(crate) fn insert_filled(&mut self, key: K, width: usize, value: f64) {
        self.adopt_width(width);
        let k = match self.position(&key) {
            Ok(k) => k,
            Err(k) => {
                self.keys.insert(k, key);
                let at = k * width;
                self.values.splice(at..at, std::iter::repeat_n(value, width));
                return;
            }
        };
        self.row_mut(k).fill(value);
    }

    /// Sets `key`'s row to `row` (a new row, or the one it had).
    #[cfg(test)]
    pub(crate) fn insert(&mut self, key: K, row: &[f64]) {
        self.adopt_width(row.len());
        match self.position(&key) {
            Ok(k) => self.row_mut(k).copy_from_slice(row),
            Err(k) => {
                self.keys.insert(k, key);
                let at = k * self.width;
                self.values.splice(at..at, row.iter().copied());
            }
        }
    }

    /// Appends a row of `width` copies of `value` for each of `keys`, which
    /// ascend and are above every key in the map (one extension of each buffer).
    pub(crate) fn extend_filled(&mut self, keys: impl IntoIterator<Item = K>, width: usize, value: f64) {
        self.adopt_width(width);
        let from = self.keys.len().saturating_sub(1);
        self.keys.extend(keys);
        assert!(self.keys[from..].is_sorted_by(|a, b| a < b), "pushed keys ascend");
        self.values.resize(self.keys.len() * width, value);
    }

    /// Appends `key`'s row: `key` is above every key in the map.
    #[inline]
    pub(crate) fn push(&mut self, key: K, row: &[f64]) {
        self.adopt_width(row.len());
        assert!(self.keys.last().is_none_or(|last| *last < key), "pushed keys ascend");
        self.keys.push(key);
        self.values.extend_from_slice(row);
    }

    /// Removes `key`'s row; whether it had one.
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        let Ok(k) = self.position(key) else { return false };
        self.keys.remove(k);
        self.values.drain(k * self.width..(k + 1) * self.width);
        true
    }

    /// Keeps the rows whose key passes `keep`, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(K) -> bool) {
        let width = self.width;
        let mut kept = 0;
        for k in 0..self.keys.len() {
            let key = self.keys[k];
            if keep(key) {
                if kept != k {
                    self.keys[kept] = key;
                    self.values.copy_within(k * width..(k + 1) * width, kept * width);
                }
                kept += 1;
            }
        }
        self.keys.truncate(kept);
        self.values.truncate(kept * width);
    }

    /// (key, row) in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &[f64])> + '_ {
        (0..self.keys.len()).map(move |k| (self.keys[k], self.row(k)))
    }

    /// The map as the `BTreeMap` it replaces (for tests' comparisons).
    #[cfg(test)]
    pub(crate) fn to_map(&self) -> std::collections::BTreeMap<K, Vec<f64>> {
        (0..self.len()).map(|k| (self.keys[k], self.row(k).to_vec())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Three jobs by hand: 5, then 2 (out of order), then 9; removing 5 swaps 9
    /// into its position (values [5, 2, 9] become [9, 2]), and 9 must still be
    /// found there; iteration stays in id order: 2, 9.
    #[test]
    fn removal_keeps_lookups_and_order() {
        let mut t = JobTable::default();
        assert_eq!(t.insert(JobId(5), 'a'), None);
        assert_eq!(t.insert(JobId(2), 'b'), None);
        assert_eq!(t.insert(JobId(9), 'c'), None);
        assert_eq!(t.remove(&JobId(5)), Some('a'));
        assert_eq!(t[&JobId(9)], 'c');
        assert_eq!(t.iter().map(|(&id, &v)| (id.0, v)).collect::<Vec<_>>(), vec![(2, 'b'), (9, 'c')]);
        assert_eq!(t.insert(JobId(2), 'd'), Some('b'));
        assert!(!t.contains_key(&JobId(5)) && t.get(&JobId(100)).is_none());
        assert_eq!(t.keys().len(), 2);
    }

    proptest! {
        /// Random inserts, removals, updates and (rarely) clears: the table
        /// answers every lookup, length and in-order walk as a `BTreeMap` does.
        /// (Checked to catch seeded bugs: not re-pointing the slot of the value
        /// a removal swaps in; `clear` leaving the slots set.)
        #[test]
        fn the_table_is_a_btree_map(ops in proptest::collection::vec((0u8..20, 0u32..40, any::<u16>()), 0..200)) {
            let (mut table, mut map) = (JobTable::default(), BTreeMap::new());
            for (op, id, value) in ops {
                let id = JobId(id);
                match op {
                    0..=8 => prop_assert_eq!(table.insert(id, value), map.insert(id, value)),
                    9..=13 => prop_assert_eq!(table.remove(&id), map.remove(&id)),
                    14 => {
                        table.clear();
                        map.clear();
                    }
                    _ => {
                        if let (Some(a), Some(b)) = (table.get_mut(&id), map.get_mut(&id)) {
                            *a = a.wrapping_add(1);
                            *b = b.wrapping_add(1);
                        }
                    }
                }
                prop_assert_eq!(table.keys().len(), map.len());
                prop_assert_eq!(table.is_empty(), map.is_empty());
                for probe in 0..41 {
                    let probe = JobId(probe);
                    prop_assert_eq!(table.get(&probe), map.get(&probe));
                    prop_assert_eq!(table.contains_key(&probe), map.contains_key(&probe));
                }
                prop_assert!(table.iter().eq(map.iter()));
                prop_assert!(table.keys().eq(map.keys()));
            }
        }

        /// Random inserts (whole rows, filled rows, appends above the last
        /// key), removals, retains, updates and seeks: the flat rows answer
        /// every lookup and walk as a `BTreeMap<u32, Vec<f64>>` does. (Checked
        /// to catch seeded bugs: `remove` draining the row after the key's,
        /// `retain` not moving the rows it keeps.)
        #[test]
        fn the_rows_are_a_btree_map(ops in proptest::collection::vec((0u8..6, 0u32..30, -4i8..4), 0..200)) {
            let (mut rows, mut map) = (Rows::default(), BTreeMap::new());
            for (op, key, value) in ops {
                let v = f64::from(value);
                let row = [v, v + 0.5, -v];
                match op {
                    0 => {
                        rows.insert(key, &row);
                        map.insert(key, row.to_vec());
                    }
                    1 => {
                        rows.insert_filled(key, 3, v);
                        map.insert(key, vec![v; 3]);
                    }
                    2 => {
                        let key = map.keys().next_back().map_or(key, |last| last + 1 + key % 3);
                        if value % 2 == 0 {
                            rows.push(key, &row);
                            map.insert(key, row.to_vec());
                        } else {
                            rows.extend_filled([key, key + 1], 3, v);
                            map.insert(key, vec![v; 3]);
                            map.insert(key + 1, vec![v; 3]);
                        }
                    }
                    3 => prop_assert_eq!(rows.remove(&key), map.remove(&key).is_some()),
                    4 => {
                        rows.retain(|k| (k + key) % 3 != 0);
                        map.retain(|k, _| (k + key) % 3 != 0);
                    }
                    _ => {
                        if let (Some(a), Some(b)) = (rows.get_mut(&key), map.get_mut(&key)) {
                            a[1] += v;
                            b[1] += v;
                        }
                    }
                }
                prop_assert_eq!(rows.len(), map.len());
                prop_assert_eq!(rows.to_map(), map.clone());
                prop_assert!(rows.iter().map(|(k, r)| (k, r.to_vec())).eq(map.iter().map(|(&k, r)| (k, r.clone()))));
                let mut from = 0;
                for probe in 0..34 {
                    prop_assert_eq!(rows.get(&probe), map.get(&probe).map(|r| &r[..]));
                    prop_assert_eq!(rows.contains_key(&probe), map.contains_key(&probe));
                    // Seeks in ascending order find what a lookup finds.
                    let (found, next) = rows.seek(from, &probe);
                    prop_assert_eq!(found.map(|k| rows.keys()[k]), map.contains_key(&probe).then_some(probe));
                    prop_assert!(next >= from);
                    from = next;
                }
            }
        }

        /// `find_from` answers as `seek` (the row and where the next search
        /// starts) for ascending probes near and far (past its linear steps),
        /// present and absent. (Checked to catch a seeded bug: the search past
        /// the linear steps starting one row late.)
        #[test]
        fn finding_from_a_cursor_is_seeking(
            keys in proptest::collection::btree_set(0u32..400, 0..120),
            strides in proptest::collection::vec(1u32..40, 1..60),
        ) {
            let mut rows = Rows::default();
            for &key in &keys {
                rows.extend_filled([key], 1, f64::from(key));
            }
            let (mut probe, mut from) = (0u32, 0usize);
            for stride in strides {
                probe += stride;
                let (found, next) = rows.find_from(from, &probe);
                prop_assert_eq!((found, next), rows.seek(from, &probe), "probe {} from {}", probe, from);
                prop_assert_eq!(found.map(|k| rows.keys()[k]), keys.contains(&probe).then_some(probe));
                from = next;
            }
        }
    }
}
