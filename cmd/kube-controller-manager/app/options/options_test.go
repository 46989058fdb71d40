package options

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"

	kcmappconfig "github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

// parseArgs builds options and parses args the way the command does: one
// flag set with upstream's word-separator normalisation.
func parseArgs(t *testing.T, args ...string) *KubeControllerManagerOptions {
	t.Helper()
	s, fss := newFlags(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return s
}

func validate(t *testing.T, s *KubeControllerManagerOptions) error {
	t.Helper()
	all, disabled, aliases := referenceControllers(t)
	return s.Validate(all, disabled, aliases)
}

func TestValidateDefaults(t *testing.T) {
	if err := validate(t, parseArgs(t)); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		args []string
		want string // substring of the error; empty means valid
	}{
		// Accepted as upstream accepts them.
		{[]string{"--concurrent-deployment-syncs=0", "--concurrent-replicaset-syncs=0", "--concurrent_rc_syncs=0"}, ""},
		// Stricter than upstream: a negative worker count is refused.
		{[]string{"--concurrent-replicaset-syncs=-1"}, "--concurrent-replicaset-syncs must not be negative, got -1"},
		{[]string{"--concurrent-deployment-syncs=-3"}, "--concurrent-deployment-syncs must not be negative"},
		{[]string{"--concurrent-gc-syncs=-1"}, "--concurrent-gc-syncs must not be negative"},
		{[]string{"--controllers=*,-deployment,bootstrapsigner,-ttl-controller"}, ""},
		{[]string{"--kube-api-qps=-1"}, ""},
		{[]string{"--leader-elect=false", "--leader-elect-renew-deadline=1m"}, ""},
		{[]string{"--cloud-provider=external"}, ""},
		{[]string{"--service-cluster-ip-range=10.0.0.0/16,fd00::/108"}, ""},
		{[]string{"--cluster-signing-cert-file=a", "--cluster-signing-key-file=b"}, ""},
		{[]string{"--secure-port=0"}, ""},

		{[]string{"--leader-elect-renew-deadline=20s"}, "--leader-elect-renew-deadline (20s) must be less than --leader-elect-lease-duration (15s)"},
		{[]string{"--leader-elect-retry-period=0s"}, "--leader-elect-retry-period must be greater than zero"},
		{[]string{"--leader-elect-lease-duration=0s"}, "--leader-elect-lease-duration must be greater than zero"},
		{[]string{"--leader-elect-resource-lock=endpoints"}, `--leader-elect-resource-lock must be "leases"`},
		{[]string{"--leader-elect-resource-name="}, "--leader-elect-resource-name must not be empty"},
		{[]string{"--leader-elect-resource-namespace="}, "--leader-elect-resource-namespace must not be empty"},
		{[]string{"--controllers=*,foo"}, `--controllers: unknown controller "foo"`},
		{[]string{"--controllers=-nope"}, `unknown controller "nope"`},
		{[]string{"--kube-api-burst=-1"}, "--kube-api-burst must not be negative"},
		{[]string{"--kube-api-qps=NaN"}, "--kube-api-qps must be a finite number"},
		{[]string{"--concurrent-statefulset-syncs=0"}, "--concurrent-statefulset-syncs must be greater than 0"},
		{[]string{"--concurrent-daemonset-syncs=0"}, "--concurrent-daemonset-syncs must be greater than 0"},
		{[]string{"--concurrent-job-syncs=0"}, "--concurrent-job-syncs must be greater than 0"},
		{[]string{"--concurrent-cron-job-syncs=-2"}, "--concurrent-cron-job-syncs must be greater than 0, got -2"},
		{[]string{"--concurrent-horizontal-pod-autoscaler-syncs=0"}, "--concurrent-horizontal-pod-autoscaler-syncs"},
		{[]string{"--concurrent-ephemeralvolume-syncs=0"}, "--concurrent-ephemeralvolume-syncs"},
		{[]string{"--concurrent-resourceclaim-syncs=0"}, "--concurrent-resourceclaim-syncs"},
		{[]string{"--concurrent-device-taint-eviction-syncs=0"}, "--concurrent-device-taint-eviction-syncs"},
		{[]string{"--concurrent-validating-admission-policy-status-syncs=0"}, "--concurrent-validating-admission-policy-status-syncs"},
		{[]string{"--concurrent-service-endpoint-syncs=51"}, "--concurrent-service-endpoint-syncs must be between 1 and 50, got 51"},
		{[]string{"--concurrent-service-endpoint-syncs=0"}, "--concurrent-service-endpoint-syncs"},
		{[]string{"--max-endpoints-per-slice=1001"}, "--max-endpoints-per-slice"},
		{[]string{"--mirroring-concurrent-service-endpoint-syncs=0"}, "--mirroring-concurrent-service-endpoint-syncs"},
		{[]string{"--mirroring-max-endpoints-per-subset=0"}, "--mirroring-max-endpoints-per-subset"},
		{[]string{"--attach-detach-reconcile-sync-period=500ms"}, "--attach-detach-reconcile-sync-period must be at least 1s"},
		{[]string{"--cluster-signing-kubelet-serving-cert-file=a"}, "--cluster-signing-kubelet-serving-cert-file needs --cluster-signing-kubelet-serving-key-file"},
		{[]string{"--cluster-signing-legacy-unknown-key-file=a"}, "--cluster-signing-legacy-unknown-key-file needs --cluster-signing-legacy-unknown-cert-file"},
		{[]string{"--cluster-signing-cert-file=a", "--cluster-signing-key-file=b", "--cluster-signing-kubelet-client-cert-file=c", "--cluster-signing-kubelet-client-key-file=d"}, "cannot be combined"},
		{[]string{"--service-cluster-ip-range=a,b,c"}, "--service-cluster-ip-range can hold at most two ranges"},
		{[]string{"--cloud-provider=aws"}, "built-in cloud providers are disabled"},
		{[]string{"--cidr-allocator-type=CloudAllocator"}, "--cidr-allocator-type"},
		{[]string{"--secure-port=70000"}, "--secure-port"},
		{[]string{"--show-hidden-metrics-for-version=1.2"}, "showHiddenMetricsForVersion"},
		{[]string{"--logging-format=xml"}, "format"},
		{[]string{"--log-text-split-stream"}, "LoggingAlphaOptions"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := validate(t, parseArgs(t, tc.args...))
			if tc.want == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestValidateReportsAllProblems(t *testing.T) {
	err := validate(t, parseArgs(t, "--controllers=foo,bar", "--concurrent-job-syncs=0", "--kube-api-burst=-5"))
	if err == nil {
		t.Fatal("want error")
	}
	msg := err.Error()
	for _, want := range []string{`"foo", "bar"`, "--concurrent-job-syncs", "--kube-api-burst"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
}

func TestUnknownControllerListsValidNames(t *testing.T) {
	err := validate(t, parseArgs(t, "--controllers=*,deploymnt"))
	if err == nil {
		t.Fatal("want error")
	}
	all, _, _ := referenceControllers(t)
	for _, name := range all {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not list %q: %v", name, err)
		}
	}
}

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: test
  user:
    token: secret
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func buildConfig(t *testing.T, s *KubeControllerManagerOptions) (*kcmappconfig.Config, error) {
	t.Helper()
	all, disabled, aliases := referenceControllers(t)
	c, err := s.Config(context.Background(), all, disabled, aliases)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		c.EventBroadcaster.Shutdown()
		if c.SecureServing != nil && c.SecureServing.Listener != nil {
			_ = c.SecureServing.Listener.Close()
		}
	})
	return c, nil
}

func TestConfigWithoutServing(t *testing.T) {
	s := parseArgs(t,
		"--kubeconfig="+writeKubeconfig(t),
		"--secure-port=0",
		"--controllers=*,-deployment,replicaset,-ttl,bootstrap-signer-controller",
		"--kube-api-qps=33", "--kube-api-burst=44", "--kube-api-content-type=application/json",
		"--concurrent-deployment-syncs=7", "--concurrent_rc_syncs=3",
		"--controller-shutdown-timeout=3s",
	)
	c, err := buildConfig(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if c.SecureServing != nil || c.LoopbackClientConfig != nil {
		t.Errorf("serving should be off")
	}
	if c.Client == nil || c.EventBroadcaster == nil || c.EventRecorder == nil {
		t.Fatalf("client or events missing")
	}
	kc := c.Kubeconfig
	if kc.Host != "https://127.0.0.1:6443" || kc.QPS != 33 || kc.Burst != 44 || kc.ContentType != "application/json" || !kc.DisableCompression {
		t.Errorf("unexpected rest config %+v", kc)
	}
	if kc.UserAgent != "" {
		t.Errorf("Kubeconfig should carry no user agent, got %q", kc.UserAgent)
	}
	cc := c.ComponentConfig
	wantControllers := []string{"*", "-deployment-controller", "replicaset-controller", "-ttl-controller", "bootstrap-signer-controller"}
	if !reflect.DeepEqual(cc.Generic.Controllers, wantControllers) {
		t.Errorf("Controllers = %v, want %v", cc.Generic.Controllers, wantControllers)
	}
	if cc.DeploymentController.ConcurrentDeploymentSyncs != 7 || cc.ReplicationController.ConcurrentRCSyncs != 3 || cc.ReplicaSetController.ConcurrentRSSyncs != 5 {
		t.Errorf("per-controller values not applied: %+v %+v %+v", cc.DeploymentController, cc.ReplicationController, cc.ReplicaSetController)
	}
	if cc.Generic.ClientConnection.QPS != 33 || cc.Generic.ClientConnection.Kubeconfig == "" || !cc.Generic.LeaderElection.LeaderElect ||
		cc.Generic.LeaderElection.ResourceName != "kube-controller-manager" || cc.Generic.LeaderElection.ResourceNamespace != "kube-system" {
		t.Errorf("generic config: %+v", cc.Generic)
	}
	if c.ControllerShutdownTimeout != 3*time.Second {
		t.Errorf("ControllerShutdownTimeout = %v", c.ControllerShutdownTimeout)
	}
	if cc.Kind != kcmconfig.Kind || cc.APIVersion != "kubecontrollermanager.config.k8s.io/v1alpha1" {
		t.Errorf("TypeMeta = %+v", cc.TypeMeta)
	}
	if got := cc.GarbageCollectorController.GCIgnoredResources; len(got) != 2 {
		t.Errorf("GCIgnoredResources = %v", got)
	}
	// Upstream has no options for the service controller, so /configz
	// shows it zeroed.
	data, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"ServiceController":{"ConcurrentServiceSyncs":0}`) {
		t.Errorf("configz JSON: %s", data)
	}
}

func TestConfigWithServing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	certDir := t.TempDir()
	s := parseArgs(t,
		"--kubeconfig="+writeKubeconfig(t),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--cert-dir="+certDir,
	)
	c, err := buildConfig(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if c.SecureServing == nil || c.SecureServing.Listener == nil {
		t.Fatal("secure serving not set up")
	}
	if c.LoopbackClientConfig == nil {
		t.Errorf("loopback client config missing")
	}
	for _, f := range []string{"kube-controller-manager.crt", "kube-controller-manager.key"} {
		if _, err := os.Stat(filepath.Join(certDir, f)); err != nil {
			t.Errorf("self-signed %s: %v", f, err)
		}
	}
	if c.Authorization.Authorizer == nil {
		t.Errorf("authorizer missing")
	}
	if got := s.Authorization.AlwaysAllowPaths; !reflect.DeepEqual(got, []string{"/healthz", "/readyz", "/livez"}) {
		t.Errorf("AlwaysAllowPaths = %v", got)
	}
	if got := s.Authorization.AlwaysAllowGroups; !reflect.DeepEqual(got, []string{"system:masters"}) {
		t.Errorf("AlwaysAllowGroups = %v", got)
	}
}

func TestConfigFailsValidation(t *testing.T) {
	s := parseArgs(t, "--kubeconfig="+writeKubeconfig(t), "--secure-port=0", "--controllers=nope")
	if _, err := buildConfig(t, s); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("want controllers error, got %v", err)
	}
}

func TestConfigBadLeaderMigrationFile(t *testing.T) {
	s := parseArgs(t, "--kubeconfig="+writeKubeconfig(t), "--secure-port=0",
		"--enable-leader-migration", "--leader-migration-config="+filepath.Join(t.TempDir(), "missing.yaml"))
	if _, err := buildConfig(t, s); err == nil || !strings.Contains(err.Error(), "leader migration") {
		t.Errorf("want leader migration error, got %v", err)
	}
}

// withPrivateRegistry points s at a registry over a copy of the feature
// gate, so gate changes stay inside the test.
func withPrivateRegistry(t *testing.T) (*KubeControllerManagerOptions, featuregate.MutableVersionedFeatureGate, *pflag.FlagSet) {
	t.Helper()
	s, err := NewKubeControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	gate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	reg := basecompatibility.NewComponentGlobalsRegistry()
	if err := reg.Register(basecompatibility.DefaultKubeComponent, newKubeEffectiveVersion(), gate); err != nil {
		t.Fatal(err)
	}
	s.ComponentGlobalsRegistry = reg
	all, disabled, aliases := referenceControllers(t)
	fss := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	return s, gate, fs
}

func TestFeatureGatesFlag(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--feature-gates=NoSuchGate=true"}, "unrecognized feature gate: NoSuchGate"},
		{[]string{"--feature-gates=CSIVolumeHealth=maybe"}, "invalid value"},
		{[]string{"--feature-gates=DynamicResourceAllocation=false"}, "locked"},
		{[]string{"--feature-gates=wardle:Foo=true"}, "component not registered"},
		{[]string{"--emulated-version=kube=1.36.1"}, "patch version not allowed"},
		{[]string{"--feature-gates=CSIVolumeHealth=true,kube:AllAlpha=false"}, "do not mix"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s, _, fs := withPrivateRegistry(t)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := s.ComponentGlobalsRegistry.Set()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestFeatureGatesApplied(t *testing.T) {
	s, gate, fs := withPrivateRegistry(t)
	if err := fs.Parse([]string{"--feature-gates=CSIVolumeHealth=true", "--feature-gates=GenericWorkload=true"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		t.Fatal(err)
	}
	if !gate.Enabled(features.CSIVolumeHealth) || !gate.Enabled(features.GenericWorkload) {
		t.Errorf("gates not applied")
	}
	if errs := s.ComponentGlobalsRegistry.Validate(); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
}

func TestEmulatedVersion(t *testing.T) {
	s, gate, fs := withPrivateRegistry(t)
	if err := fs.Parse([]string{"--emulated-version=1.35"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		t.Fatal(err)
	}
	// ClusterTrustBundle went GA (on by default) in 1.37; at 1.35 it is beta and off.
	if gate.Enabled(features.ClusterTrustBundle) {
		t.Errorf("ClusterTrustBundle on at emulated 1.35")
	}

	s, _, fs = withPrivateRegistry(t)
	if err := fs.Parse([]string{"--emulated-version=1.20"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		t.Fatal(err)
	}
	if errs := s.ComponentGlobalsRegistry.Validate(); len(errs) == 0 {
		t.Errorf("emulating 1.20 should be rejected")
	}
}

func TestNewKubeEffectiveVersion(t *testing.T) {
	v := newKubeEffectiveVersion()
	if got := v.BinaryVersion().String(); !strings.HasPrefix(got, "1.37") {
		t.Errorf("binary version %s", got)
	}
	if got := v.EmulationVersion().String(); got != "1.37" {
		t.Errorf("emulation version %s", got)
	}
	if got := v.MinCompatibilityVersion().String(); got != "1.36" {
		t.Errorf("min compatibility version %s", got)
	}
}

func TestShardedNeedsLeaderElect(t *testing.T) {
	o := NewShardedOptions()
	if o.Enabled || !o.WarmStandby {
		t.Errorf("defaults: %+v, want off with warm standby", o)
	}
	if errs := o.Validate(false, true, true); len(errs) != 0 {
		t.Errorf("off: %v", errs)
	}
	o.Enabled = true
	if errs := o.Validate(true, false, false); len(errs) != 0 {
		t.Errorf("with --leader-elect: %v", errs)
	}
	errs := o.Validate(false, false, false)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "--leader-elect-sharded requires --leader-elect") {
		t.Errorf("without --leader-elect: %v", errs)
	}
	errs = o.Validate(true, true, false)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "--enable-leader-migration") {
		t.Errorf("with leader migration: %v", errs)
	}
	errs = o.Validate(true, false, true)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "CoordinatedLeaderElection") {
		t.Errorf("with coordinated leader election: %v", errs)
	}
}
