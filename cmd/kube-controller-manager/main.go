// The kube-controller-manager binary.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
