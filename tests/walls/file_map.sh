#!/bin/sh
# file_map.sh [ROOT]: docs/ARCHITECTURE.md's "File map" names every product
# source file of the tree, once, and nothing else (issue #33).
#
# Product source: every .c, .h and .proto file under a top-level folder of the
# repository that is not one of NOT_PRODUCT (nor a build folder, nor hidden),
# so a new module folder is checked from its first file on.  The map: in the
# section "## File map", each "### `DIR/`" heading starts a folder's table, and
# each table row's first cell starts with the file's name in backticks
# ("| `gate.c` | ..."), which the heading's folder prefixes.
#
# Fails, naming each file, when a source file has no row, when a row names no
# source file (a file removed or renamed, a typo, a non-source file), or when
# a file has two rows.  Needs only sh, find, awk, sort and comm: no build, no
# git (a tarball of the tree checks the same).
set -eu

NOT_PRODUCT='bench docs examples packaging scripts tests tmp run'

root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
doc="$root/docs/ARCHITECTURE.md"
[ -f "$doc" ] || { echo "file_map: $doc not found" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LC_ALL=C

# The tree's product sources, as ROOT-relative paths.
: >"$work/tree"
for dir in "$root"/*/; do
    name=$(basename "$dir")
    case " $NOT_PRODUCT " in *" $name "*) continue ;; esac
    case "$name" in build*) continue ;; esac
    (cd "$root" && find "$name" \( -type d \( -name 'build*' -o -name CMakeFiles -o -name '.*' \) -prune \) -o \
        -type f \( -name '*.c' -o -name '*.h' -o -name '*.proto' \) -print) >>"$work/tree"
done
sort -o "$work/tree" "$work/tree"

# The map's rows, as ROOT-relative paths.
awk -v doc="$doc" '
    /^## / { inmap = ($0 ~ /^## File map[[:space:]]*$/); if (inmap) seen = 1; next }
    !inmap { next }
    /^### / {
        d = $0
        if (sub(/^### *`/, "", d) && sub(/`.*/, "", d)) {
            if (d !~ /\/$/) d = d "/"
            dir = d
        } else {
            dir = ""
        }
        next
    }
    /^\| *`/ {
        f = $0
        sub(/^\| *`/, "", f)
        sub(/`.*/, "", f)
        if (dir == "") {
            printf "file_map: %s:%d: a row outside a \"### `DIR/`\" table: %s\n", doc, NR, f > "/dev/stderr"
            bad = 1
            next
        }
        print dir f
    }
    END {
        if (!seen) { printf "file_map: %s has no \"## File map\" section\n", doc > "/dev/stderr"; exit 2 }
        if (bad) exit 1
    }
' "$doc" >"$work/rows" || exit $?
sort "$work/rows" >"$work/map"
sort -u "$work/rows" >"$work/named"

status=0
comm -23 "$work/tree" "$work/named" >"$work/missing"
comm -13 "$work/tree" "$work/named" >"$work/extra"
uniq -d "$work/map" >"$work/twice"
if [ -s "$work/missing" ]; then
    echo "file_map: source files with no row in docs/ARCHITECTURE.md, \"File map\":"
    sed 's/^/  /' "$work/missing"
    status=1
fi
if [ -s "$work/extra" ]; then
    echo "file_map: rows of docs/ARCHITECTURE.md, \"File map\", that name no product source file:"
    sed 's/^/  /' "$work/extra"
    status=1
fi
if [ -s "$work/twice" ]; then
    echo "file_map: files with more than one row in docs/ARCHITECTURE.md, \"File map\":"
    sed 's/^/  /' "$work/twice"
    status=1
fi
[ $status -eq 0 ] && echo "file_map: $(wc -l <"$work/tree") source files, each with one row"
exit $status
