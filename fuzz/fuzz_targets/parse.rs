//! Fuzz target: any bytes, read as a policy file the way the loader reads
//! one (invalid UTF-8 replaced), must parse without panicking and keep the
//! parser's invariants (spans in bounds and on character boundaries,
//! diagnostics that render, a lossless `-p json` round trip).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let text = String::from_utf8_lossy(data);
        if let Err(e) = convergent::syntax::invariants::check(&text) {
            panic!("{e}");
        }
    });
}
