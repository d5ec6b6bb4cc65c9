#!/usr/bin/env bash
# Fuzzes one target with AFL++ through cargo-afl, on the stable toolchain.
#   fuzz/run.sh TARGET [SECONDS]     TARGET: parse or eval; SECONDS default 1200
# Needs `cargo install cargo-afl` (see fuzz/README.md).
#
# Seeds: the kept corpus fuzz/corpus/TARGET/, and the test policies (parse:
# tests/corpus/**; eval: tests/corpus/valid and tests/differential/**).
# Findings land in fuzz/artifacts/TARGET/default/{crashes,hangs}/ (an
# earlier run's that found something is moved aside, dated). At the
# end the queue is minimized (afl-cmin) into fuzz/corpus/TARGET/, without
# files over 10 KB, for the next run to start from; commit it.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh parse|eval [SECONDS]}
secs=${2:-1200}
case "$target" in
    parse)
        seed_globs=(../tests/corpus/valid ../tests/corpus/invalid ../tests/corpus/needs-validation)
        # The parser is fast: AFL's default hang timeout (1 s) is plenty.
        timeout=1000
        ;;
    eval)
        seed_globs=(../tests/corpus/valid ../tests/differential)
        # Each input has a 200 ms evaluation budget (fuzz_targets/eval.rs):
        # what runs past 2 s ran long between two looks at the deadline.
        timeout=2000
        ;;
    *)
        echo "unknown target '$target' (parse or eval)" >&2
        exit 2
        ;;
esac
# No input may take more than this much memory (MB): a policy that makes
# huge lists is a finding, not a reason to starve the machine.
mem=4096
max_kept=10240

cargo afl build --release --bin "$target"
bin=target/release/$target
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The eval target's sandbox (rooted host, work directory) lives here.
export CONVERGENT_FUZZ_DIR=$work/sandbox
mkdir -p "$work/seeds"
n=0
while IFS= read -r -d '' f; do
    n=$((n + 1))
    cp "$f" "$work/seeds/$n-$(basename "$f")"
done < <(find "${seed_globs[@]}" -name '*.cf' -size -$((max_kept / 1024 + 1))k -print0)
if [ -d "corpus/$target" ]; then
    cp corpus/"$target"/* "$work/seeds/" 2>/dev/null || true
fi
echo "seeds: $(ls "$work/seeds" | wc -l)"

# Containers often pipe core dumps elsewhere and pin CPU frequency; neither
# matters for finding panics.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
out=artifacts/$target
# A previous run's directory: kept aside if it found something, else gone.
if [ -d "$out" ]; then
    if [ -n "$(find "$out"/default/crashes "$out"/default/hangs -type f ! -name README.txt 2>/dev/null)" ]; then
        mv "$out" "$out.$(date +%Y%m%d-%H%M%S)"
    else
        rm -rf "$out"
    fi
fi
mkdir -p artifacts
cargo afl fuzz -V "$secs" -t "$timeout" -m "$mem" -x cf.dict -i "$work/seeds" -o "$out" "$bin"

stats=$out/default/fuzzer_stats
if [ -f "$stats" ]; then
    grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|stability) ' "$stats"
fi
echo "crashes: $(find "$out/default/crashes" -type f ! -name README.txt | wc -l)"
echo "hangs:   $(find "$out/default/hangs" -type f | wc -l)"

# Keep the corpus: the smallest set of the queue with the same coverage.
mkdir -p "$work/queue"
find "$out/default/queue" -maxdepth 1 -type f -size -$((max_kept + 1))c -exec cp {} "$work/queue/" \;
# AFL++'s Python afl-cmin (what `cargo afl cmin` runs) found no coverage at
# all in the parse target's queue; its shell version, beside it, works.
afl_bin=$(dirname "$(find "${XDG_DATA_HOME:-$HOME/.local/share}/afl.rs" -path '*/afl/bin/afl-cmin.bash' | sort | tail -1)")
if PATH=$afl_bin:$PATH AFL_PATH=$afl_bin "$afl_bin/afl-cmin.bash" -t "$timeout" -m "$mem" \
    -i "$work/queue" -o "$work/min" -- "$bin" >"$work/cmin.log" 2>&1 &&
    [ -n "$(ls -A "$work/min" 2>/dev/null)" ]; then
    rm -rf "corpus/$target"
    mkdir -p "corpus/$target"
    i=0
    for f in "$work"/min/*; do
        i=$((i + 1))
        cp "$f" "corpus/$target/$(printf '%05d' "$i")"
    done
    echo "corpus:  $i files in fuzz/corpus/$target ($(du -sh "corpus/$target" | cut -f1))"
else
    echo "afl-cmin failed; corpus/$target left as it was (log below)" >&2
    tail -20 "$work/cmin.log" >&2
fi
