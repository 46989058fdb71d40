package evaluator

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func container(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func podWith(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: containers}}
}

func TestPodUsage(t *testing.T) {
	sidecar := container("sidecar", rl("cpu", "100m"), nil)
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)

	cases := map[string]struct {
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		"requests and limits summed over containers": {
			pod: podWith(
				container("a", rl("cpu", "100m", "memory", "1Gi", "ephemeral-storage", "1Gi"), rl("cpu", "200m", "memory", "2Gi", "ephemeral-storage", "2Gi")),
				container("b", rl("cpu", "300m", "memory", "1Gi"), rl("cpu", "300m")),
			),
			want: rl("count/pods", "1", "pods", "1",
				"cpu", "400m", "requests.cpu", "400m", "limits.cpu", "500m",
				"memory", "2Gi", "requests.memory", "2Gi", "limits.memory", "2Gi",
				"ephemeral-storage", "1Gi", "requests.ephemeral-storage", "1Gi", "limits.ephemeral-storage", "2Gi"),
		},
		"a best-effort pod still counts as a pod": {
			pod:  podWith(container("a", nil, nil)),
			want: rl("count/pods", "1", "pods", "1"),
		},
		"an init container larger than the containers sets the request": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "100m"), nil), container("b", rl("cpu", "200m"), nil))
				p.Spec.InitContainers = []corev1.Container{container("init", rl("cpu", "1"), nil)}
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1"),
		},
		"sidecars run next to containers and to later init containers": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "200m"), nil))
				// sidecar + a = 300m; init-after + sidecar = 600m.
				p.Spec.InitContainers = []corev1.Container{sidecar, container("init-after", rl("cpu", "500m"), nil)}
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "600m", "requests.cpu", "600m"),
		},
		"overhead adds to requests, and only to limits that are set": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "100m", "memory", "100Mi"), rl("cpu", "200m")))
				p.Spec.Overhead = rl("cpu", "10m", "memory", "10Mi")
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "110m", "requests.cpu", "110m", "limits.cpu", "210m",
				"memory", "110Mi", "requests.memory", "110Mi"),
		},
		"hugepages and extended resources": {
			pod: podWith(container("a", rl("hugepages-2Mi", "4Mi", "example.com/gpu", "2", "deviceclass.resource.kubernetes.io/fast", "1"),
				rl("hugepages-2Mi", "4Mi", "example.com/gpu", "2"))),
			want: rl("count/pods", "1", "pods", "1", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi",
				"requests.example.com/gpu", "2", "requests.deviceclass.resource.kubernetes.io/fast", "1"),
		},
		"pod-level resources override the containers' sum": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "100m", "memory", "1Gi"), nil), container("b", rl("cpu", "100m"), nil))
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "2", "memory", "4Gi")}
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1", "limits.cpu", "2",
				"memory", "1Gi", "requests.memory", "1Gi", "limits.memory", "4Gi"),
		},
		"a resize in progress is charged the larger of spec and status": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "1"), rl("cpu", "1")))
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a",
					AllocatedResources: rl("cpu", "1500m"),
					Resources:          &corev1.ResourceRequirements{Requests: rl("cpu", "2"), Limits: rl("cpu", "3")}}}
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "2", "requests.cpu", "2", "limits.cpu", "3"),
		},
		"an infeasible resize is charged what the pod has, not its spec": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "4"), rl("cpu", "4")))
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a",
					AllocatedResources: rl("cpu", "1"),
					Resources:          &corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "1")}}}
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1", "limits.cpu", "1"),
		},
		"a resized sidecar is charged from its init container status": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "100m"), nil))
				p.Spec.InitContainers = []corev1.Container{sidecar}
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar",
					Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "400m")}}}
				return p
			}(),
			want: rl("count/pods", "1", "pods", "1", "cpu", "500m", "requests.cpu", "500m"),
		},
		"a succeeded pod is only counted as an object": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "1"), nil))
				p.Status.Phase = corev1.PodSucceeded
				return p
			}(),
			want: rl("count/pods", "1"),
		},
		"a failed pod is only counted as an object": {
			pod: func() *corev1.Pod {
				p := podWith(container("a", rl("cpu", "1"), nil))
				p.Status.Phase = corev1.PodFailed
				return p
			}(),
			want: rl("count/pods", "1"),
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := PodUsage(c.pod, clock.RealClock{}, v137Features)
			if err != nil {
				t.Fatal(err)
			}
			expectList(t, "usage", got, c.want)
		})
	}
}

func TestPodUsageAfterGracePeriod(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	pod := podWith(container("a", rl("cpu", "1"), nil))
	pod.DeletionTimestamp = &metav1.Time{Time: now.Add(-20 * time.Second)}
	pod.DeletionGracePeriodSeconds = ptr.To[int64](30)

	got, _ := PodUsage(pod, clk, v137Features)
	expectList(t, "within grace", got, rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1"))

	// A pod stuck terminating (lost node) must not hold quota.
	clk.Step(11 * time.Second)
	got, _ = PodUsage(pod, clk, v137Features)
	expectList(t, "past grace", got, rl("count/pods", "1"))
}

func TestPodMatchingResources(t *testing.T) {
	e := NewPodEvaluator(nil, clock.RealClock{}, v137Features)
	in := names("pods", "count/pods", "requests.cpu", "limits.memory", "cpu", "requests.ephemeral-storage",
		"hugepages-1Gi", "requests.hugepages-2Mi", "requests.example.com/gpu", "requests.deviceclass.resource.kubernetes.io/fast",
		"example.com/gpu", "requests.kubernetes.io/native", "services", "count/deployments.apps")
	got := e.MatchingResources(in)
	want := names("count/pods", "cpu", "limits.memory", "pods", "requests.cpu", "requests.ephemeral-storage",
		"hugepages-1Gi", "requests.hugepages-2Mi", "requests.example.com/gpu", "requests.deviceclass.resource.kubernetes.io/fast")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MatchingResources = %v\nwant %v", got, want)
	}
}

func TestPodMatchesScope(t *testing.T) {
	bestEffort := podWith(container("a", nil, nil))
	burstable := podWith(container("a", rl("cpu", "1"), nil))
	terminating := podWith(container("a", nil, nil))
	terminating.Spec.ActiveDeadlineSeconds = ptr.To[int64](0)
	high := podWith(container("a", nil, nil))
	high.Spec.PriorityClassName = "high"
	crossNS := podWith(container("a", nil, nil))
	crossNS.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{PodAffinityTerm: corev1.PodAffinityTerm{NamespaceSelector: &metav1.LabelSelector{}}}}}}
	sameNS := podWith(container("a", nil, nil))
	sameNS.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone"}}}}
	crossNSRequired := podWith(container("a", nil, nil))
	crossNSRequired.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{Namespaces: []string{"other"}}}}}

	exists := func(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}
	}
	priority := func(op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: values}
	}
	cases := []struct {
		name string
		sel  corev1.ScopedResourceSelectorRequirement
		pod  *corev1.Pod
		want bool
	}{
		{"BestEffort/best-effort", exists(corev1.ResourceQuotaScopeBestEffort), bestEffort, true},
		{"BestEffort/burstable", exists(corev1.ResourceQuotaScopeBestEffort), burstable, false},
		{"NotBestEffort/burstable", exists(corev1.ResourceQuotaScopeNotBestEffort), burstable, true},
		{"NotBestEffort/best-effort", exists(corev1.ResourceQuotaScopeNotBestEffort), bestEffort, false},
		{"Terminating/deadline", exists(corev1.ResourceQuotaScopeTerminating), terminating, true},
		{"Terminating/no deadline", exists(corev1.ResourceQuotaScopeTerminating), bestEffort, false},
		{"NotTerminating/no deadline", exists(corev1.ResourceQuotaScopeNotTerminating), bestEffort, true},
		{"NotTerminating/deadline", exists(corev1.ResourceQuotaScopeNotTerminating), terminating, false},
		{"PriorityClass Exists/set", priority(corev1.ScopeSelectorOpExists), high, true},
		{"PriorityClass Exists/unset", priority(corev1.ScopeSelectorOpExists), bestEffort, false},
		{"PriorityClass In/match", priority(corev1.ScopeSelectorOpIn, "low", "high"), high, true},
		{"PriorityClass In/other", priority(corev1.ScopeSelectorOpIn, "low"), high, false},
		{"PriorityClass In/unset", priority(corev1.ScopeSelectorOpIn, "high"), bestEffort, false},
		{"PriorityClass NotIn/other", priority(corev1.ScopeSelectorOpNotIn, "low"), high, true},
		{"PriorityClass NotIn/match", priority(corev1.ScopeSelectorOpNotIn, "high"), high, false},
		{"PriorityClass NotIn/unset", priority(corev1.ScopeSelectorOpNotIn, "high"), bestEffort, true},
		{"PriorityClass DoesNotExist/unset", priority(corev1.ScopeSelectorOpDoesNotExist), bestEffort, true},
		{"PriorityClass DoesNotExist/set", priority(corev1.ScopeSelectorOpDoesNotExist), high, false},
		{"CrossNamespacePodAffinity/anti-affinity namespace selector", exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), crossNS, true},
		{"CrossNamespacePodAffinity/affinity namespaces", exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), crossNSRequired, true},
		{"CrossNamespacePodAffinity/same namespace", exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), sameNS, false},
		{"CrossNamespacePodAffinity/no affinity", exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity), bestEffort, false},
		{"VolumeAttributesClass never matches pods", exists(corev1.ResourceQuotaScopeVolumeAttributesClass), bestEffort, false},
	}
	for _, c := range cases {
		got, err := podMatchesScope(c.sel, c.pod, v137Features)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: matches = %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := podMatchesScope(priority("Bogus", "x"), high, v137Features); err == nil {
		t.Error("invalid operator: no error")
	}
}

func TestPodQOS(t *testing.T) {
	guaranteed := container("g", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))
	cases := map[string]struct {
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		"no resources":          {podWith(container("a", nil, nil)), corev1.PodQOSBestEffort},
		"requests equal limits": {podWith(guaranteed), corev1.PodQOSGuaranteed},
		"requests only":         {podWith(container("a", rl("memory", "1Gi"), nil)), corev1.PodQOSBurstable},
		"cpu guaranteed only":   {podWith(container("a", rl("cpu", "1"), rl("cpu", "1"))), corev1.PodQOSBurstable},
		"guaranteed next to best effort": {
			podWith(guaranteed, container("b", nil, nil)), corev1.PodQOSBurstable,
		},
		"best-effort init container next to guaranteed": {
			func() *corev1.Pod {
				p := podWith(guaranteed)
				p.Spec.InitContainers = []corev1.Container{container("i", nil, nil)}
				return p
			}(), corev1.PodQOSBurstable,
		},
		"status wins": {
			func() *corev1.Pod {
				p := podWith(guaranteed)
				p.Status.QOSClass = corev1.PodQOSBestEffort
				return p
			}(), corev1.PodQOSBestEffort,
		},
		"pod-level resources decide": {
			func() *corev1.Pod {
				p := podWith(container("a", nil, nil))
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}
				return p
			}(), corev1.PodQOSGuaranteed,
		},
		"empty pod-level resources leave it to the containers": {
			func() *corev1.Pod {
				p := podWith(guaranteed)
				p.Spec.Resources = &corev1.ResourceRequirements{}
				return p
			}(), corev1.PodQOSGuaranteed,
		},
	}
	for name, c := range cases {
		if got := podQOS(c.pod, true, true); got != c.want {
			t.Errorf("%s: QoS = %s, want %s", name, got, c.want)
		}
	}
	// Without PodLevelResourcesFixKubeletQOSClass an empty pod-level
	// resources stanza still decides (and says BestEffort).
	p := podWith(guaranteed)
	p.Spec.Resources = &corev1.ResourceRequirements{}
	if got := podQOS(p, true, false); got != corev1.PodQOSBestEffort {
		t.Errorf("without the QoS fix: %s", got)
	}
	// With PodLevelResources off pod-level resources are ignored.
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
	if got := podQOS(p, false, true); got != corev1.PodQOSGuaranteed {
		t.Errorf("without pod-level resources: %s", got)
	}
}

func TestPodUsageStatsHonoursScopes(t *testing.T) {
	l := fakeListers{}
	done := podWith(container("a", rl("cpu", "1"), rl("cpu", "1")))
	done.Name, done.Status.Phase = "done", corev1.PodSucceeded
	be := podWith(container("a", nil, nil))
	be.Name = "be"
	burst := podWith(container("a", rl("cpu", "500m", "memory", "1Gi"), nil))
	burst.Name = "burst"
	l.add(t, podsGVR, done, be, burst)
	e := NewPodEvaluator(l.lister, clock.RealClock{}, v137Features)

	stats, err := e.UsageStats(UsageStatsOptions{Namespace: "ns", Resources: names("pods", "count/pods", "requests.cpu")})
	if err != nil {
		t.Fatal(err)
	}
	expectList(t, "all", stats.Used, rl("pods", "2", "count/pods", "3", "requests.cpu", "500m", "cpu", "500m",
		"memory", "1Gi", "requests.memory", "1Gi"))

	stats, _ = e.UsageStats(UsageStatsOptions{Namespace: "ns", Resources: names("pods"), Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}})
	// The succeeded pod is not best effort, the burstable one neither.
	expectList(t, "best effort", stats.Used, rl("pods", "1", "count/pods", "1"))
}

// v137Features are the v1.37 defaults of the gates the evaluators read.
var v137Features = Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true}
