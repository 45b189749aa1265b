#!/usr/bin/env bash
# check_symbols.sh NM LIBRARY [ALLOWED_REGEX]
#
# Fails, listing them, if LIBRARY defines any global symbol whose name does not
# start with "ert_" (STYLE.md rule 6). A static library is linked into other
# people's firmware: any other global name (a helper someone forgot to make
# static, a table, a `main`) can collide with theirs at link time, which is how
# Darknet's `network`/`image` broke its users.
#
# Every defined global counts whatever its kind: text, data, bss, read-only,
# weak (W/V), common (C), unique (u) and ifunc (i) symbols. Undefined references
# are not ours to name. ALLOWED_REGEX (extended regex) whitelists names the
# compiler itself emits, and is only passed for sanitizer builds.
set -euo pipefail

nm_tool=$1 lib=$2 allowed=${3:-}
[[ -f "$lib" ]] || { echo "check_symbols: $lib not found" >&2; exit 1; }

# POSIX format, one line per symbol, each prefixed with "archive[member]: ",
# e.g. "libedgert.a[context.c.o]: ert_version T 0 8". nm's exit status is
# kept (pipefail is not enough across $(...), so no pipe here).
out=$("$nm_tool" -A -g --defined-only -P "$lib")

total=0 bad=()
while IFS= read -r line; do
    [[ -n "$line" ]] || continue
    member=${line%%]: *}; member=${member##*[}
    read -r name type _ <<<"${line#*]: }"
    total=$((total + 1))
    [[ "$name" == ert_* ]] && continue
    [[ -n "$allowed" && "$name" =~ $allowed ]] && continue
    bad+=("  $member: $name ($type)")
done <<<"$out"

if [[ $total -eq 0 ]]; then
    echo "check_symbols: no defined global symbols found in $lib (wrong nm for this architecture?)" >&2
    exit 1
fi
if [[ ${#bad[@]} -gt 0 ]]; then
    echo "check_symbols: ${#bad[@]} global symbol(s) in $(basename "$lib") without the ert_ prefix" \
         "(make them static, or rename them ert_*):" >&2
    printf '%s\n' "${bad[@]}" >&2
    exit 1
fi
echo "check_symbols: ok: all $total defined global symbols in $(basename "$lib") start with ert_"
