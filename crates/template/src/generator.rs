//! [`Generator`]: a worker thread's random state, from which requests draw their data rows
//! and their random values.

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// Lowercase hex digits.
pub(crate) const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// A worker thread's random state: a [`SmallRng`] seeded from the run's seed and the
/// worker's index, so workers draw different values and a seed repeats a run's values.
#[derive(Clone, Debug)]
pub struct Generator {
    rng: SmallRng,
}

impl Generator {
    /// The generator of worker `worker` in a run seeded with `seed`.
    pub fn new(seed: u64, worker: usize) -> Generator {
        let mixed = splitmix64(
            seed ^ splitmix64(
                (worker as u64)
                    .wrapping_add(1)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
        );
        Generator {
            rng: SmallRng::seed_from_u64(mixed),
        }
    }

    /// The random number generator (for [`crate::Data::pick`] and callers' own draws).
    pub fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }

    /// Appends `n` random ASCII letters and digits.
    pub(crate) fn randstr(&mut self, n: usize, out: &mut Vec<u8>) {
        const ALPHABET: &[u8; 62] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut left = n;
        while left > 0 {
            // Ten 6-bit draws per word; 62 and 63 are rejected, so the rest are uniform.
            let mut word = self.rng.next_u64();
            for _ in 0..10 {
                let v = (word & 63) as usize;
                word >>= 6;
                if v < 62 {
                    out.push(ALPHABET[v]);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
    }

    /// Appends `n` random lowercase hex digits.
    pub(crate) fn hex(&mut self, n: usize, out: &mut Vec<u8>) {
        let mut left = n;
        while left > 0 {
            let mut word = self.rng.next_u64();
            for _ in 0..left.min(16) {
                out.push(HEX_LOWER[(word & 15) as usize]);
                word >>= 4;
            }
            left -= left.min(16);
        }
    }
}

/// The 64-bit finalizer of SplitMix64: spreads nearby seeds apart.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
