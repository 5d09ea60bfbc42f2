# shellcheck shell=bash
# The skip rule of the shell checks, the same as testkit::require for Rust tests: a check that
# cannot run on this host says so and passes, except under CI (CI=true or CI=1), where it
# fails. Source this file, then call `skip NAME WHY`; it exits either way.
skip() {
  if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
    echo "$1: required under CI: $2" >&2
    exit 1
  fi
  echo "SKIPPED: $1: $2" >&2
  exit 0
}
