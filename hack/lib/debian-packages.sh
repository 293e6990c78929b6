# Sourced by the build scripts: installs Debian packages for the programs a
# step calls, only those missing, so a fresh machine (CI) needs nothing
# installed by hand. Every package the project installs is named in a call to
# install_missing; tests/test_external_programs.py checks that each program
# the project calls is built by it, installed here, or a documented
# prerequisite (docs/development.md).
#   install_missing PURPOSE COMMAND[:PACKAGE] ...
# COMMAND is looked up on PATH, or checked as a file when it starts with '/';
# PACKAGE defaults to COMMAND; a package is named once however many of its
# commands are missing. Installs as root; otherwise names the packages and fails.
install_missing() {
  local purpose=$1 entry command package named missing=()
  shift
  for entry in "$@"; do
    command=${entry%%:*}
    package=${entry#*:}
    if [ "${command:0:1}" = / ]; then
      [ -e "$command" ] && continue
    else
      command -v "$command" >/dev/null && continue
    fi
    for named in "${missing[@]}"; do
      [ "$named" = "$package" ] && continue 2
    done
    missing+=("$package")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "$purpose needs ${missing[*]}: run as root, or install them with apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "installing ${missing[*]} from Debian's packages ($purpose)" >&2
  # `make test` sets up its steps side by side: one apt at a time (apt itself
  # refuses a second at once), and waiting on any other dpkg a while.
  (
    flock 8
    export DEBIAN_FRONTEND=noninteractive
    # The package lists of a fresh machine are empty or stale: update once.
    apt-get -o DPkg::Lock::Timeout=300 install -qq -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 &&
        apt-get -o DPkg::Lock::Timeout=300 install -qq -y --no-install-recommends "${missing[@]}" >&2; }
  ) 8>/run/lock/trainium-dra-apt.lock
}
