//! `services`: start, stop, restart, reload, enable and disable services,
//! through systemd when it runs and through init scripts otherwise. A
//! policy that defines its own `standard_services` bundle (or names a
//! `service_bundle`) is run instead, by the scheduler, as cf-agent does.

use super::{ActContext, Actuator, Applied};
use crate::report::change::Change;

use crate::eval::expanded::ExpandedPromise;

use crate::host::Host;
use crate::host::exec::CommandSpec;
use crate::report::Outcome;
use crate::values::Value;
use std::path::Path;
use std::time::Duration;

pub struct Services;

/// How long a service manager command may take.
const SERVICE_TIMEOUT: Duration = Duration::from_secs(120);

/// The service manager of this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    InitScripts,
}

pub fn manager(host: &Host) -> Manager {
    if host
        .lstat(Path::new("/run/systemd/system"))
        .ok()
        .flatten()
        .is_some()
    {
        Manager::Systemd
    } else {
        Manager::InitScripts
    }
}

fn run(host: &Host, argv: &[&str]) -> Result<i32, String> {
    let spec = CommandSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        timeout: Some(SERVICE_TIMEOUT),
        ..CommandSpec::default()
    };
    match host.run(&spec) {
        Ok(r) if r.timed_out => Err(format!("'{}' timed out", argv.join(" "))),
        Ok(r) => Ok(r.code.unwrap_or(-1)),
        Err(e) => Err(format!("could not run '{}': {e}", argv.join(" "))),
    }
}

/// The state of a service: running, and enabled at boot.
fn state(host: &Host, m: Manager, name: &str) -> Result<(bool, bool), String> {
    match m {
        Manager::Systemd => {
            let active = run(host, &["/bin/systemctl", "--quiet", "is-active", name])? == 0;
            let enabled = run(host, &["/bin/systemctl", "--quiet", "is-enabled", name])? == 0;
            Ok((active, enabled))
        }
        Manager::InitScripts => {
            let script = format!("/etc/init.d/{name}");
            if host.stat(Path::new(&script)).ok().flatten().is_none() {
                return Err(format!("no init script '{script}'"));
            }
            let running = run(host, &[&script, "status"])? == 0;
            let enabled = (2..=5).any(|level| {
                host.read_dir(Path::new(&format!("/etc/rc{level}.d")))
                    .unwrap_or_default()
                    .iter()
                    .any(|n| n.starts_with('S') && n.get(3..) == Some(name))
            });
            Ok((running, enabled))
        }
    }
}

/// The commands that take a service from its state to the promised one.
fn plan(m: Manager, name: &str, policy: &str, running: bool, enabled: bool) -> Vec<Vec<String>> {
    let script = format!("/etc/init.d/{name}");
    let svc = |action: &str| -> Vec<String> {
        match m {
            Manager::Systemd => vec!["/bin/systemctl".into(), action.into(), name.into()],
            Manager::InitScripts => vec![script.clone(), action.into()],
        }
    };
    let boot = |on: bool| -> Vec<String> {
        match m {
            Manager::Systemd => vec![
                "/bin/systemctl".into(),
                if on { "enable" } else { "disable" }.into(),
                name.into(),
            ],
            Manager::InitScripts => vec![
                "/usr/sbin/update-rc.d".into(),
                name.into(),
                if on { "defaults" } else { "disable" }.into(),
            ],
        }
    };
    let mut steps = Vec::new();
    match policy {
        "start" if !running => steps.push(svc("start")),
        "stop" if running => steps.push(svc("stop")),
        "restart" => steps.push(svc("restart")),
        "reload" => steps.push(svc(if running { "reload" } else { "start" })),
        "enable" => {
            if !enabled {
                steps.push(boot(true));
            }
            if !running {
                steps.push(svc("start"));
            }
        }
        "disable" => {
            if running {
                steps.push(svc("stop"));
            }
            if enabled {
                steps.push(boot(false));
            }
        }
        _ => {}
    }
    steps
}

impl Actuator for Services {
    fn speaks_each_pass(&self) -> bool {
        true
    }

    /// As cf-agent's ServicesSanityChecks: a service may not depend on
    /// itself (said in every pass; the promise has no outcome).
    fn sane(&self, p: &ExpandedPromise) -> bool {
        let itself = match p.value("service_dependencies") {
            Some(Value::List(l)) => l.contains(&p.promiser),
            Some(Value::Scalar(s)) => *s == p.promiser,
            _ => false,
        };
        if itself {
            crate::error!("Service promiser '{}' has itself as dependency", p.promiser);
            crate::error!("{}", p.reference());
            return false;
        }
        true
    }

    /// `service_type => "windows"` names Windows services, which cf-agent
    /// skips on other systems; any other type is a bundle's (the default).
    fn skipped(&self, p: &ExpandedPromise) -> bool {
        let windows = p
            .body("service_method")
            .and_then(|b| b.scalar("service_type"))
            == Some("windows");
        if windows {
            crate::info!("Service type windows not supported on this platform.");
        }
        windows
    }

    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let name = p.promiser.as_str();
        let policy = p.scalar("service_policy").unwrap_or("start");
        if !matches!(
            policy,
            "start" | "stop" | "restart" | "reload" | "enable" | "disable"
        ) {
            crate::error!("Service '{name}': unknown service_policy '{policy}'");
            return Outcome::Failed;
        }
        let m = manager(act.host);
        let (running, enabled) = match state(act.host, m, name) {
            Ok(s) => s,
            Err(e) => {
                crate::error!("Service '{name}': {e}");
                return Outcome::Failed;
            }
        };
        let steps = plan(m, name, policy, running, enabled);
        if steps.is_empty() {
            return Outcome::Kept;
        }
        let mut withheld = false;
        for s in steps {
            let shown = s.join(" ");
            let change = Change::new("run", name)
                .after(shown.clone())
                .done(format!("Executed '{shown}' for service '{name}'"))
                .should(format!(
                    "Should run '{shown}' for service '{name}', but only warning promised"
                ))
                .without_suffix();
            let argv: Vec<&str> = s.iter().map(String::as_str).collect();
            let made = act.change(change, |h| match run(h, &argv) {
                Ok(0) => Ok(()),
                Ok(code) => Err(format!("'{shown}' for service '{name}' returned {code}")),
                Err(e) => Err(format!("Service '{name}': {e}")),
            });
            match made {
                Applied::Made(()) => {}
                Applied::Withheld { .. } => withheld = true,
                Applied::Failed(e) => {
                    crate::error!("{e}");
                    return Outcome::Failed;
                }
            }
        }
        if withheld {
            return Outcome::Warned;
        }
        Outcome::Repaired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_only_what_differs() {
        assert!(plan(Manager::Systemd, "x", "start", true, true).is_empty());
        assert_eq!(
            plan(Manager::Systemd, "x", "start", false, true),
            vec![vec!["/bin/systemctl", "start", "x"]]
        );
        assert_eq!(
            plan(Manager::InitScripts, "x", "disable", true, true),
            vec![
                vec!["/etc/init.d/x", "stop"],
                vec!["/usr/sbin/update-rc.d", "x", "disable"]
            ]
        );
        assert_eq!(
            plan(Manager::InitScripts, "x", "restart", false, false).len(),
            1
        );
        assert!(plan(Manager::Systemd, "x", "stop", false, false).is_empty());
    }
}
