package util

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webTemplate is the template of `kubectl create deployment web --image=nginx`
// after apiserver defaulting (SetDefaults_PodSpec / SetDefaults_Container).
func webTemplate() *v1.PodTemplateSpec {
	grace := int64(30)
	return &v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:                     "nginx",
				Image:                    "nginx",
				Resources:                v1.ResourceRequirements{},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				ImagePullPolicy:          v1.PullAlways,
			}},
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     v1.DNSClusterFirst,
			SecurityContext:               &v1.PodSecurityContext{},
			SchedulerName:                 v1.DefaultSchedulerName,
		},
	}
}

func TestComputeHashGolden(t *testing.T) {
	if got, want := ComputeHash(webTemplate(), nil), "5fc9f4bf66"; got != want {
		t.Fatalf("ComputeHash(web) = %q, want %q (upstream v1.37.2)", got, want)
	}
}

func TestComputeHashCollisionCount(t *testing.T) {
	tmpl := webTemplate()
	base := ComputeHash(tmpl, nil)
	seen := map[string]bool{base: true}
	for i := int32(0); i < 5; i++ {
		c := i
		h := ComputeHash(tmpl, &c)
		if seen[h] {
			t.Fatalf("collisionCount %d gave repeated hash %q", i, h)
		}
		seen[h] = true
		if again := ComputeHash(tmpl, &c); again != h {
			t.Fatalf("hash not stable: %q vs %q", h, again)
		}
	}
}

func TestComputeHashIgnoresPointerIdentity(t *testing.T) {
	a, b := webTemplate(), webTemplate()
	if ComputeHash(a, nil) != ComputeHash(b, nil) {
		t.Fatal("equal templates at different addresses hash differently")
	}
	b.Spec.Containers[0].Image = "nginx:1.27"
	if ComputeHash(a, nil) == ComputeHash(b, nil) {
		t.Fatal("different templates hash the same")
	}
}
