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

/// The set that goes with [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

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
