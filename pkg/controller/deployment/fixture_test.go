package deployment

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// webTemplate is `kubectl create deployment web --image=nginx` after
// apiserver defaulting.
func webTemplate(image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:                     "nginx",
				Image:                    image,
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				ImagePullPolicy:          v1.PullAlways,
			}},
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     v1.DNSClusterFirst,
			SecurityContext:               &v1.PodSecurityContext{},
			SchedulerName:                 v1.DefaultSchedulerName,
		},
	}
}

// newDeployment is a defaulted apps/v1 Deployment named web.
func newDeployment(replicas int32) *apps.Deployment {
	surge, unavailable := intstr.FromString("25%"), intstr.FromString("25%")
	return &apps.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "default", UID: "d-uid",
			Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"app": "web"},
		},
		Spec: apps.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate("nginx"),
			Strategy: apps.DeploymentStrategy{
				Type:          apps.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &apps.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// ownedRS is a ReplicaSet d made for template, with replicas all available.
func ownedRS(d *apps.Deployment, template v1.PodTemplateSpec, replicas int32, revision int, created time.Time) *apps.ReplicaSet {
	hash := util.ComputeHash(&template, nil)
	template = *template.DeepCopy()
	template.Labels = withLabel(template.Labels, apps.DefaultDeploymentUniqueLabelKey, hash)
	return &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, UID: types.UID("rs-" + hash),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            template.Labels,
			Annotations: map[string]string{
				util.RevisionAnnotation:        fmt.Sprint(revision),
				util.DesiredReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas),
				util.MaxReplicasAnnotation:     fmt.Sprint(*d.Spec.Replicas + util.MaxSurge(*d)),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
			Generation:      1,
		},
		Spec: apps.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: selectorWithLabel(d.Spec.Selector, apps.DefaultDeploymentUniqueLabelKey, hash),
			Template: template,
		},
		Status: apps.ReplicaSetStatus{
			Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			FullyLabeledReplicas: replicas, ObservedGeneration: 1, TerminatingReplicas: ptr.To[int32](0),
		},
	}
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	dc       *Controller
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
	factory  informers.SharedInformerFactory
}

// newFixture builds a controller whose caches and fake apiserver hold objs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	dc, err := NewController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, Features{TerminatingReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, client: client, dc: dc, recorder: record.NewFakeRecorder(100), clock: testingclock.NewFakeClock(t0), factory: factory}
	dc.eventRecorder = f.recorder
	dc.clock = f.clock
	t.Cleanup(dc.queue.ShutDown)
	for _, o := range objs {
		f.addToCache(o)
	}
	return f
}

func (f *fixture) addToCache(o runtime.Object) {
	f.t.Helper()
	testutil.AddToInformers(f.t, f.factory, o)
}

// sync runs one pass and returns the write actions it made.
func (f *fixture) sync(d *apps.Deployment) ([]core.Action, error) {
	f.client.ClearActions()
	err := f.dc.syncDeployment(f.ctx, d.Namespace+"/"+d.Name)
	return writes(f.client.Actions()), err
}

func (f *fixture) mustSync(d *apps.Deployment) []core.Action {
	f.t.Helper()
	acts, err := f.sync(d)
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return acts
}

// writes drops reads (get/list/watch).
func writes(actions []core.Action) []core.Action {
	return testutil.WriteActions(actions)
}

func describe(actions []core.Action) string {
	return strings.Join(testutil.Describe(actions), ", ")
}

func statusUpdates(actions []core.Action) []*apps.Deployment {
	var out []*apps.Deployment
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetResource().Resource == "deployments" && a.GetSubresource() == "status" {
			out = append(out, a.(core.UpdateAction).GetObject().(*apps.Deployment))
		}
	}
	return out
}

func rsUpdates(actions []core.Action) map[string]*apps.ReplicaSet {
	out := map[string]*apps.ReplicaSet{}
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetResource().Resource == "replicasets" {
			rs := a.(core.UpdateAction).GetObject().(*apps.ReplicaSet)
			out[rs.Name] = rs
		}
	}
	return out
}

func rsCreates(actions []core.Action) []*apps.ReplicaSet {
	var out []*apps.ReplicaSet
	for _, a := range actions {
		if a.GetVerb() == "create" && a.GetResource().Resource == "replicasets" {
			out = append(out, a.(core.CreateAction).GetObject().(*apps.ReplicaSet))
		}
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func expectCondition(t *testing.T, s apps.DeploymentStatus, condType apps.DeploymentConditionType, status v1.ConditionStatus, reason, msg string) {
	t.Helper()
	c := util.GetDeploymentCondition(s, condType)
	if c == nil {
		t.Fatalf("no %s condition in %+v", condType, s.Conditions)
	}
	if c.Status != status || c.Reason != reason || (msg != "" && c.Message != msg) {
		t.Fatalf("%s condition = %s/%s %q, want %s/%s %q", condType, c.Status, c.Reason, c.Message, status, reason, msg)
	}
}

func klogFrom(f *fixture) klog.Logger { return klog.FromContext(f.ctx) }

// settle plays the ReplicaSet controller and kubelet: every ReplicaSet in
// the fake apiserver gets status.replicas = spec.replicas with available(rs)
// of them ready and available; ReplicaSets and the Deployment are then
// copied into the caches. It returns the fresh Deployment.
func (f *fixture) settle(available func(rs *apps.ReplicaSet) int32) *apps.Deployment {
	f.t.Helper()
	return f.settleWithTerminating(available, 0)
}

// settleWithTerminating is settle with terminating pods counted in every
// ReplicaSet's status, as after an eviction.
func (f *fixture) settleWithTerminating(available func(rs *apps.ReplicaSet) int32, terminating int32) *apps.Deployment {
	f.t.Helper()
	list, err := f.client.AppsV1().ReplicaSets("default").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.Items {
		rs := &list.Items[i]
		n := *rs.Spec.Replicas
		a := min(available(rs), n)
		rs.Status = apps.ReplicaSetStatus{Replicas: n, FullyLabeledReplicas: n, ReadyReplicas: a, AvailableReplicas: a, ObservedGeneration: rs.Generation, TerminatingReplicas: ptr.To(terminating)}
		if _, err := f.client.AppsV1().ReplicaSets("default").UpdateStatus(f.ctx, rs, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		f.addToCache(rs)
	}
	return f.refreshDeployment()
}

func (f *fixture) refreshDeployment() *apps.Deployment {
	f.t.Helper()
	d, err := f.client.AppsV1().Deployments("default").Get(f.ctx, "web", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.addToCache(d)
	return d
}

func (f *fixture) replicaSets() map[string]*apps.ReplicaSet {
	f.t.Helper()
	list, err := f.client.AppsV1().ReplicaSets("default").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*apps.ReplicaSet{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}
