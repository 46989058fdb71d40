package options

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// FuzzFlags parses arbitrary command lines (arguments separated by NUL)
// with the command's flag set and validates the result: every input either
// parses and validates, or gives an error; nothing panics.
//
// The seeds run with plain `go test`; `make fuzz` searches further.
func FuzzFlags(f *testing.F) {
	for _, s := range []string{
		"",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--controllers=*,-deployment,foo",
		"--controllers=,,,-",
		"--leader-elect-lease-duration=1ns\x00--leader-elect-renew-deadline=-5s\x00--leader-elect-retry-period=0",
		"--concurrent-deployment-syncs=-1\x00--concurrent_rc_syncs=99999999999999999999",
		"--cluster-cidr=10.244.0.0/16\x00--allocate-node-cidrs=true\x00--node-cidr-mask-size=33",
		"--cluster-cidr=fd00::/8,10.0.0.0/8,192.168.0.0/16\x00--allocate-node-cidrs",
		"--service-cluster-ip-range=10.96.0.0/12,fd00::/108,1.2.3.4/40",
		"--secure-port=-1\x00--bind-address=not-an-ip",
		"--feature-gates=AllAlpha=true,Foo=bar\x00--emulated-version=1.0",
		"--terminated-pod-gc-threshold=-1\x00--kube-api-qps=NaN\x00--kube-api-burst=-1",
		"--horizontal-pod-autoscaler-tolerance=1e309\x00--horizontal-pod-autoscaler-sync-period=-1h",
		"--node-monitor-grace-period=0\x00--node-eviction-rate=-0.1\x00--large-cluster-size-threshold=-5",
		"--cluster-signing-duration=-8760h\x00--cluster-signing-kubelet-serving-cert-file=x",
		"--v=99999\x00--vmodule=*=x",
		"--tls-cipher-suites=NOPE\x00--tls-min-version=VersionTLS99",
		"--requestheader-allowed-names=,\x00--authentication-token-webhook-cache-ttl=-1s",
		"--=\x00---\x00-\x00--help=maybe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		s, fss := newFlags(t)
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
		fs.SetOutput(discard{})
		for _, name := range fss.Order {
			fs.AddFlagSet(fss.FlagSets[name])
		}
		if err := fs.Parse(args); err != nil {
			if err.Error() == "" {
				t.Fatalf("parse %q: empty error", args)
			}
			return
		}
		all, disabled, aliases := referenceControllers(t)
		if err := s.Validate(all, disabled, aliases); err != nil && err.Error() == "" {
			t.Fatalf("validate %q: empty error", args)
		}
	})
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
