//! Small directed-graph algorithms over nodes numbered `0..n`, shared by
//! the property hierarchy (which orders groups) and the promise graph
//! (which checks `depends_on`). Graphs here have tens of nodes, so the
//! algorithms favour plain code over asymptotics.

use std::collections::VecDeque;

/// Adjacency lists: `adj[a]` holds every `b` with an edge `a → b`.
pub type Adjacency = Vec<Vec<usize>>;

/// `reach[a][b]` is true when a path of one or more edges leads from `a`
/// to `b`.
pub fn reachability(adj: &Adjacency) -> Vec<Vec<bool>> {
    let n = adj.len();
    let mut reach = vec![vec![false; n]; n];
    for (start, row) in reach.iter_mut().enumerate() {
        let mut stack: Vec<usize> = adj[start].clone();
        while let Some(v) = stack.pop() {
            if !row[v] {
                row[v] = true;
                stack.extend(&adj[v]);
            }
        }
    }
    reach
}

/// A topological order (Kahn's algorithm, smallest ready node first, so the
/// order is the same in every run), or `None` when the graph has a cycle.
pub fn topological_order(adj: &Adjacency) -> Option<Vec<usize>> {
    let n = adj.len();
    let mut indegree = vec![0usize; n];
    for targets in adj {
        for &t in targets {
            indegree[t] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for &t in &adj[v] {
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.insert(t);
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// The shortest cycle of the graph, as its nodes in path order (the edge
/// from the last back to the first closes it), or `None` when there is no
/// cycle. Among cycles of equal length, the one through the smallest node
/// wins, so the answer does not depend on hashing or timing.
pub fn shortest_cycle(adj: &Adjacency) -> Option<Vec<usize>> {
    let mut best: Option<Vec<usize>> = None;
    for start in 0..adj.len() {
        // Breadth-first from `start` finds the shortest way back to it.
        let mut prev: Vec<Option<usize>> = vec![None; adj.len()];
        let mut seen = vec![false; adj.len()];
        let mut queue = VecDeque::from([start]);
        seen[start] = true;
        let mut closing = None;
        'search: while let Some(v) = queue.pop_front() {
            for &t in &adj[v] {
                if t == start {
                    closing = Some(v);
                    break 'search;
                }
                if !seen[t] {
                    seen[t] = true;
                    prev[t] = Some(v);
                    queue.push_back(t);
                }
            }
        }
        let Some(mut v) = closing else { continue };
        let mut path = vec![v];
        while let Some(p) = prev[v] {
            path.push(p);
            v = p;
        }
        path.reverse();
        if best.as_ref().is_none_or(|b| path.len() < b.len()) {
            best = Some(path);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_reach() {
        // 0 → 1 → 2, 0 → 3
        let adj = vec![vec![1, 3], vec![2], vec![], vec![]];
        assert_eq!(topological_order(&adj), Some(vec![0, 1, 2, 3]));
        let r = reachability(&adj);
        assert!(r[0][2] && r[0][3] && !r[1][3] && !r[2][0] && !r[0][0]);
        assert_eq!(shortest_cycle(&adj), None);
    }

    #[test]
    fn shortest_cycle_is_found_once() {
        // A long cycle 0 → 1 → 2 → 3 → 0 and a short one 2 → 4 → 2.
        let adj = vec![vec![1], vec![2], vec![3, 4], vec![0], vec![2]];
        assert_eq!(topological_order(&adj), None);
        assert_eq!(shortest_cycle(&adj), Some(vec![2, 4]));
        // A self-loop is the shortest cycle of all.
        let adj = vec![vec![1], vec![0, 1]];
        assert_eq!(shortest_cycle(&adj), Some(vec![1]));
    }
}
