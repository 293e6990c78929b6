# Sourced by hack/kueue/build.sh and hack/lws/build.sh: builds the controller
# manager of a Go module at the version the caller's go.mod pins, into
# <cache>/<name>-<version>/<name>, and copies some of the module's config
# directories beside it (<cache>/<name>-<version>/config/<each one's basename>/),
# which `trainium-dra up` reads at run time; both kept once there.
#   build_manager GOMOD_DIR NAME MODULE MAIN_PACKAGE CONFIG_DIR...
# MAIN_PACKAGE and each CONFIG_DIR are relative to the module's root; the
# version is set in the module's pkg/version.GitVersion.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the directory.
# shellcheck source=go-build.sh
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
build_manager() {
  local here=$1 name=$2 module=$3 main=$4 version dir source config
  shift 4
  version=$(cd "$here" && go list -m -f '{{.Version}}' "$module")
  dir=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}/$name-$version
  if [ ! -x "$dir/$name" ]; then
    mkdir -p "$dir"
    echo "build-$name: building $name $version (first time only)" >&2
    go_build "$here" "$dir/$name.tmp" "-X $module/pkg/version.GitVersion=$version" "$module/$main"
    mv "$dir/$name.tmp" "$dir/$name"
  fi
  if [ ! -d "$dir/config" ]; then
    source=$(cd "$here" && go list -m -f '{{.Dir}}' "$module")
    mkdir -p "$dir/config.tmp"
    for config in "$@"; do
      # The module cache is read-only; the copies need not be.
      cp -r --no-preserve=mode "$source/$config" "$dir/config.tmp/"
    done
    mv "$dir/config.tmp" "$dir/config"
  fi
  echo "$dir"
}
