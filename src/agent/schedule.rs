//! `body executor control` for a run a timer or cron starts
//! (`agent --scheduled`): we play cf-execd's part. The run goes ahead only
//! when one of the `schedule` classes holds (cf-execd's default: `Min00`,
//! `Min05`, ... `Min55`), after a delay of up to `splaytime` minutes that
//! is fixed for a host (a hash of its name, address and user, as cf-execd
//! derives it, so a fleet spreads and each host keeps its slot), and an
//! earlier run still going after `agent_expireafter` minutes (default 120)
//! is stopped first.

use std::time::Duration;

use crate::eval::EvalContext;
use crate::values::Value;

/// cf-execd's schedule when the policy names none: every five minutes.
pub const DEFAULT_SCHEDULE: [&str; 12] = [
    "Min00", "Min05", "Min10", "Min15", "Min20", "Min25", "Min30", "Min35", "Min40", "Min45",
    "Min50", "Min55",
];

/// cf-execd's `agent_expireafter` when the policy sets none, in minutes.
pub const DEFAULT_EXPIREAFTER_MINUTES: u64 = 120;

/// What the policy's executor control says of this run.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Class expressions; the run goes ahead when one holds.
    pub classes: Vec<String>,
    /// This host's delay before the run.
    pub splay: Duration,
    /// How long a run may go on before the next one stops it.
    pub expire_after: Duration,
}

impl Schedule {
    /// Reads `control_executor.*` (defined by pre-evaluation, guards
    /// applied) and the host's identity from `ctx`.
    pub fn of(ctx: &EvalContext) -> Schedule {
        let minutes = |name: &str| {
            ctx.lookup(&format!("control_executor.{name}"))
                .and_then(|v| v.as_scalar().map(str::to_string))
                .and_then(|s| crate::values::number::parse_int(&s).ok())
                .map(|n| n.max(0) as u64)
        };
        let classes = match ctx.lookup("control_executor.schedule") {
            Some(Value::List(l)) => l,
            Some(Value::Scalar(s)) => vec![s],
            _ => DEFAULT_SCHEDULE.iter().map(|s| s.to_string()).collect(),
        };
        let splaytime = minutes("splaytime").unwrap_or(0);
        let identity = format!(
            "{}+{}+{}",
            scalar(ctx, "sys.fqhost"),
            scalar(ctx, "sys.ipv4"),
            // SAFETY: getuid(2) cannot fail and touches no memory.
            unsafe { libc::getuid() }
        );
        let splay = (splaytime as f64 * 60.0 * splay_fraction(&identity)) as u64;
        let expire = minutes("agent_expireafter").unwrap_or(DEFAULT_EXPIREAFTER_MINUTES);
        Schedule {
            classes,
            splay: Duration::from_secs(splay),
            expire_after: Duration::from_secs(expire * 60),
        }
    }

    /// The first schedule class that holds now, if any.
    pub fn due(&self, ctx: &mut EvalContext) -> Option<String> {
        self.classes
            .iter()
            .find(|c| ctx.eval_class_expr(c.trim()).unwrap_or(false))
            .cloned()
    }
}

fn scalar(ctx: &EvalContext, name: &str) -> String {
    ctx.lookup(name)
        .and_then(|v| v.as_scalar().map(str::to_string))
        .unwrap_or_default()
}

/// A number in [0, 1) fixed for `identity` (`FQHOST+IPV4+UID`): its
/// one-at-a-time hash over the largest 32-bit value, as cf-execd spreads
/// hosts over `splaytime`.
pub fn splay_fraction(identity: &str) -> f64 {
    let h = crate::values::hash::oat_hash(identity).min(u32::MAX - 1);
    h as f64 / u32::MAX as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_keeps_its_slot_and_hosts_spread() {
        let a = splay_fraction("web1.example.com+10.0.0.1+0");
        assert_eq!(a, splay_fraction("web1.example.com+10.0.0.1+0"));
        assert!((0.0..1.0).contains(&a));
        let slots: std::collections::BTreeSet<u64> = (0..50)
            .map(|i| (splay_fraction(&format!("web{i}.example.com+10.0.0.{i}+0")) * 300.0) as u64)
            .collect();
        assert!(slots.len() > 40, "50 hosts share {} slots", slots.len());
    }

    #[test]
    fn the_fraction_is_the_one_at_a_time_hash_over_the_largest_u32() {
        let h = crate::values::hash::oat_hash("a+b+0");
        assert_eq!(splay_fraction("a+b+0"), h as f64 / u32::MAX as f64);
    }
}
