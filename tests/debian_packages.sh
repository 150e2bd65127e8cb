#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian packages (cmake/packaging.cmake) with `cpack -G DEB` in a build of
# the library and the command configured for /usr, checks what each holds and needs,
# extracts them with dpkg-deb -x (nothing is installed on the machine), and builds and
# runs consumers against the extracted libsluice-dev and libsluiceN files
# (tests/install_consumer.sh --installed), and the extracted sluice command. lintian
# checks them: no error and no warning.
#   debian_packages.sh BUILD SRC     (the packaging build is BUILD/debian-packages)
set -euo pipefail
build=$1
src=$2
pkg=$build/debian-packages
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
    echo "debian_packages: $*" >&2
    exit 1
}

# Debian's build flags (hardening: fortified functions, stack protector, relro, bindnow)
eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
cmake -S "$src" -B "$pkg" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSLUICE_SANITIZE= -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_EXAMPLES=OFF \
    -DSLUICE_BUILD_BENCH=OFF -DCMAKE_C_FLAGS="$CPPFLAGS $CFLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$LDFLAGS" >/dev/null
cmake --build "$pkg" -j2 >/dev/null
rm -f "$pkg"/*.deb
(cd "$pkg" && cpack -G DEB >/dev/null)

version=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# the runtime package is named for the soname, libsluice.so.MAJOR (docs/abi.md)
major=${version%%.*}
lib=libsluice$major
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for p in $lib libsluice-dev sluice-tools; do
    deb=$pkg/${p}_${version}_$arch.deb
    [ -f "$deb" ] || fail "no $deb; cpack made: $(ls "$pkg"/*.deb)"
    [ "$(dpkg-deb -f "$deb" Package)" = "$p" ] || fail "$deb is not $p"
    dpkg-deb -x "$deb" "$work/root"
    # each package's changelog, its newest entry this version
    changelog=$work/root/usr/share/doc/$p/changelog.gz
    # and its copyright file: the licence, machine-readable
    cmp -s "$work/root/usr/share/doc/$p/copyright" "$src/cmake/debian/copyright" ||
        fail "$p: no copyright file, or not cmake/debian/copyright"
    [ "$(zcat "$changelog" | dpkg-parsechangelog -l- -S Version)" = "$version" ] ||
        fail "$p: its changelog's newest version is not $version"
done
[ "$(ls "$pkg"/*.deb | wc -l)" -eq 3 ] || fail "more packages than three: $(ls "$pkg"/*.deb)"

depends() { # PACKAGE: its Depends, one per line, without versions
    dpkg-deb -f "$pkg/${1}_${version}_$arch.deb" Depends | tr ',' '\n' | sed 's/(.*//; s/ //g'
}
has() { # PACKAGE DEPENDENCY...
    local p=$1
    shift
    for d in "$@"; do
        depends "$p" | grep -qx "$d" || fail "$p does not depend on $d: $(depends "$p" | xargs)"
    done
}
# the library's, as dpkg-shlibdeps found them in libsluice.so.MAJOR
has $lib libc6 libglib2.0-0 libhiredis0.14 libssl3
has libsluice-dev $lib libglib2.0-dev libhiredis-dev libssl-dev pkg-config
has sluice-tools $lib libglib2.0-0
dpkg-deb -f "$pkg/sluice-tools_${version}_$arch.deb" Depends | grep -q "$lib (= $version)" ||
    fail "sluice-tools does not depend on this very $lib"

# what goes where: the runtime package holds the library and its documents only
contents() { dpkg-deb -c "$pkg/${1}_${version}_$arch.deb" | awk '{ print $6 }' | grep -v '/$'; }
if contents $lib | grep -v "^./usr/lib/$triplet/libsluice\.so\.$major" | grep -v "^./usr/share/doc/$lib/"; then
    fail "$lib holds more than the shared library (above)"
fi
contents $lib | grep -qx "./usr/lib/$triplet/libsluice\.so\.$version" || fail "no libsluice.so.$version in $lib"
contents libsluice-dev | grep -qx "./usr/include/sluice/sluice.h" || fail "no headers in libsluice-dev"
contents libsluice-dev | grep -qx "./usr/lib/$triplet/libsluice.a" || fail "no static library"
contents libsluice-dev | grep -qx "./usr/lib/$triplet/pkgconfig/sluice.pc" || fail "no sluice.pc"
contents libsluice-dev | grep -qx "./usr/lib/$triplet/cmake/sluice/sluiceConfig.cmake" ||
    fail "no sluiceConfig.cmake"
contents sluice-tools | grep -qx "./usr/bin/sluice" || fail "no sluice command"
contents sluice-tools | grep -qx "./usr/share/man/man1/sluice\.1\.gz" || fail "no man page (gzipped)"
# the library's shlibs and its ldconfig trigger, for the packages built on it
dpkg-deb --ctrl-tarfile "$pkg/${lib}_${version}_$arch.deb" | tar -x -C "$work" ./shlibs ./triggers ||
    fail "$lib has no shlibs or no triggers file"
# a package built on it needs this version or a later one of the same major (docs/abi.md)
grep -qx "libsluice $major $lib (>= $version)" "$work/shlibs" || fail "$lib's shlibs: $(cat "$work/shlibs")"
grep -qx "activate-noawait ldconfig" "$work/triggers" || fail "$lib's triggers: $(cat "$work/triggers")"
# and no maintainer script: the trigger runs ldconfig
for p in $lib libsluice-dev sluice-tools; do
    if dpkg-deb -I "$pkg/${p}_${version}_$arch.deb" | grep -qw "postinst\|postrm\|preinst\|prerm"; then
        fail "$p has maintainer scripts"
    fi
done

# lintian: no error, no warning, nothing suppressed
lintian --fail-on error,warning "$pkg"/*.deb 2>&1 | grep -v "running with root privileges" >&2 || true
lintian --fail-on error,warning "$pkg"/*.deb >/dev/null 2>&1 || fail "lintian found errors or warnings (above)"

# the extracted files: consumers build and run against them, and so does the command
"$src/tests/install_consumer.sh" --installed "$work/root/usr" "$src" >/dev/null
out=$(LD_LIBRARY_PATH=$work/root/usr/lib/$triplet "$work/root/usr/bin/sluice" --version)
[ "$out" = "sluice $version" ] || fail "sluice --version said '$out'"
echo "debian_packages: $lib, libsluice-dev and sluice-tools $version built, extracted and used"
