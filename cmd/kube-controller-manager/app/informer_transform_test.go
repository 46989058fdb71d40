package app

import (
	"strings"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
)

// Cached pods are trimmed, unless the SELinux warning controller (off by
// default) runs: it reads the volumes, mounts and security contexts
// trimming drops.
func TestInformerTransformKeepsPodsWholeForSELinuxWarnings(t *testing.T) {
	for _, tc := range []struct {
		controllers []string
		wantMounts  bool
	}{
		{controllers: []string{"*"}, wantMounts: false},
		{controllers: []string{"*", "selinux-warning-controller"}, wantMounts: true},
	} {
		cfg := &config.Config{}
		cfg.ComponentConfig.Generic.Controllers = tc.controllers
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/v"}}}}},
		}
		if _, err := informerTransform(cfg.Complete())(pod); err != nil {
			t.Fatal(err)
		}
		if got := pod.Spec.Containers[0].VolumeMounts != nil; got != tc.wantMounts {
			t.Errorf("--controllers=%v: volume mounts kept %v, want %v", tc.controllers, got, tc.wantMounts)
		}
		if pod.ManagedFields != nil {
			t.Errorf("--controllers=%v: managedFields kept", tc.controllers)
		}
		// Both transforms share the strings cached objects repeat.
		other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: strings.Clone(pod.Namespace)}}
		if _, err := informerTransform(cfg.Complete())(other); err != nil {
			t.Fatal(err)
		}
		if unsafe.StringData(other.Namespace) != unsafe.StringData(pod.Namespace) {
			t.Errorf("--controllers=%v: namespace not interned", tc.controllers)
		}
	}
}
