//! Paged KV memory of one replica, with a prefix cache keyed by block hashes.
//!
//! Capacity is counted in blocks of `block_tokens` tokens (vLLM's pages). A request
//! holds private blocks for the tokens it computed. A prefix-cache entry covers
//! `prefix_block_tokens` tokens (Mooncake: 512) and holds the blocks for them while it
//! is cached; entries nobody references are evicted least-recently-used first when
//! private allocation runs short. Invariant (asserted): private + cached <= capacity.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
struct CacheEntry {
    references: u32,
    last_use: u64,
}

/// Block accounting for one replica.
#[derive(Clone, Debug)]
pub struct KvPool {
    pub block_tokens: u32,
    pub capacity_blocks: u64,
    private_blocks: u64,
    /// Blocks per prefix-cache entry (0: no prefix cache).
    blocks_per_entry: u64,
    entries: BTreeMap<u64, CacheEntry>,
    /// Unreferenced entries by (last use, hash): eviction order.
    evictable: BTreeSet<(u64, u64)>,
    clock: u64,
    pub stats: KvStats,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvStats {
    pub peak_used_blocks: u64,
    pub prefix_hit_tokens: u64,
    pub evicted_entries: u64,
}

impl KvPool {
    /// `prefix_block_tokens` 0 disables the prefix cache.
    pub fn new(capacity_blocks: u64, block_tokens: u32, prefix_block_tokens: u32) -> KvPool {
        let blocks_per_entry =
            if prefix_block_tokens == 0 { 0 } else { u64::from(prefix_block_tokens.div_ceil(block_tokens)) };
        KvPool {
            block_tokens,
            capacity_blocks,
            private_blocks: 0,
            blocks_per_entry,
            entries: BTreeMap::new(),
            evictable: BTreeSet::new(),
            clock: 0,
            stats: KvStats::default(),
        }
    }

    pub fn blocks_for_tokens(&self, tokens: u64) -> u64 {
        tokens.div_ceil(u64::from(self.block_tokens))
    }

    pub fn cached_blocks(&self) -> u64 {
        self.entries.len() as u64 * self.blocks_per_entry
    }

    pub fn used_blocks(&self) -> u64 {
        self.private_blocks + self.cached_blocks()
    }

    /// Blocks free now plus blocks held by evictable cache entries.
    pub fn available_blocks(&self) -> u64 {
        self.capacity_blocks - self.used_blocks() + self.evictable.len() as u64 * self.blocks_per_entry
    }

    /// Takes `blocks` private blocks, evicting unreferenced prefix entries if needed.
    /// Returns false (and takes nothing) when even eviction cannot make room.
    pub fn try_allocate(&mut self, blocks: u64) -> bool {
        if !self.make_room(blocks) {
            return false;
        }
        self.private_blocks += blocks;
        self.check_capacity();
        true
    }

    /// Frees at least `blocks` blocks, evicting unreferenced prefix entries least
    /// recently used first; false (evicting nothing) when even that cannot.
    fn make_room(&mut self, blocks: u64) -> bool {
        if blocks > self.available_blocks() {
            return false;
        }
        while self.capacity_blocks - self.used_blocks() < blocks {
            let Some((_, hash)) = self.evictable.pop_first() else { return false };
            self.entries.remove(&hash);
            self.stats.evicted_entries += 1;
        }
        true
    }

    pub fn free(&mut self, blocks: u64) {
        assert!(
            blocks <= self.private_blocks,
            "freeing {blocks} private blocks, only {} held",
            self.private_blocks
        );
        self.private_blocks -= blocks;
    }

    /// Length of the longest cached prefix of `hashes` (entries), referencing each
    /// matched entry. The caller must later [`Self::release`] the same prefix.
    pub fn acquire_prefix(&mut self, hashes: &[u64]) -> u32 {
        self.clock += 1;
        let mut matched = 0;
        for hash in hashes {
            let Some(entry) = self.entries.get_mut(hash) else { break };
            if entry.references == 0 {
                self.evictable.remove(&(entry.last_use, *hash));
            }
            entry.references += 1;
            entry.last_use = self.clock;
            matched += 1;
        }
        matched
    }

    /// Publishes `hashes[from..to]` (blocks whose KV the request just computed) as cache
    /// entries it references. Each newly cached entry converts private blocks into cached
    /// ones; an entry someone else published meanwhile is referenced and the private
    /// copy freed. At most `held_private` blocks (the request's own) are given up, so a
    /// prefix block size that is not a multiple of the KV block size cannot unbalance
    /// the books: where a new entry needs more blocks than the request gives up, the
    /// difference must be free (after evicting unreferenced entries), or publishing stops
    /// there and the request keeps the rest private. Returns how many entries were
    /// published (from `from` on) and the private blocks given up.
    pub fn publish(&mut self, hashes: &[u64], from: usize, to: usize, held_private: u64) -> (usize, u64) {
        self.clock += 1;
        let mut released = 0;
        for (published, hash) in hashes[from..to].iter().enumerate() {
            let give_up = self.blocks_per_entry.min(held_private - released);
            match self.entries.get_mut(hash) {
                Some(entry) => {
                    if entry.references == 0 {
                        self.evictable.remove(&(entry.last_use, *hash));
                    }
                    entry.references += 1;
                    entry.last_use = self.clock;
                }
                None => {
                    if !self.make_room(self.blocks_per_entry - give_up) {
                        return (published, released);
                    }
                    self.entries.insert(*hash, CacheEntry { references: 1, last_use: self.clock });
                }
            }
            released += give_up;
            self.private_blocks -= give_up;
            self.check_capacity();
        }
        (to - from, released)
    }

    /// Drops one reference to each of `hashes`; unreferenced entries become evictable.
    pub fn release(&mut self, hashes: &[u64]) {
        for hash in hashes {
            let Some(entry) = self.entries.get_mut(hash) else { continue };
            entry.references = entry.references.saturating_sub(1);
            if entry.references == 0 {
                self.evictable.insert((entry.last_use, *hash));
            }
        }
    }

    pub fn blocks_per_prefix_entry(&self) -> u64 {
        self.blocks_per_entry
    }

    fn check_capacity(&mut self) {
        let used = self.used_blocks();
        assert!(used <= self.capacity_blocks, "KV over capacity: {used} > {}", self.capacity_blocks);
        self.stats.peak_used_blocks = self.stats.peak_used_blocks.max(used);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_fails_cleanly_at_capacity() {
        let mut pool = KvPool::new(10, 16, 0);
        assert!(pool.try_allocate(7));
        assert!(!pool.try_allocate(4));
        assert_eq!(pool.used_blocks(), 7);
        pool.free(7);
        assert!(pool.try_allocate(10));
    }

    #[test]
    fn prefix_entries_are_shared_then_evicted_lru() {
        // 512-token entries over 16-token blocks: 32 blocks each; capacity 100 blocks.
        let mut pool = KvPool::new(100, 16, 512);
        assert!(pool.try_allocate(64)); // request A computed 2 entries' worth
        assert_eq!(pool.publish(&[1, 2], 0, 2, 64), (2, 64));
        assert_eq!(pool.used_blocks(), 64);
        assert_eq!(pool.acquire_prefix(&[1, 2, 3]), 2); // request B reuses both
        pool.release(&[1, 2]); // A finishes
        pool.release(&[1, 2]); // B finishes: both evictable
        assert!(pool.try_allocate(60)); // needs one eviction (36 free)
        assert_eq!(pool.stats.evicted_entries, 1);
        assert_eq!(pool.acquire_prefix(&[1]), 0, "entry 1 was least recently used");
        assert_eq!(pool.acquire_prefix(&[2]), 1);
    }

    #[test]
    fn publishing_stops_where_a_new_entry_would_overfill_the_pool() {
        // 100-token entries over 16-token blocks cost 7 blocks; a request that computed
        // 200 tokens holds 13. Capacity 13: the first entry fits (7 for 7), the second
        // needs 7 for the 6 left, one more than is free.
        let mut pool = KvPool::new(13, 16, 100);
        assert!(pool.try_allocate(13));
        assert_eq!(pool.publish(&[1, 2], 0, 2, 13), (1, 7));
        assert_eq!(pool.used_blocks(), 13);
        pool.free(6);
        pool.release(&[1]);
        assert_eq!(pool.used_blocks(), 7, "entry 1 stays cached, unreferenced");
        // With room, the same request would publish both (7 + 7 for 13 given up).
        let mut roomy = KvPool::new(14, 16, 100);
        assert!(roomy.try_allocate(13));
        assert_eq!(roomy.publish(&[1, 2], 0, 2, 13), (2, 13));
        assert_eq!(roomy.used_blocks(), 14);
    }
}
