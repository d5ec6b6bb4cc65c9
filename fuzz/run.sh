#!/usr/bin/env bash
# Fuzzes the parser with AFL++ through cargo-afl, on the stable toolchain.
#   fuzz/run.sh [SECONDS]     (default 1200; needs `cargo install cargo-afl`)
# Seeds are the policies of tests/corpus; findings land in fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-1200}
cargo afl build --release
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
cp ../tests/corpus/valid/*.cf ../tests/corpus/invalid/*.cf ../tests/corpus/needs-validation/*.cf "$seeds"/
# Containers often pipe core dumps elsewhere and pin CPU frequency; neither
# matters for finding panics.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
cargo afl fuzz -V "$secs" -x cf.dict -i "$seeds" -o artifacts target/release/parse
echo "crashes: $(find artifacts/default/crashes -type f ! -name README.txt | wc -l)"
echo "hangs:   $(find artifacts/default/hangs -type f | wc -l)"
