#!/usr/bin/env bash
# profile_cache.sh ASTEROID CLUSTER BUILD_CACHE
# The profile a command measures goes to $XDG_CACHE_HOME/asteroid/profiles (CTest sets it to
# the build tree, tests/CMakeLists.txt), never to the user's home: with HOME pointing nowhere
# and an empty cache folder of its own under that one, a first run measures and caches there,
# a second reads that file.
set -uo pipefail
asteroid=$1
cluster=$2
build_cache=$3
fail() { echo "profile_cache.sh: $*" >&2; exit 1; }
[[ -n ${XDG_CACHE_HOME:-} ]] || fail "XDG_CACHE_HOME is not set: the test would write the user's cache"
[[ $XDG_CACHE_HOME == "$build_cache" ]] \
  || fail "XDG_CACHE_HOME is $XDG_CACHE_HOME, not the build tree's $build_cache"
cache=$XDG_CACHE_HOME/profile-cache-test # other tests share $XDG_CACHE_HOME meanwhile
rm -rf "$cache"
run() {
  HOME=/nonexistent-asteroid-home XDG_CACHE_HOME=$cache "$asteroid" devices --cluster "$cluster" \
    --model efficientnet_b1 --model-options '{}' --batch 1 2>&1
}
first=$(run) || fail "first run failed: $first"
grep -Fq "cached profile in $cache/asteroid/profiles/efficientnet_b1_" <<<"$first" \
  || fail "first run cached nothing under $cache: $first"
second=$(run) || fail "second run failed: $second"
grep -Fq "using cached profile $cache/asteroid/profiles/efficientnet_b1_" <<<"$second" \
  || fail "second run did not read the cache under $cache: $second"
echo "profile_cache.sh: cached and read under $cache"
