// Command etcd is upstream etcd's server, wrapped because its server module
// cannot be installed with `go install`.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
