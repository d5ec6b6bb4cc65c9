//! cf-agent's verbose banner of a promise it is about to act on (its
//! `PromiseBanner`), in its words: the scheduler shows it for the promises
//! of the bundles it runs, the evaluator for the variables and classes of
//! an edit bundle, which cf-agent shows as promises too.

/// What a banner says of one promise iteration.
pub struct Banner<'a> {
    /// Its handle canonified, or cf-agent's `promise_<file>_<line>`.
    pub id: &'a str,
    pub promise_type: &'a str,
    /// The promiser, expanded.
    pub promiser: &'a str,
    pub bundle: &'a str,
    /// The arguments of the bundle, as a bundle's banner writes them.
    pub bundle_args: Option<&'a str>,
    /// The class guard the promise is written under.
    pub guard: &'a str,
    /// Its `if`/`ifvarclass` or `unless`, expanded, with which it is.
    pub condition: Option<(&'static str, String)>,
    /// The stack path down to the promise's bundle.
    pub stack: &'a str,
    pub iteration: usize,
    pub comment: Option<&'a str>,
    pub pass: usize,
}

/// Prints the banner (the caller has checked that -v is on).
pub fn promise_begin(b: &Banner) {
    crate::debug!("P: .........................................................");
    crate::debug!(
        "P: BEGIN promise '{}' of type \"{}\" (pass {})",
        b.id,
        b.promise_type,
        b.pass
    );
    let promiser = stack_promiser(b.promiser);
    // The banner keeps at most 40 bytes of it.
    let mut cut = promiser.len().min(40);
    while !promiser.is_char_boundary(cut) {
        cut -= 1;
    }
    crate::debug!("P:    Promiser/affected object: '{}'", &promiser[..cut]);
    match b.bundle_args {
        Some(a) => crate::debug!("P:    From parameterized bundle: {}({a})", b.bundle),
        None => crate::debug!("P:    Part of bundle: {}", b.bundle),
    }
    crate::debug!("P:    Base context class: {}", b.guard);
    if let Some((word, c)) = &b.condition {
        crate::debug!("P:    \"{word}\" class condition: {c}");
    }
    crate::debug!(
        "P:    Stack path: {}/{}/'{}'[{}]",
        b.stack,
        b.promise_type,
        promiser,
        b.iteration
    );
    if let Some(c) = b.comment {
        crate::debug!("P:");
        crate::debug!("P:    Comment:  {c}");
    }
}

/// A promiser as cf-agent writes it in a banner and a stack path:
/// abbreviated, with the characters it mangles names with (`#` and `*`)
/// shown as `.` and `:` wherever they are.
pub fn stack_promiser(promiser: &str) -> String {
    abbreviated(promiser).replace('#', ".").replace('*', ":")
}

/// A promiser of several lines, as cf-agent shows it: its first and last
/// few characters around `...`.
fn abbreviated(promiser: &str) -> String {
    const N: usize = 19;
    let Some(nl) = promiser.find('\n') else {
        return promiser.to_string();
    };
    let head: String = promiser[..nl].chars().take(N).collect();
    let last = promiser.rsplit('\n').next().unwrap_or("");
    let count = last.chars().count();
    let tail: String = last.chars().skip(count.saturating_sub(N)).collect();
    format!("{head}...{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangled_characters_and_lines_are_shown_as_cf_agent_shows_them() {
        assert_eq!(stack_promiser("b*#c"), "b:.c");
        assert_eq!(
            stack_promiser("first line of it all\nmiddle\nthe last line of the text"),
            "first line of it al...st line of the text"
        );
    }
}
