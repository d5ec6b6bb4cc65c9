//! Byte searches (`memchr`) that never ask the CPU what it supports.
//!
//! The `memchr` crate's top-level functions pick AVX2 or SSE2 at their
//! first call by running `cpuid` about nine times, and `cpuid` traps to the
//! hypervisor in a virtual machine: ~15 µs each here, 5% of a small
//! policy's check. SSE2 is part of every x86-64 CPU, so its searchers are
//! taken without asking; the strings searched (quoted texts, a policy's
//! lines) gain nothing from AVX2's wider steps. Elsewhere the crate's own
//! functions are used.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod imp {
    use memchr::arch::x86_64::sse2::memchr::{One, Two};

    fn one(a: u8) -> One {
        // SAFETY: SSE2 is enabled at compile time (the cfg above).
        unsafe { One::new_unchecked(a) }
    }

    fn two(a: u8, b: u8) -> Two {
        // SAFETY: as in `one`.
        unsafe { Two::new_unchecked(a, b) }
    }

    #[inline]
    pub fn memchr(a: u8, hay: &[u8]) -> Option<usize> {
        one(a).find(hay)
    }

    #[inline]
    pub fn memchr2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
        two(a, b).find(hay)
    }

    pub fn memchr_count(a: u8, hay: &[u8]) -> usize {
        one(a).count(hay)
    }

    /// Calls `f` with the position of every `a` in `hay`, in order. One
    /// compare per 16 bytes and a bit scan per hit: a search started again
    /// after each hit costs ~80 instructions a time, and newlines come
    /// every ~40 bytes.
    pub fn for_each_position(a: u8, hay: &[u8], mut f: impl FnMut(usize)) {
        use core::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is enabled at compile time (the cfg above).
        let needle = unsafe { _mm_set1_epi8(a as i8) };
        let mut chunks = hay.chunks_exact(16);
        let mut base = 0;
        for chunk in &mut chunks {
            // SAFETY: as above; the chunk holds 16 readable bytes, and an
            // unaligned load needs no alignment.
            let mut hits = unsafe {
                let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
                _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, needle)) as u32
            };
            while hits != 0 {
                f(base + hits.trailing_zeros() as usize);
                hits &= hits - 1;
            }
            base += 16;
        }
        for (i, &b) in chunks.remainder().iter().enumerate() {
            if b == a {
                f(base + i);
            }
        }
    }

    pub fn memchr_iter(a: u8, hay: &[u8]) -> impl Iterator<Item = usize> + '_ {
        let finder = one(a);
        let mut at = 0;
        std::iter::from_fn(move || {
            let i = at + finder.find(hay.get(at..)?)?;
            at = i + 1;
            Some(i)
        })
    }

    pub fn memchr2_iter(a: u8, b: u8, hay: &[u8]) -> impl Iterator<Item = usize> + '_ {
        let finder = two(a, b);
        let mut at = 0;
        std::iter::from_fn(move || {
            let i = at + finder.find(hay.get(at..)?)?;
            at = i + 1;
            Some(i)
        })
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
mod imp {
    pub use memchr::{memchr, memchr_iter, memchr2, memchr2_iter};

    pub fn memchr_count(a: u8, hay: &[u8]) -> usize {
        memchr_iter(a, hay).count()
    }

    pub fn for_each_position(a: u8, hay: &[u8], f: impl FnMut(usize)) {
        memchr_iter(a, hay).for_each(f)
    }
}

/// `text.split('\n')` by the byte search: a `char` pattern cost ~140
/// instructions a line, and an edited file is read line by line.
pub fn split_newlines(text: &str) -> impl Iterator<Item = &str> + '_ {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr(b'\n', r.as_bytes()) {
            Some(i) => {
                rest = Some(&r[i + 1..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

pub use imp::{for_each_position, memchr, memchr_count, memchr_iter, memchr2, memchr2_iter};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_the_crate_finds() {
        let texts: [&[u8]; 5] = [
            b"",
            b"$",
            b"no sigil here at all, just a long enough line of text",
            b"a $(x) and @(y) then ${z} and a $ alone at the end $",
            b"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@$",
        ];
        for t in texts {
            assert_eq!(memchr(b'$', t), memchr::memchr(b'$', t));
            assert_eq!(memchr2(b'$', b'@', t), memchr::memchr2(b'$', b'@', t));
            assert_eq!(memchr_count(b'$', t), memchr::memchr_iter(b'$', t).count());
            let text = std::str::from_utf8(t).expect("ASCII");
            for s in [text, "", "\n", "a\n", "\na\n\nb"] {
                assert_eq!(
                    split_newlines(s).collect::<Vec<_>>(),
                    s.split('\n').collect::<Vec<_>>()
                );
            }
            let mut seen = Vec::new();
            for_each_position(b'$', t, |i| seen.push(i));
            assert_eq!(seen, memchr::memchr_iter(b'$', t).collect::<Vec<_>>());
            assert_eq!(
                memchr_iter(b'$', t).collect::<Vec<_>>(),
                memchr::memchr_iter(b'$', t).collect::<Vec<_>>()
            );
            assert_eq!(
                memchr2_iter(b'$', b'@', t).collect::<Vec<_>>(),
                memchr::memchr2_iter(b'$', b'@', t).collect::<Vec<_>>()
            );
        }
    }
}
