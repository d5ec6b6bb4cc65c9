//! The integration tests, as one test binary (one link instead of one per
//! file). Each module is one former `tests/*.rs` binary; `common` holds the
//! helpers they share. Run one module with `cargo test --test it MODULE::`
//! (or any substring of the test names).

mod common;

mod acl;
mod actuators;
mod actuators_differential;
mod agent_control;
mod agent_differential;
mod architecture;
mod atomic_edit_kill;
mod attribute_support;
mod augments_differential;
mod bounded_reads;
mod bundlesequence_differential;
mod corpus;
mod custom_agent;
mod custom_differential;
mod depth_search_differential;
mod discovery_differential;
mod dropin_flags;
mod edit_body_args;
mod examples;
mod files_differential;
mod fleet;
mod fs_outside_host;
mod function_coverage;
mod function_failures_differential;
mod functions_differential;
mod functions_no_panic;
mod graph_why;
mod hostile_input;
mod install;
mod json_events;
mod logging;
mod mpf_differential;
mod newer;
mod observe;
mod os_fixtures_differential;
mod packages;
mod policy_output_differential;
mod properties;
mod proptest_parse;
mod remote;
mod safe_access;
mod sandbox;
mod schedule;
mod snapshots;
mod state;
mod stdlib;
mod stdlib_harness;
mod storage;
mod transactions;
mod validate_differential;
mod vendored_modules;
mod verbose_trace;
mod writable_policy;
