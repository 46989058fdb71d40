package statefulset

import (
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// defaultedSet is upstreamSet with a template touching most defaulted
// fields, as a v1.37 API server stores it.
func defaultedSet() *apps.StatefulSet {
	set := upstreamSet()
	spec := &set.Spec.Template.Spec
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "db", "db"
	c := &spec.Containers[0]
	c.Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}
	c.Env = []v1.EnvVar{{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}}
	c.ReadinessProbe = &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	c.LivenessProbe = &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 90, Service: ptr.To("")}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
	spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data", Type: ptr.To(v1.HostPathUnset)}}},
		{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}, DefaultMode: ptr.To[int32](0o644)}}},
		{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
		}}}},
	}
	return set
}

// stripDefaults removes what defaulting adds, as an older release that
// did not default these fields would have stored the template.
func stripDefaults(set *apps.StatefulSet) *apps.StatefulSet {
	old := set.DeepCopy()
	spec := &old.Spec.Template.Spec
	spec.DeprecatedServiceAccount = ""
	spec.DNSPolicy, spec.RestartPolicy, spec.SchedulerName = "", "", ""
	spec.SecurityContext, spec.TerminationGracePeriodSeconds = nil, nil
	c := &spec.Containers[0]
	c.ImagePullPolicy, c.TerminationMessagePath, c.TerminationMessagePolicy = "", "", ""
	c.Ports[0].Protocol = ""
	c.Env[0].ValueFrom.FieldRef.APIVersion = ""
	c.ReadinessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Scheme = "", ""
	c.ReadinessProbe.TimeoutSeconds, c.ReadinessProbe.PeriodSeconds = 0, 0
	c.ReadinessProbe.SuccessThreshold, c.ReadinessProbe.FailureThreshold = 0, 0
	c.LivenessProbe.GRPC.Service = nil
	c.LivenessProbe.TimeoutSeconds, c.LivenessProbe.PeriodSeconds = 0, 0
	c.LivenessProbe.SuccessThreshold, c.LivenessProbe.FailureThreshold = 0, 0
	c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.0999")}
	spec.Volumes[0].VolumeSource = v1.VolumeSource{}
	spec.Volumes[1].HostPath.Type = nil
	spec.Volumes[2].ConfigMap.DefaultMode = nil
	spec.Volumes[3].Projected.DefaultMode = nil
	spec.Volumes[3].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = nil
	return old
}

func TestDefaultTemplateRestoresToday(t *testing.T) {
	want := defaultedSet()
	got := stripDefaults(want)
	if equality.Semantic.DeepEqual(got.Spec.Template, want.Spec.Template) {
		t.Fatal("stripDefaults changed nothing")
	}
	defaultTemplate(&got.Spec.Template)
	if !equality.Semantic.DeepEqual(got.Spec.Template, want.Spec.Template) {
		t.Errorf("defaulted template differs:\ngot  %+v\nwant %+v", got.Spec.Template.Spec, want.Spec.Template.Spec)
	}
	// Defaulting twice changes nothing more.
	again := got.DeepCopy()
	defaultTemplate(&again.Spec.Template)
	if !equality.Semantic.DeepEqual(got, again) {
		t.Error("defaulting is not idempotent")
	}
}

// A revision an older release wrote, whose template lacks fields the API
// server defaults today, still matches the set: no revision is created and
// so no pod is rolled.
func TestRevisionFromOlderReleaseIsReused(t *testing.T) {
	set := defaultedSet()
	data, err := revisionPatch(stripDefaults(set))
	if err != nil {
		t.Fatal(err)
	}
	current, err := revisionPatch(set)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) == string(current) {
		t.Fatal("old revision's data equals today's; the test proves nothing")
	}
	old := upstreamRevision("test-5d8f7b9c6", string(data), 1)
	set.Status.CurrentRevision, set.Status.UpdateRevision = old.Name, old.Name
	f := newFixture(t, set)
	if err := f.revIdx.Add(old); err != nil {
		t.Fatal(err)
	}
	cur, upd, _, err := f.ssc.control.revisionsFor(f.ctx, set, []*apps.ControllerRevision{old})
	if err != nil {
		t.Fatal(err)
	}
	if cur != old || upd != old {
		t.Errorf("current %s update %s, want %s for both", cur.Name, upd.Name, old.Name)
	}
	if n := len(f.revIdx.List()); n != 1 {
		t.Errorf("%d revisions stored, want 1", n)
	}

	// Positive control: a real template change still makes a revision.
	changed := set.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "test:2"
	changed.Generation++
	_, upd, _, err = f.ssc.control.revisionsFor(f.ctx, changed, []*apps.ControllerRevision{old})
	if err != nil {
		t.Fatal(err)
	}
	if upd == old {
		t.Error("a changed image reused the old revision")
	}
}

func TestPullPolicyFor(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"nginx":                          v1.PullAlways,
		"nginx:latest":                   v1.PullAlways,
		"nginx:1.27":                     v1.PullIfNotPresent,
		"registry.local:5000/team/app":   v1.PullAlways,
		"registry.local:5000/team/app:v": v1.PullIfNotPresent,
		"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef":        v1.PullIfNotPresent,
		"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": v1.PullAlways,
		"Registry.Example.com/app": v1.PullAlways,
		"UPPER/app":                v1.PullAlways,
		"app/UPPER":                v1.PullIfNotPresent,
		"":                         v1.PullIfNotPresent,
		"bad image":                v1.PullIfNotPresent,
		"[::1]:5000/app:latest":    v1.PullAlways,
	} {
		if got := pullPolicyFor(image); got != want {
			t.Errorf("pullPolicyFor(%q) = %s, want %s", image, got, want)
		}
	}
}
