# Shared by the real-Xen harness's host-side scripts (sourced, not run).

# Copies each binary into root at its own path, with its libraries.
copy_with_libs() { # root binary...
    local root=$1 bin
    shift
    for bin in "$@"; do
        install -D -m 0755 "$bin" "$root$bin"
        copy_libs "$root" "$bin"
    done
}

# Copies a binary's shared-library closure (ldd) and the dynamic loader into
# root; also libgcc_s, which glibc loads at run time for pthread_cancel (xl
# aborts without it).
copy_libs() { # root binary
    local root=$1 lib
    ldd "$2" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' |
        while read -r lib; do
            [ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
        done
    lib=$(ldconfig -p | awk '/libgcc_s.so.1 .*x86-64/ && !found { print $NF; found = 1 }')
    [ -e "$root$lib" ] || install -D -m 0644 "$lib" "$root$lib"
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
