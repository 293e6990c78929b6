# Sourced by the build scripts: the one way the project builds an upstream Go
# command. Static (no cgo), paths trimmed, and no debug information: the linker
# drops DWARF anyway (-w), so the compiler is told not to make it.
#   go_build MODULE_DIR OUT EXTRA_LDFLAGS PACKAGE...
# OUT is the binary for one PACKAGE, or a directory ending in / for several:
# one `go build` for several commands links one while it compiles the next,
# where one build each leaves a CPU idle during every link.
# GO_BUILD_TAGS, when set, passes build tags (prometheus drops its cloud
# service discoveries this way).
go_build() {
  local module=$1 out=$2 ldflags=$3
  shift 3
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false \
    ${GO_BUILD_TAGS:+-tags="$GO_BUILD_TAGS"} -ldflags "-s -w $ldflags" -o "$out" "$@")
}
