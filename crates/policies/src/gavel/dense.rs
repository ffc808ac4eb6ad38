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
        /// Random inserts, removals and updates: the table answers every lookup,
        /// length and in-order walk as a `BTreeMap` does. (Checked to catch a
        /// seeded bug: not re-pointing the slot of the value a removal swaps in.)
        #[test]
        fn the_table_is_a_btree_map(ops in proptest::collection::vec((0u8..3, 0u32..40, any::<u16>()), 0..200)) {
            let (mut table, mut map) = (JobTable::default(), BTreeMap::new());
            for (op, id, value) in ops {
                let id = JobId(id);
                match op {
                    0 => prop_assert_eq!(table.insert(id, value), map.insert(id, value)),
                    1 => prop_assert_eq!(table.remove(&id), map.remove(&id)),
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
    }
}
