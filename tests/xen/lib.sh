# Shared by the real-Xen harness's host-side scripts (sourced, not run).

# dom0's userland comes from SYSROOT (tests/xen/fetch's env): empty for this
# host's own files (Xen 4.17), Debian 13's extracted tree for Xen 4.20.

# Copies each binary (a path inside SYSROOT) into root at its own path,
# with its libraries.
copy_with_libs() { # root binary...
    local root=$1 bin
    shift
    for bin in "$@"; do
        install -D -m 0755 "${SYSROOT:-}$bin" "$root$bin"
        copy_libs "$root" "${SYSROOT:-}$bin"
    done
}

# Copies a host file (the daemon and snooper under test) into root at
# path, with its libraries taken from SYSROOT's.
copy_host_binary() { # root file path
    install -D -m 0755 "$2" "$1$3"
    copy_libs "$1" "$2"
}

# The libraries a binary loads, as "path-in-dom0 path-here" lines: the
# host's ldd, or, for SYSROOT, its own loader with --list (this host's ldd
# cannot run trixie's binaries, which need glibc >= 2.38).
list_libs() { # binary
    if [ -z "${SYSROOT:-}" ]; then
        ldd "$1" 2>/dev/null | awk '/=> \// { print $3, $3 } /^\t\/.*ld-linux/ { print $1, $1 }'
        return
    fi
    "$SYSROOT/usr/lib64/ld-linux-x86-64.so.2" --library-path "$SYSROOT/usr/lib/x86_64-linux-gnu" \
        --list "$1" | awk -v r="$SYSROOT" '
        / => \// { p = $3; d = $1 ~ /^\// ? $1 : substr(p, length(r) + 1); print d, p }
        / not found/ { print "missing", $1 }'
}

# Copies a binary's shared-library closure and the dynamic loader into
# root; also libgcc_s, which glibc loads at run time for pthread_cancel (xl
# aborts without it).
copy_libs() { # root binary
    local root=$1 dest src
    list_libs "$2" | while read -r dest src; do
        if [ "$dest" = missing ]; then
            echo "copy_libs: $2 needs $src, which ${SYSROOT:-this host} lacks" >&2
            return 1
        fi
        [ -e "$root$dest" ] || install -D -m 0755 "$(readlink -f "$src")" "$root$dest"
    done
    if [ -n "${SYSROOT:-}" ]; then
        dest=/usr/lib/x86_64-linux-gnu/libgcc_s.so.1
        src=$SYSROOT$dest
    else
        dest=$(ldconfig -p | awk '/libgcc_s.so.1 .*x86-64/ && !found { print $NF; found = 1 }')
        src=$dest
    fi
    [ -e "$root$dest" ] || install -D -m 0644 "$src" "$root$dest"
}

# The kernel modules that provide the named ones, dependencies first, as
# paths relative to the modules directory. Debian's .ko files come without
# modules.dep: each names its dependencies in its .modinfo section.
modules_in_order() { # modules_dir name...
    local dir=$1
    shift
    declare -A seen=()
    local order=()
    visit() {
        local name=${1//-/_} path dep
        [ -n "${seen[$name]:-}" ] && return 0
        seen[$name]=1
        path=$(find "$dir/kernel" -name '*.ko' | awk -v n="$name" '
            { f = $0; sub(".*/", "", f); sub("\\.ko$", "", f); gsub("-", "_", f) } f == n && !found { print; found = 1 }')
        if [ -z "$path" ]; then
            grep -q "/${1}.ko\$\|/${name}.ko\$" "$dir/modules.builtin" && return 0
            echo "no module $1 under $dir" >&2
            return 1
        fi
        for dep in $(tr '\0' '\n' <"$path" | sed -n 's/^depends=//p' | tr ',' ' '); do
            visit "$dep"
        done
        order+=("${path#"$dir"/}")
    }
    local m
    for m in "$@"; do visit "$m"; done
    printf '%s\n' "${order[@]}"
}

# Packs a directory into a newc cpio archive (busybox's cpio: a fresh
# machine need not have cpio).
pack_cpio() { # busybox dir out
    (cd "$2" && find . -mindepth 1 | LC_ALL=C sort | "$1" cpio -o -H newc -R 0:0) >"$3" 2>/dev/null
}

# The kernel a bzImage carries, as the ELF it is (vmlinux), for Xen to
# load as it is: Debian 12's kernel is xz-compressed, and Xen (for dom0)
# and libxc in dom0 (at each guest's start) decompressing it under TCG
# took seconds of CPU every time (a second of the host's natively). The
# bzImage itself when no compressed ELF is found in it.
uncompressed_kernel() { # bzImage out
    local magic tool offset
    for magic in '\xfd7zXZ\x00:xz' '\x28\xb5\x2f\xfd:zstd' '\x1f\x8b\x08:gzip'; do
        tool=${magic##*:}
        command -v "$tool" >/dev/null || continue
        offset=$(LC_ALL=C grep -m 1 -obUaP "${magic%:*}" "$1" | cut -d: -f1 | head -n 1 || true)
        [ -n "$offset" ] || continue
        # The stream ends before the bzImage does: the tool's complaint
        # about what follows is expected.
        tail -c +$((offset + 1)) "$1" | "$tool" -dc >"$2" 2>/dev/null || true
        [ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
    done
    cp "$1" "$2"
}
