#!/usr/bin/env bash
# Install and packages: `cmake --install` into a fresh prefix puts every file
# of the documented layout in place; liblattice.so exports exactly the public
# API's functions under a versioned SONAME; examples/hello_client.c builds
# against the prefix with pkg-config alone and runs against a grid of the
# installed latticed; the man pages render; `cpack -G DEB` makes a .deb whose
# dependencies this Debian satisfies (dpkg --dry-run) and whose latticed runs.
# Usage: it_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
t=$(mktemp -d /tmp/lattice-it-install-XXXXXX)
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ $rc -ne 0 ]; then
    echo "it_install: FAILED (kept $t)" >&2
    for l in "$t"/*.log; do [ -f "$l" ] && { echo "---- $l" >&2; tail -20 "$l" >&2; }; done
  else
    rm -rf "$t"
  fi
}
trap cleanup EXIT
fail() { echo "it_install: $*" >&2; exit 1; }

prefix=$t/prefix
cmake --install "$build" --prefix "$prefix" >"$t/install.log"
for f in bin/latticed bin/lattice include/lattice/lattice.h include/lattice/ops.h include/lattice/metrics.h \
         share/man/man1/latticed.1 share/man/man1/lattice.1 lib/systemd/system/latticed.service \
         etc/lattice/latticed.conf; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
pc=$(find "$prefix" -name lattice.pc)
[ -n "$pc" ] || fail "no lattice.pc installed"
libdir=$(dirname "$(dirname "$pc")")
so=$(readlink -f "$libdir/liblattice.so")
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
[ "$soname" = liblattice.so.0 ] || fail "SONAME is '$soname', want liblattice.so.0"
[ -e "$libdir/$soname" ] || fail "no $soname link next to $so"

# Every function the public headers declare is exported, and nothing else
# of ours: no module internals (lattice_ops_*, lattice_discovery_*, ...).
want=$(grep -o '[a-z_0-9]*;' "$build/liblattice.map" | tr -d ';' | grep -v '^$' | sort -u)
have=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | grep -E '^(lattice|lt)_' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
extra=$(comm -13 <(echo "$want") <(echo "$have"))
[ -z "$missing" ] || fail "liblattice.so does not export: $missing"
[ -z "$extra" ] || fail "liblattice.so exports internals: $extra"
[ "$(echo "$want" | wc -l)" -gt 50 ] || fail "the export list is suspiciously short"

# The man pages render.
for m in latticed lattice; do
  groff -man -Tascii -P-cbou -ww "$prefix/share/man/man1/$m.1" 2>"$t/$m.man.err" | grep -q "^NAME" || fail "$m.1 does not render"
  [ ! -s "$t/$m.man.err" ] || fail "$m.1: $(cat "$t/$m.man.err")"
done
# The unit starts the installed latticed on the installed config, which parses.
grep -q "^ExecStart=$prefix/bin/latticed --config $prefix/etc/lattice/latticed.conf\$" \
  "$prefix/lib/systemd/system/latticed.service" || fail "latticed.service: $(grep ExecStart "$prefix/lib/systemd/system/latticed.service")"
"$prefix/bin/latticed" --config "$prefix/etc/lattice/latticed.conf" --help >/dev/null \
  || fail "the example config does not parse"

# hello_client from the prefix, with pkg-config alone.
export PKG_CONFIG_PATH=$(dirname "$pc")
cc -Wall -Wextra -Werror -o "$t/hello_client" "$src/examples/hello_client.c" $(pkg-config --cflags --libs lattice) \
  || fail "hello_client does not build with pkg-config --cflags --libs lattice"

free_base() { # N consecutive free TCP ports below the ephemeral range
  local n=$1 b i ok
  for _ in $(seq 200); do
    b=$((20000 + RANDOM % 12000)); ok=1
    for i in $(seq 0 $((n - 1))); do
      ss -Htan "( sport = :$((b + i)) )" | grep -q . && { ok=0; break; }
    done
    [ $ok = 1 ] && { echo $b; return; }
  done
  fail "no free ports"
}
base=$(free_base 2)
finder=127.0.0.1:$base..$((base + 1))
for i in 0 1; do
  "$prefix/bin/latticed" --port $((base + i)) --port-range 1 --ip-finder "$finder" --cluster it-install \
    --failure-detection-ms 1000 >"$t/node$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 300); do
  [ "$(grep -l ' ready: ' "$t"/node*.log 2>/dev/null | wc -l)" = 2 ] && break
  sleep 0.1
done
[ "$(grep -l ' ready: ' "$t"/node*.log | wc -l)" = 2 ] || fail "the installed latticed did not form a grid"
out=$(LD_LIBRARY_PATH=$libdir "$t/hello_client" "$finder" it-install) || fail "hello_client failed: $out"
echo "$out" | grep -qx "hello = world" || fail "hello_client printed: $out"
echo "$out" | grep -qx "servers: 2" || fail "hello_client printed: $out"
# A wrong cluster name is a clear failure, exit 1.
if LD_LIBRARY_PATH=$libdir "$t/hello_client" "$finder" nosuch >"$t/wrong.out" 2>&1; then fail "hello_client joined cluster nosuch"; fi

# The .deb.
(cd "$build" && cpack -G DEB >"$t/cpack.log" 2>&1) || fail "cpack -G DEB failed: $(tail -5 "$t/cpack.log")"
deb=$(ls "$build"/package/lattice_*.deb)
dpkg-deb -c "$deb" >"$t/deb.list"
for f in ./usr/bin/latticed ./usr/bin/lattice ./usr/lib/liblattice.so.0 ./usr/lib/pkgconfig/lattice.pc \
         ./usr/include/lattice/lattice.h ./usr/share/man/man1/latticed.1 ./usr/lib/systemd/system/latticed.service \
         ./etc/lattice/latticed.conf; do
  grep -q " $f\( \|$\)" "$t/deb.list" || fail "the .deb lacks $f"
done
dpkg-deb -f "$deb" Depends | grep -q libzmq5 || fail "the .deb does not depend on libzmq5: $(dpkg-deb -f "$deb" Depends)"
dpkg --dry-run -i "$deb" >"$t/dpkg.log" 2>&1 || fail "dpkg would not install the .deb: $(tail -5 "$t/dpkg.log")"
dpkg-deb -x "$deb" "$t/root"
grep -q "^ExecStart=/usr/bin/latticed --config /etc/lattice/latticed.conf\$" "$t/root/usr/lib/systemd/system/latticed.service" \
  || fail "the .deb's unit: $(grep ExecStart "$t/root/usr/lib/systemd/system/latticed.service")"
"$t/root/usr/bin/latticed" --version | grep -q "latticed 0.1.0" || fail "the .deb's latticed does not run"
echo "it_install: 1 passed, 0 failed"
