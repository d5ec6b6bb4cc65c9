//! String hashes CFEngine spreads names with.

/// Bob Jenkins' one-at-a-time hash, cf-agent's string hash.
pub fn oat_hash(s: &str) -> u32 {
    oat_finish(oat_mix(0, s.as_bytes()))
}

/// The one-at-a-time hash's inner loop over `bytes`, from `h`.
fn oat_mix(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h = h.wrapping_add(b as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h
}

fn oat_finish(mut h: u32) -> u32 {
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// cf-agent's hash of a qualified variable reference `ns:scope.lval[i]...`:
/// the one-at-a-time hash run over the namespace, the scope, the name and,
/// for each index, `]` and the index. Its variable table is a hash table
/// keyed so, and whatever walks that table (the indices of a classic
/// array, `getvalues`) sees the variables in the order of their buckets.
pub fn var_ref_hash(ns: &str, scope: &str, lval: &str, indices: &[&str]) -> u32 {
    let mut h = oat_mix(0, ns.as_bytes());
    h = oat_mix(h, scope.as_bytes());
    h = oat_mix(h, lval.as_bytes());
    for i in indices {
        h = oat_mix(h, b"]");
        h = oat_mix(h, i.as_bytes());
    }
    oat_finish(h)
}

/// How many buckets cf-agent's variable table has once it holds `count`
/// variables: 128 to start with, doubled whenever the load passes three
/// quarters. A variable's bucket is its `var_ref_hash` masked by this less
/// one.
pub fn var_table_buckets(count: usize) -> u32 {
    let mut size: u32 = 128;
    while count > (size as usize) * 3 / 4 && size < (1 << 30) {
        size <<= 1;
    }
    size
}

/// The hash maps of the evaluation's hot paths (variables, classes, the
/// regex and expression caches): foldhash hashes short keys several times
/// faster than the standard library's SipHash and is still seeded per
/// process, so keys read from data files cannot be chosen to collide.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A variable as cf-agent's table walk meets it: its `var_ref_hash`, its
/// number in the order the variables came into the table, and how many
/// variables the table held once it was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    pub hash: u32,
    pub seq: u64,
    pub load: usize,
}

/// The order in which a walk over cf-agent's variable table, holding
/// `count` variables, meets two of them. Buckets come in order. A bucket
/// is a list that each new variable joins at its head, and that each
/// doubling of the table (past three quarters full) walks from its head
/// to build the new bucket by pushing at the head again, which reverses
/// the list; two variables in one bucket now were in one bucket at every
/// size. So of two variables in a bucket, the newer is first unless an
/// odd number of doublings has come since it arrived.
pub fn table_order(a: &TableEntry, b: &TableEntry, count: usize) -> std::cmp::Ordering {
    let mask = var_table_buckets(count) - 1;
    let (ba, bb) = (a.hash & mask, b.hash & mask);
    if ba != bb {
        return ba.cmp(&bb);
    }
    if a.seq == b.seq {
        return std::cmp::Ordering::Equal;
    }
    let newer = if a.seq < b.seq { b } else { a };
    // The doublings since `newer` arrived: the table's size now against
    // its size just before.
    let doublings = var_table_buckets(count).trailing_zeros()
        - var_table_buckets(newer.load.saturating_sub(1)).trailing_zeros();
    let newer_first = doublings.is_multiple_of(2);
    if (a.seq > b.seq) == newer_first {
        std::cmp::Ordering::Less
    } else {
        std::cmp::Ordering::Greater
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_namespace_prefix_is_cf_agents_constant() {
        // cf-agent hashes a reference without namespace from this value.
        assert_eq!(oat_mix(0, b"default"), 1195645448);
    }

    #[test]
    fn buckets_double_past_three_quarters() {
        assert_eq!(var_table_buckets(0), 128);
        assert_eq!(var_table_buckets(96), 128);
        assert_eq!(var_table_buckets(97), 256);
        assert_eq!(var_table_buckets(282), 512);
        assert_eq!(var_table_buckets(385), 1024);
    }

    /// Runs cf-agent's table: insertion at a bucket's head, doubling past
    /// three quarters, walking each old bucket from its head onto the new
    /// buckets' heads; gives the walk's order of the hashes.
    fn simulate(hashes: &[u32]) -> Vec<u32> {
        let mut size = 128usize;
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); size];
        for (n, &h) in hashes.iter().enumerate() {
            buckets[h as usize & (size - 1)].insert(0, h);
            if n + 1 > size * 3 / 4 {
                let old = std::mem::replace(&mut buckets, vec![Vec::new(); size * 2]);
                size *= 2;
                for list in old {
                    for h in list {
                        buckets[h as usize & (size - 1)].insert(0, h);
                    }
                }
            }
        }
        buckets.into_iter().flatten().collect()
    }

    #[test]
    fn table_order_is_the_walk_of_the_table() {
        // Hashes that crowd few buckets, over several doublings.
        for n in [20usize, 97, 150, 193, 400, 800] {
            let hashes: Vec<u32> = (0..n as u32)
                .map(|i| oat_hash(&format!("k{i}")) & 0x0f0f_0f0f | (i % 3) << 20)
                .collect();
            let mut entries: Vec<TableEntry> = hashes
                .iter()
                .enumerate()
                .map(|(i, &hash)| TableEntry {
                    hash,
                    seq: i as u64,
                    load: i + 1,
                })
                .collect();
            entries.sort_by(|a, b| table_order(a, b, n));
            let ours: Vec<u32> = entries.iter().map(|e| e.hash).collect();
            assert_eq!(ours, simulate(&hashes), "{n} variables");
        }
    }

    #[test]
    fn bucket_order_is_cf_agents() {
        // cf-agent 3.21 with 100 variables lists getindices("user") of
        // main's user[name], user[fullname][first|last], user[dirs] as
        // name, fullname, dirs.
        let mask = var_table_buckets(100) - 1;
        let key = |i: &[&str]| var_ref_hash("default", "main", "user", i) & mask;
        let mut idx = [vec!["dirs"], vec!["fullname", "first"], vec!["name"]];
        idx.sort_by_key(|i| key(i));
        assert_eq!(idx.map(|i| i[0]), ["name", "fullname", "dirs"]);
    }
}
