# Sourced by scripts/peers and scripts/cluster-peers: the machine's cache of
# built peers, outside any checkout, so that a clean clone on a machine that
# built them once copies them (seconds) instead of linking them again from
# Go's build cache (minutes of a clean clone's CI).
#
# Each entry is named by what it was built from: `<name>-<key>`, the key
# the same sha256 that decides in target/peers whether a peer is up to
# date (its module's go.mod and go.sum and the build command). A changed
# module is a new key: an entry is never taken for something else.
#
# The directory is $NODECTL_PEERS_CACHE, else $XDG_CACHE_HOME/nodectl/peers,
# else ~/.cache/nodectl/peers; NODECTL_PEERS_CACHE= (empty) turns it off.
# Its binaries are run by the tests, so it is used only when it and its
# parent are the caller's and writable by nobody else; otherwise it is
# ignored, saying why.

peers_cache_dir() {
    if [ "${NODECTL_PEERS_CACHE+set}" = set ]; then
        printf '%s' "$NODECTL_PEERS_CACHE"
    else
        printf '%s' "${XDG_CACHE_HOME:-$HOME/.cache}/nodectl/peers"
    fi
}

# Prints the cache's directory when it can be used, made if need be.
peers_cache() {
    local dir
    dir=$(peers_cache_dir)
    [ -n "$dir" ] || return 1
    mkdir -p -m 0700 "$dir" 2>/dev/null || return 1
    local path
    for path in "$dir" "$(dirname "$dir")"; do
        # Owned by us and writable by nobody else: what is in it is what we put.
        if [ "$(stat -c %u "$path")" != "$(id -u)" ] || [ -n "$(find "$path" -maxdepth 0 -perm /022)" ]; then
            echo "peers cache: $path is not the caller's alone: not used" >&2
            return 1
        fi
    done
    printf '%s' "$dir"
}

# peers_cache_take NAME KEY DEST: copies the cached NAME built as KEY to
# DEST (through a temporary file beside it); fails when there is none.
peers_cache_take() {
    local name=$1 key=$2 dest=$3 dir
    dir=$(peers_cache) || return 1
    [ -f "$dir/$name-$key" ] && [ ! -L "$dir/$name-$key" ] || return 1
    cp "$dir/$name-$key" "$dest.cache-tmp" && chmod 0755 "$dest.cache-tmp" &&
        mv "$dest.cache-tmp" "$dest" || { rm -f "$dest.cache-tmp"; return 1; }
    echo "peers cache: $(basename "$dest") taken from the machine's cache" >&2
}

# peers_cache_has NAME KEY: whether the cache holds NAME built as KEY.
peers_cache_has() {
    local dir
    dir=$(peers_cache) || return 1
    [ -f "$dir/$1-$2" ]
}

# peers_cache_keep NAME KEY SRC: keeps a copy of SRC, built as KEY, in the
# cache unless it holds one (older keys of NAME go: a machine keeps what its
# checkouts use). Called for what a checkout already had too, so a machine
# whose peers were built before the cache existed fills it.
peers_cache_keep() {
    local name=$1 key=$2 src=$3 dir
    dir=$(peers_cache) || return 0
    [ ! -f "$dir/$name-$key" ] || return 0
    rm -f "$dir/$name"-*.tmp
    cp "$src" "$dir/$name-$key.tmp" && mv "$dir/$name-$key.tmp" "$dir/$name-$key" ||
        { rm -f "$dir/$name-$key.tmp"; return 0; }
    local old
    for old in "$dir/$name"-*; do
        [ "$old" = "$dir/$name-$key" ] || rm -f "$old"
    done
}
