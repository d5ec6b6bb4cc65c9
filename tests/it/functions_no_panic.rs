//! No built-in function panics, whatever its arguments: every function of
//! the registry is called with many combinations of awkward values (empty,
//! negative, huge, invalid regular expressions, unicode, paths that do not
//! exist, lists and data where strings are expected). A call may fail;
//! it must not panic.
//!
//! Functions that run commands, touch the network or walk large trees are
//! left out: their inputs are checked by their own tests.

use convergent::eval::{EvalContext, Frame};
use convergent::functions;
use convergent::values::Value;

/// Functions whose calls would run commands, resolve names over the
/// network, connect to ports or read the whole of /proc/sys.
const LEFT_OUT: &[&str] = &[
    "execresult",
    "execresult_as_data",
    "returnszero",
    "usemodule",
    "readtcp",
    "url_get",
    "host2ip",
    "ip2host",
    "data_sysctlvalues",
    "findprocesses",
    "processexists",
];

fn values() -> Vec<Value> {
    let scalars = [
        "",
        "0",
        "-1",
        "1",
        "99999999999",
        "-99999999999",
        "(",
        "[a-",
        ".*",
        "/",
        "/nonexistent/x",
        "/tmp",
        "ü/é",
        "a,b",
        "{",
        "[1,2]",
        "{\"a\":1}",
        "x.y",
        "ns:x",
        "127.0.0.1",
        "10.0.0.1-300",
        "::1/200",
        "1-10",
        "3.21.x",
        "%Y%%%",
        "noshell",
        "md5",
        "true",
        "gmtime",
        "daily",
        "size",
        "linktarget",
        "lastseen",
        "\u{0}",
    ];
    let mut v: Vec<Value> = scalars.iter().map(|s| Value::str(*s)).collect();
    v.push(Value::List(vec![]));
    v.push(Value::List(vec!["/nonexistent".into(), "".into()]));
    v.push(Value::data(serde_json::json!({"k": [1, {"x": null}]})));
    v.push(Value::data(serde_json::json!("scalar")));
    v
}

/// A small deterministic generator, so a failure can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

#[test]
fn no_function_panics_on_awkward_arguments() {
    let vals = values();
    let mut rng = Lcg(7);
    for name in functions::implemented() {
        if LEFT_OUT.contains(&name) {
            continue;
        }
        let spec = functions::lookup(name).expect("registered");
        let max = spec.max_args.unwrap_or(spec.min_args + 3).min(7);
        for n in spec.min_args..=max {
            for _ in 0..60 {
                let args: Vec<Value> = (0..n).map(|_| vals[rng.next(vals.len())].clone()).collect();
                let mut ctx = EvalContext::default().with_builtins(convergent::functions::BUILTINS);
                ctx.push_frame(Frame::new("default", "test", "agent"));
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let _ = (spec.imp)(&mut ctx, &args);
                }));
                assert!(result.is_ok(), "{name} panicked with arguments {args:?}");
            }
        }
    }
}
