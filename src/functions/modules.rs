//! `usemodule` runs a program from the work directory's `modules/` and
//! applies the module protocol to what it prints; `read_module_protocol`
//! applies the protocol to a file. The protocol itself is
//! `crate::eval::module_protocol`, shared with `commands` promises.

use super::args::Args;
use super::exec::{self, Shell};
use super::{FnResult, FnSpec, class_result, effect, spec};
use crate::eval::EvalContext;
use crate::eval::module_protocol;
use crate::host::exec::OutputSelect;
use crate::values::Value;
use crate::values::canon::canonify;

pub static FUNCTIONS: &[FnSpec] = &[
    effect("usemodule", 2, Some(2), false, usemodule),
    spec("read_module_protocol", 1, Some(1), read_module_protocol),
];

/// Applies a module's output and logs its other lines.
fn apply(ctx: &mut EvalContext, module: &str, scope: &str, text: &str) {
    let r = module_protocol::apply(ctx, scope, text, &mut super::data::read_data_file);
    for l in r.other_lines {
        crate::info!("M '{module}': {l}");
    }
}

fn modules_dir(ctx: &EvalContext) -> Option<std::path::PathBuf> {
    ctx.lookup("sys.workdir")
        .and_then(|v| v.as_scalar().map(std::path::PathBuf::from))
        .map(|w| w.join("modules"))
}

/// `usemodule(module, args)`: runs `<workdir>/modules/<module> args` (no
/// shell; the module must be owned by root or by us) and applies its
/// output, variables going into the scope named after the module.
fn usemodule(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("usemodule", a);
    let module = p.str(0, "module")?;
    let args = p.opt_str(1, "args")?.unwrap_or("");
    let Some(dir) = modules_dir(ctx) else {
        return Err(p.fail("the work directory is not known"));
    };
    let path = dir.join(module);
    use crate::host::plain::MetadataExt;
    let meta = ctx
        .host()
        .program_metadata(&path)
        .map_err(|_| p.fail(format!("plug-in module '{}' not found", path.display())))?;
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    if meta.uid() != 0 && meta.uid() != me {
        return Err(p.fail(format!(
            "module '{}' is not owned by root or by uid {me}",
            path.display()
        )));
    }
    let line = format!("\"{}\" {args}", path.display());
    let host = ctx.host();
    let words = exec::checked_words(host, &line).map_err(|e| p.fail(e))?;
    let f = exec::run_argv(
        host,
        words,
        Shell::No,
        OutputSelect::Both,
        exec::DEFAULT_TIMEOUT,
    )
    .map_err(|e| p.fail(e))?;
    let context = canonify(module);
    apply(ctx, module, &context, &f.output);
    Ok(class_result(true))
}

/// `read_module_protocol(file)`: applies the protocol lines of a file;
/// variables go into the scope named after the file's base name.
fn read_module_protocol(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("read_module_protocol", a);
    let path = p.str(0, "path")?;
    let text = ctx
        .host()
        .plain()
        .read(path)
        .map_err(|e| p.fail(format!("cannot read '{path}': {e}")))?;
    let text = String::from_utf8_lossy(&text);
    let base = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    apply(ctx, path, &canonify(&base), &text);
    Ok(class_result(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_speak_the_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("my-proto.txt");
        std::fs::write(&f, "=x=1\n+c1\n^context=other\n=y=2\n").unwrap();
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        let r = read_module_protocol(&mut c, &[Value::str(f.display().to_string())]);
        assert_eq!(r, Ok(class_result(true)));
        assert!(c.vars.get("default", "my_proto_txt", "x").is_some());
        assert!(c.vars.get("default", "other", "y").is_some());
        assert!(c.classes.is_defined("c1"));
        assert!(read_module_protocol(&mut c, &[Value::str("/nonexistent/x")]).is_err());
    }

    #[test]
    fn modules_need_a_work_directory() {
        let mut c = EvalContext::default().with_builtins(crate::functions::BUILTINS);
        assert!(usemodule(&mut c, &[Value::str("m")]).is_err());
    }
}
