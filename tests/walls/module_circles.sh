#!/bin/sh
# module_circles.sh [ROOT]: no include circle between modules (issue #33).
#
# A module is a top-level product folder (the same folders as file_map.sh
# checks); module A uses module B when a source file of A includes a header
# spelled "B/..." (B's public header, or - grid/ on ops/ - a header B stages
# for it), and the public C API's "lattice/..." counts as the module
# include/.  Plain-name includes stay inside the folder and <...> ones are
# the system's.  The modules' uses must form no circle, of any length:
# dependencies point one way (docs/ARCHITECTURE.md, "Modules").
#
# Fails, naming each circle and the files whose includes close it.  Needs
# only sh, find, grep, awk and sort: no build, no git.
set -eu

NOT_PRODUCT='bench docs examples packaging scripts tests tmp run'

root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LC_ALL=C

# The modules, one name a line.
: >"$work/modules"
for dir in "$root"/*/; do
    name=$(basename "$dir")
    case " $NOT_PRODUCT " in *" $name "*) continue ;; esac
    case "$name" in build*) continue ;; esac
    echo "$name" >>"$work/modules"
done

# Every use as "FROM TO FILE" (FILE: the including file, ROOT-relative).
: >"$work/uses"
while read -r m; do
    (cd "$root" && find "$m" \( -type d \( -name 'build*' -o -name CMakeFiles -o -name '.*' \) -prune \) -o \
        -type f \( -name '*.c' -o -name '*.h' \) -print) |
    while read -r f; do
        grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"/]*/' "$root/$f" 2>/dev/null |
            sed 's/^[^"]*"\([^"/]*\)\/.*/\1/' | sort -u |
            while read -r to; do
                [ "$to" = lattice ] && to=include
                [ "$to" = "$m" ] && continue
                grep -qx "$to" "$work/modules" && echo "$m $to $f"
            done
    done
done <"$work/modules" >"$work/uses"

# The circles: a depth-first search over the module graph; every back edge
# closes one.  Each is printed once, from its smallest module name.
awk '
    { if (!(($1 SUBSEP $2) in files)) { adj[$1] = adj[$1] " " $2 }; files[$1 SUBSEP $2] = files[$1 SUBSEP $2] " " $3; node[$1]; node[$2] }
    function visit(u,    n, i, vs, v, k, c, j, min, key) {
        state[u] = 1; stack[++depth] = u
        n = split(adj[u], vs, " ")
        for (i = 1; i <= n; i++) {
            v = vs[i]
            if (state[v] == 1) {
                for (k = depth; stack[k] != v; k--) ;
                min = k
                for (j = k; j <= depth; j++) if (stack[j] < stack[min]) min = j
                key = ""
                for (j = min; j <= depth; j++) key = key stack[j] " -> "
                for (j = k; j < min; j++) key = key stack[j] " -> "
                key = key stack[min]
                if (!(key in seen)) {
                    seen[key] = 1; bad = 1
                    printf "module_circles: a circle: %s\n", key
                    for (j = k; j <= depth; j++) {
                        c = (j < depth) ? stack[j + 1] : v
                        printf "  %s -> %s:%s\n", stack[j], c, files[stack[j] SUBSEP c]
                    }
                }
            } else if (!state[v]) visit(v)
        }
        depth--; state[u] = 2
    }
    END {
        for (u in node) if (!state[u]) visit(u)
        if (bad) exit 1
        n = 0; for (u in node) n++
        printf "module_circles: %d modules, %d includes from one into another, no circle\n", n, NR
    }
' "$work/uses"
