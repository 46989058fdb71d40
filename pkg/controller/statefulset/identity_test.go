package statefulset

import (
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestParentAndOrdinal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent string
		ord    int
	}{
		{"web-0", "web", 0},
		{"web-12", "web", 12},
		{"my-db-3", "my-db", 3},
		{"web", "", -1},
		{"web-", "", -1},
		{"web-x", "", -1},
		{"web-99999999999", "web", -1},
		{"-4", "", 4},
	} {
		parent, ord := parentAndOrdinal(tc.name)
		if parent != tc.parent || ord != tc.ord {
			t.Errorf("%s: got (%q, %d), want (%q, %d)", tc.name, parent, ord, tc.parent, tc.ord)
		}
	}
}

func TestNewStatefulSetPod(t *testing.T) {
	set := newSet("web", 3)
	set.Spec.Ordinals = &apps.StatefulSetOrdinals{Start: 5}
	pod := newVersionedPod(set, set, "web-cur", "web-upd", 6)

	if pod.Name != "web-6" || pod.Namespace != testNS || pod.GenerateName != "web-" {
		t.Errorf("name %s/%s generateName %q", pod.Namespace, pod.Name, pod.GenerateName)
	}
	want := map[string]string{
		"app":                                "foo",
		"statefulset.kubernetes.io/pod-name": "web-6",
		"apps.kubernetes.io/pod-index":       "6",
		"controller-revision-hash":           "web-upd",
	}
	for k, v := range want {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Spec.Hostname != "web-6" || pod.Spec.Subdomain != "governing" {
		t.Errorf("hostname %q subdomain %q", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" || ref.Name != "web" || ref.UID != set.UID || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref %+v", ref)
	}
	// Claim volumes first (template order), then the template's own volumes.
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].Name != "datadir" ||
		pod.Spec.Volumes[0].PersistentVolumeClaim == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "datadir-web-6" ||
		pod.Spec.Volumes[1].Name != "home" {
		t.Errorf("volumes %+v", pod.Spec.Volumes)
	}
	if set.Spec.Template.Labels["statefulset.kubernetes.io/pod-name"] != "" || len(set.Spec.Template.Spec.Volumes) != 1 {
		t.Error("the template was modified")
	}
	if !identityMatches(set, pod) || !storageMatches(set, pod) {
		t.Error("a new pod must match its identity and storage")
	}
}

func TestNewVersionedPodRevision(t *testing.T) {
	current := newSet("web", 5)
	update := newSet("web", 5)
	update.Spec.Template.Spec.Containers[0].Image = "nginx:2"

	current.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](3)
	for ord, want := range map[int]string{0: "cur", 2: "cur", 3: "upd", 4: "upd"} {
		pod := newVersionedPod(current, update, "cur", "upd", ord)
		if getPodRevision(pod) != want {
			t.Errorf("partition 3, ordinal %d: revision %s, want %s", ord, getPodRevision(pod), want)
		}
		if img := pod.Spec.Containers[0].Image; (want == "upd") != (img == "nginx:2") {
			t.Errorf("ordinal %d at %s has image %s", ord, want, img)
		}
	}

	// Without a rollingUpdate block, the first currentReplicas stay current.
	current.Spec.UpdateStrategy.RollingUpdate = nil
	current.Status.CurrentReplicas = 2
	if getPodRevision(newVersionedPod(current, update, "cur", "upd", 1)) != "cur" ||
		getPodRevision(newVersionedPod(current, update, "cur", "upd", 2)) != "upd" {
		t.Error("currentReplicas rule")
	}

	// OnDelete: new pods always get the update revision.
	current.Spec.UpdateStrategy = apps.StatefulSetUpdateStrategy{Type: apps.OnDeleteStatefulSetStrategyType}
	if getPodRevision(newVersionedPod(current, update, "cur", "upd", 0)) != "upd" {
		t.Error("OnDelete")
	}
}

func TestClaimsFor(t *testing.T) {
	set := newSet("web", 1)
	set.Spec.VolumeClaimTemplates = append(set.Spec.VolumeClaimTemplates, v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "logs"}})
	claims := claimsFor(set, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2"}})
	if len(claims) != 2 || claims[0].Name != "datadir-web-2" || claims[1].Name != "logs-web-2" {
		t.Fatalf("claims %v", claims)
	}
	if claims[0].Namespace != testNS || claims[0].Labels["tier"] != "db" || claims[0].Labels["app"] != "foo" {
		t.Errorf("claim 0 %s/%s labels %v", claims[0].Namespace, claims[0].Name, claims[0].Labels)
	}
	if len(claims[1].Labels) != 1 || claims[1].Labels["app"] != "foo" {
		t.Errorf("claim 1 labels %v", claims[1].Labels)
	}
	claims[1].Labels["x"] = "y"
	if set.Spec.Selector.MatchLabels["x"] != "" || set.Spec.VolumeClaimTemplates[0].Labels["app"] != "" {
		t.Error("selector or template shared with the claims")
	}
}

func TestIdentityAndStorageMatches(t *testing.T) {
	set := newSet("web", 3)
	good := newStatefulSetPod(set, 1)
	for name, tc := range map[string]struct {
		edit     func(*v1.Pod)
		identity bool
		storage  bool
	}{
		"good":          {func(*v1.Pod) {}, true, true},
		"other set":     {func(p *v1.Pod) { p.Name = "db-1" }, false, true},
		"namespace":     {func(p *v1.Pod) { p.Namespace = "other" }, false, true},
		"label missing": {func(p *v1.Pod) { delete(p.Labels, apps.StatefulSetPodNameLabel) }, false, true},
		"no ordinal":    {func(p *v1.Pod) { p.Name = "web" }, false, false},
		"wrong claim":   {func(p *v1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "x" }, true, false},
		"volume not a claim": {func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
		}, true, false},
		"volume missing": {func(p *v1.Pod) { p.Spec.Volumes = p.Spec.Volumes[1:] }, true, false},
	} {
		pod := good.DeepCopy()
		tc.edit(pod)
		if got := identityMatches(set, pod); got != tc.identity {
			t.Errorf("%s: identityMatches = %v", name, got)
		}
		if got := storageMatches(set, pod); got != tc.storage {
			t.Errorf("%s: storageMatches = %v", name, got)
		}
	}

	// updateIdentity and updateStorage repair what they can.
	pod := good.DeepCopy()
	delete(pod.Labels, apps.StatefulSetPodNameLabel)
	pod.Spec.Volumes[0].VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
	updateIdentity(set, pod)
	updateStorage(set, pod)
	if !identityMatches(set, pod) || !storageMatches(set, pod) || len(pod.Spec.Volumes) != 2 {
		t.Errorf("not repaired: %+v", pod.Spec.Volumes)
	}
}

func TestOrdinalRange(t *testing.T) {
	set := newSet("web", 3)
	set.Spec.Ordinals = &apps.StatefulSetOrdinals{Start: 2}
	for name, want := range map[string]bool{"web-1": false, "web-2": true, "web-4": true, "web-5": false} {
		if got := inOrdinalRange(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, set); got != want {
			t.Errorf("%s in range = %v", name, got)
		}
	}
}
