#!/usr/bin/env bash
# Install and packages: `cmake --install` into a fresh prefix puts every file
# of the documented layout in place; liblattice.so exports exactly the public
# API's functions under a versioned SONAME; examples/hello_client.c builds
# against the prefix with pkg-config alone and runs against a grid of the
# installed latticed; the man pages render; `cpack -G DEB` makes a .deb whose
# dependencies this Debian satisfies (dpkg --dry-run) and whose latticed runs;
# dpkg installs it, removes it (the conffile stays) and purges it (nothing
# stays) in a throwaway root: `dpkg --root` into the test's temp dir, with a
# dpkg database of its own that starts as a copy of this system's, so the
# .deb's dependencies are checked against what is installed here while the
# machine's own database, files and ld.so cache are never touched (and two
# runs at once do not share dpkg's lock).
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

# dpkg -i, -r, -P of the .deb in a throwaway root ($r).  The maintainer
# scripts run outside a chroot (the root has no /bin/sh), with DPKG_ROOT set;
# cpack's postinst/postrm call a bare `ldconfig`, so PATH gives them one that
# records the call and updates only the root's lib directory.
r=$t/dpkgroot
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$t/shim"
cp /var/lib/dpkg/status "$r/var/lib/dpkg/status"
# Every copied package "has no files" here; empty lists say so without a warning each.
dpkg-query -W -f='${binary:Package}\n' | while read -r p; do : >"$r/var/lib/dpkg/info/$p.list"; done
cat >"$t/shim/ldconfig" <<EOF_SHIM
#!/bin/sh
[ -n "\$DPKG_ROOT" ] || { echo "ldconfig: no DPKG_ROOT" >&2; exit 1; }
echo "ldconfig \$* (DPKG_ROOT \$DPKG_ROOT)" >>"$t/ldconfig.calls"
exec /sbin/ldconfig -n "\$DPKG_ROOT/usr/lib"
EOF_SHIM
chmod +x "$t/shim/ldconfig"
rdpkg() { PATH=$t/shim:$PATH dpkg --root="$r" --force-script-chrootless "$@"; }
rdpkg -i "$deb" >"$t/dpkg-i.log" 2>&1 || fail "dpkg -i of the .deb failed: $(tail -5 "$t/dpkg-i.log")"
[ "$(dpkg-query --root="$r" -W -f='${db:Status-Abbrev}' lattice)" = "ii " ] \
  || fail "after dpkg -i lattice is '$(dpkg-query --root="$r" -W -f='${db:Status-Abbrev}' lattice)', want ii"
grep -q "^ldconfig .*(DPKG_ROOT $r)" "$t/ldconfig.calls" 2>/dev/null || fail "the .deb's postinst did not run ldconfig"
dpkg-query --root="$r" -L lattice >"$t/dpkg-L.list"
# The layout docs/OPERATIONS.md lists, under /usr (and /etc), each file on disk and owned by the package.
for f in /usr/bin/latticed /usr/bin/lattice /usr/lib/liblattice.so /usr/lib/liblattice.so.0 \
         /usr/lib/pkgconfig/lattice.pc /usr/include/lattice/lattice.h /usr/include/lattice/ops.h \
         /usr/include/lattice/metrics.h /usr/share/man/man1/latticed.1 /usr/share/man/man1/lattice.1 \
         /usr/lib/systemd/system/latticed.service /etc/lattice/latticed.conf; do
  [ -e "$r$f" ] || fail "dpkg -i did not put $f in place"
  grep -qx "$f" "$t/dpkg-L.list" || fail "dpkg does not list $f as the package's"
done
for h in "$src"/include/lattice/*.h; do
  [ -e "$r/usr/include/lattice/$(basename "$h")" ] || fail "dpkg -i did not install include/lattice/$(basename "$h")"
done
[ "$(objdump -p "$r/usr/lib/liblattice.so.0" | awk '/SONAME/ {print $2}')" = liblattice.so.0 ] \
  || fail "the installed liblattice.so.0 has SONAME '$(objdump -p "$r/usr/lib/liblattice.so.0" | awk '/SONAME/ {print $2}')'"
dpkg-query --root="$r" -W -f='${Conffiles}\n' lattice | grep -q "^ /etc/lattice/latticed.conf [0-9a-f]\{32\}" \
  || fail "dpkg did not register /etc/lattice/latticed.conf as a conffile"
[ "$(PKG_CONFIG_PATH=$r/usr/lib/pkgconfig pkg-config --variable=includedir lattice)" -ef "$r/usr/include" ] \
  || fail "the installed lattice.pc does not point at the installed headers"
"$r/usr/bin/latticed" --version | grep -q "latticed 0.1.0" || fail "the installed latticed --version does not run"
"$r/usr/bin/lattice" --version | grep -q "0.1.0" || fail "the installed lattice --version does not run"
"$r/usr/bin/latticed" --config "$r/etc/lattice/latticed.conf" --help >/dev/null || fail "the installed config does not parse"
# Remove keeps the (edited) conffile, as Debian does; purge takes it too.
echo "# edited by it_install" >>"$r/etc/lattice/latticed.conf"
rdpkg -r lattice >"$t/dpkg-r.log" 2>&1 || fail "dpkg -r failed: $(tail -5 "$t/dpkg-r.log")"
[ "$(dpkg-query --root="$r" -W -f='${db:Status-Abbrev}' lattice)" = "rc " ] || fail "after dpkg -r lattice is not rc"
[ ! -e "$r/usr/bin/latticed" ] || fail "dpkg -r left /usr/bin/latticed"
[ -e "$r/etc/lattice/latticed.conf" ] || fail "dpkg -r removed the edited conffile"
rdpkg -P lattice >"$t/dpkg-P.log" 2>&1 || fail "dpkg -P failed: $(tail -5 "$t/dpkg-P.log")"
if dpkg-query --root="$r" -W lattice >/dev/null 2>&1; then fail "dpkg -P left lattice in the database"; fi
left=$(cd "$r" && find . ! -type d ! -path './var/lib/dpkg/*' | sort)
[ -z "$left" ] || fail "dpkg -P left files: $left"
[ ! -e "$r/etc/lattice" ] && [ ! -e "$r/usr/include/lattice" ] || fail "dpkg -P left the package's directories"
echo "it_install: 1 passed, 0 failed"
