// CoreDNS with only the plugins a local cluster's DNS needs: the `kubernetes` zone (Services,
// headless Services, StatefulSet pods), bound to one address, with errors, logs, a cache and a
// readiness endpoint. No forward plugin: the cluster DNS answers the cluster zone only.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

// The order in which the plugins handle a query (a subset of CoreDNS's plugin.cfg order).
var directives = []string{"bind", "ready", "errors", "log", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
