package controller

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func testTemplate() *v1.PodTemplateSpec {
	return &v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "a"},
			Annotations: map[string]string{"note": "x"},
			Finalizers:  []string{"example.com/f"},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
}

func nextEvent(t *testing.T, r *record.FakeRecorder) string {
	t.Helper()
	select {
	case e := <-r.Events:
		return e
	default:
		t.Fatal("no event recorded")
		return ""
	}
}

// nameGenerator makes the fake clientset honour generateName.
func nameGenerator(client *fake.Clientset) {
	n := 0
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		if p.Name == "" {
			n++
			p.Name = p.GenerateName + strconv.Itoa(n)
		}
		return false, nil, nil
	})
}

func TestRealPodControlCreate(t *testing.T) {
	client := fake.NewClientset()
	nameGenerator(client)
	rec := record.NewFakeRecorder(10)
	var wrote []string
	pc := RealPodControl{KubeClient: client, Recorder: rec, OnWrite: func(p *v1.Pod, ref *metav1.OwnerReference) { wrote = append(wrote, ref.Name) }}
	rs := testRS("web", "rs-uid")
	ref := metav1.NewControllerRef(rs, rsKind)

	if err := pc.CreatePods(context.Background(), "ns", testTemplate(), rs, ref); err != nil {
		t.Fatal(err)
	}
	pods, _ := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 {
		t.Fatalf("pods = %d", len(pods.Items))
	}
	p := pods.Items[0]
	if p.GenerateName != "web-" || p.Labels["app"] != "a" || p.Annotations["note"] != "x" || len(p.Finalizers) != 1 {
		t.Fatalf("pod meta = %+v", p.ObjectMeta)
	}
	if len(p.OwnerReferences) != 1 || !reflect.DeepEqual(p.OwnerReferences[0], *ref) {
		t.Fatalf("owner refs = %+v", p.OwnerReferences)
	}
	if got := nextEvent(t, rec); !strings.HasPrefix(got, "Normal SuccessfulCreate Created pod: ") {
		t.Fatalf("event %q", got)
	}
	if len(wrote) != 1 || wrote[0] != "web" {
		t.Fatalf("OnWrite calls %v", wrote)
	}

	if err := pc.CreatePodsWithGenerateName(context.Background(), "ns", testTemplate(), rs, ref, "custom-"); err != nil {
		t.Fatal(err)
	}
	acts := client.Actions()
	created := acts[len(acts)-1].(clienttesting.CreateAction).GetObject().(*v1.Pod)
	if created.GenerateName != "custom-" {
		t.Fatalf("generateName %q", created.GenerateName)
	}
}

func TestRealPodControlCreateFailures(t *testing.T) {
	rs := testRS("web", "rs-uid")
	ref := metav1.NewControllerRef(rs, rsKind)

	client := fake.NewClientset()
	client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "", errors.New(`exceeded quota: q`))
	})
	rec := record.NewFakeRecorder(10)
	pc := RealPodControl{KubeClient: client, Recorder: rec}
	if err := pc.CreatePods(context.Background(), "ns", testTemplate(), rs, ref); err == nil {
		t.Fatal("want error")
	}
	if got := nextEvent(t, rec); !strings.HasPrefix(got, "Warning FailedCreate Error creating: ") || !strings.Contains(got, "exceeded quota") {
		t.Fatalf("event %q", got)
	}

	// Namespace being deleted: error, but no event.
	client = fake.NewClientset()
	client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(v1.Resource("pods"), "", errors.New("terminating"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}
		return true, nil, err
	})
	rec = record.NewFakeRecorder(10)
	pc = RealPodControl{KubeClient: client, Recorder: rec}
	if err := pc.CreatePods(context.Background(), "ns", testTemplate(), rs, ref); err == nil {
		t.Fatal("want error")
	}
	if len(rec.Events) != 0 {
		t.Fatalf("unexpected event %q", <-rec.Events)
	}

	// Bad controllerRef and label-less templates are refused before any call.
	client = fake.NewClientset()
	pc = RealPodControl{KubeClient: client, Recorder: record.NewFakeRecorder(10)}
	bad := ref.DeepCopy()
	bad.BlockOwnerDeletion = nil
	if err := pc.CreatePods(context.Background(), "ns", testTemplate(), rs, bad); err == nil {
		t.Fatal("want error for ref without blockOwnerDeletion")
	}
	noLabels := testTemplate()
	noLabels.Labels = nil
	if err := pc.CreatePods(context.Background(), "ns", noLabels, rs, ref); err == nil {
		t.Fatal("want error for template without labels")
	}
	if len(client.Actions()) != 0 {
		t.Fatalf("unexpected calls %v", client.Actions())
	}
}

func TestRealPodControlDelete(t *testing.T) {
	rs := testRS("web", "rs-uid")
	client := fake.NewClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns"}})
	rec := record.NewFakeRecorder(10)
	pc := RealPodControl{KubeClient: client, Recorder: rec}
	if err := pc.DeletePod(context.Background(), "ns", "p1", rs); err != nil {
		t.Fatal(err)
	}
	if got := nextEvent(t, rec); got != "Normal SuccessfulDelete Deleted pod: p1" {
		t.Fatalf("event %q", got)
	}
	err := pc.DeletePod(context.Background(), "ns", "p1", rs)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("want NotFound, got %v", err)
	}
	if len(rec.Events) != 0 {
		t.Fatal("NotFound must not record an event")
	}
	client.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	if err := pc.DeletePod(context.Background(), "ns", "p2", rs); err == nil {
		t.Fatal("want error")
	}
	if got := nextEvent(t, rec); got != "Warning FailedDelete Error deleting: boom" {
		t.Fatalf("event %q", got)
	}
}

func TestPodNamePrefix(t *testing.T) {
	if got := podNamePrefix("web"); got != "web-" {
		t.Fatalf("got %q", got)
	}
	// Names that can't take a dash are used as they are.
	if got := podNamePrefix("Web"); got != "Web" {
		t.Fatalf("got %q", got)
	}
}

// The fake tests use must stay a PodControlInterface; it lives in testutil,
// which cannot import this package, so the check is here.
var _ PodControlInterface = &testutil.FakePodControl{}
