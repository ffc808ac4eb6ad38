//! The random stream of CPython's `random.Random(seed)` (MT19937 seeded by
//! `init_by_array`), for the two draws Gavel's mechanism makes: `randrange(n)`
//! in its FIFO policy and `shuffle` of the GPU-type order each round for
//! heterogeneity-agnostic policies, and `sample(population, 2)` with which its
//! Gandiva policy groups jobs into pairs. Reproducing the stream reproduces
//! Gavel's schedule; it is seeded from the policy's `seed` option, never from the OS.

const N: usize = 624;
const M: usize = 397;

/// CPython-compatible Mersenne Twister.
#[derive(Clone, Debug)]
pub struct PyRandom {
    state: [u32; N],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative integer seed.
    pub fn new(seed: u64) -> PyRandom {
        let mut key: Vec<u32> = Vec::new();
        let mut rest = seed;
        while rest > 0 {
            key.push(rest as u32);
            rest >>= 32;
        }
        if key.is_empty() {
            key.push(0);
        }
        let mut rng = PyRandom { state: [0; N], index: N };
        rng.init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = rng.state[i - 1] ^ (rng.state[i - 1] >> 30);
            rng.state[i] =
                (rng.state[i] ^ prev.wrapping_mul(1_664_525)).wrapping_add(key[j]).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                rng.state[0] = rng.state[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = rng.state[i - 1] ^ (rng.state[i - 1] >> 30);
            rng.state[i] = (rng.state[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                rng.state[0] = rng.state[N - 1];
                i = 1;
            }
        }
        rng.state[0] = 0x8000_0000;
        rng
    }

    fn init_genrand(&mut self, seed: u32) {
        self.state[0] = seed;
        for i in 1..N {
            let prev = self.state[i - 1] ^ (self.state[i - 1] >> 30);
            self.state[i] = 1_812_433_253u32.wrapping_mul(prev).wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            for k in 0..N {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % N] & 0x7fff_ffff);
                let mut v = self.state[(k + M) % N] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for 1 <= k <= 32.
    fn bits(&mut self, k: u32) -> u32 {
        self.next_u32() >> (32 - k)
    }

    /// `randrange(n)` (CPython's `_randbelow_with_getrandbits`); 0 for n == 0.
    pub fn below(&mut self, n: u32) -> u32 {
        if n == 0 {
            return 0;
        }
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.bits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random.shuffle(items)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u32 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// Positions drawn by `random.sample(population, k)` from a population of
    /// `n` (CPython 3's algorithm: a partial Fisher-Yates over a copy for small
    /// populations, else draws with rejection of repeats). Empty if `k > n`.
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        if k > n || n > u32::MAX as usize {
            return Vec::new();
        }
        let mut set_size = 21usize;
        if k > 5 {
            set_size += 4usize.pow(((k * 3) as f64).log(4.0).ceil() as u32);
        }
        let mut out = Vec::with_capacity(k);
        if n <= set_size {
            let mut pool: Vec<usize> = (0..n).collect();
            for i in 0..k {
                let j = self.below((n - i) as u32) as usize;
                out.push(pool[j]);
                pool[j] = pool[n - i - 1];
            }
        } else {
            while out.len() < k {
                let j = self.below(n as u32) as usize;
                if !out.contains(&j) {
                    out.push(j);
                }
            }
        }
        out
    }

    /// `random.random()`: 53-bit float in [0, 1).
    pub fn random(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_cpython() {
        // python3 -c "import random; r=random.Random(0); print(r.random(), r.getrandbits(32))"
        let mut r = PyRandom::new(0);
        assert_eq!(r.random(), 0.8444218515250481);
        assert_eq!(r.next_u32(), 3_255_389_356);
        // python3 -c "import random; r=random.Random(5); print([r.randrange(7) for _ in range(6)])"
        let mut r = PyRandom::new(5);
        let draws: Vec<u32> = (0..6).map(|_| r.below(7)).collect();
        assert_eq!(draws, [4, 2, 5, 2, 6, 5]);
        // python3 -c "import random; r=random.Random(5); x=list(range(5)); r.shuffle(x); print(x)"
        let mut r = PyRandom::new(5);
        let mut items = [0, 1, 2, 3, 4];
        r.shuffle(&mut items);
        assert_eq!(items, [0, 1, 3, 2, 4]);
    }

    #[test]
    fn sample_matches_cpython() {
        // python3 -c "import random; r=random.Random(0); print(r.sample([0,1],2), r.sample([0,1,2],2))"
        let mut r = PyRandom::new(0);
        assert_eq!((r.sample(2, 2), r.sample(3, 2)), (vec![1, 0], vec![0, 1]));
        // python3 -c "import random; r=random.Random(7);
        //   print([r.sample(list(range(n)),2) for n in (2,3,4,21,22,100)])"
        // (21 is the last population sampled from a copy, 22 the first by rejection)
        let mut r = PyRandom::new(7);
        let draws: Vec<Vec<usize>> = [2, 3, 4, 21, 22, 100].iter().map(|&n| r.sample(n, 2)).collect();
        assert_eq!(draws, [vec![1, 0], vec![1, 0], vec![0, 2], vec![3, 11], vec![18, 1], vec![64, 27]]);
        assert!(r.sample(1, 2).is_empty());
    }
}
