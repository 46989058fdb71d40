package disruption

import (
	"errors"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// Each built-in finder accepts its kind only under the expected API groups,
// and only the incarnation the reference names.
func TestBuiltinFinders(t *testing.T) {
	f := newFixture(t)
	rs := newRS("rs", 10)
	rc := newRC("rc", 12)
	ss := newSS("ss", 14)
	d := newDeployment("d", 20)
	drs := rsOfDeployment("drs", 5, d)
	f.add(rs, rc, ss, d, drs)

	cases := []struct {
		name      string
		find      podControllerFinder
		ref       metav1.OwnerReference
		wantUID   types.UID
		wantScale int32
		wantErr   bool
	}{
		{name: "rs apps", find: f.dc.getPodReplicaSet, ref: ref("apps/v1", "ReplicaSet", rs), wantUID: rs.UID, wantScale: 10},
		{name: "rs extensions", find: f.dc.getPodReplicaSet, ref: ref("extensions/v1beta1", "ReplicaSet", rs), wantUID: rs.UID, wantScale: 10},
		{name: "rs other group", find: f.dc.getPodReplicaSet, ref: ref("invalid/v1", "ReplicaSet", rs)},
		{name: "rs other incarnation", find: f.dc.getPodReplicaSet, ref: metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "old"}},
		{name: "rs missing", find: f.dc.getPodReplicaSet, ref: metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "nope", UID: "x"}},
		{name: "rs of a deployment is left to the deployment finder", find: f.dc.getPodReplicaSet, ref: ref("apps/v1", "ReplicaSet", drs)},
		{name: "rs malformed apiVersion", find: f.dc.getPodReplicaSet, ref: ref("a/b/c", "ReplicaSet", rs), wantErr: true},
		{name: "rc core", find: f.dc.getPodReplicationController, ref: ref("v1", "ReplicationController", rc), wantUID: rc.UID, wantScale: 12},
		{name: "rc apps group", find: f.dc.getPodReplicationController, ref: ref("apps/v1", "ReplicationController", rc)},
		{name: "ss apps", find: f.dc.getPodStatefulSet, ref: ref("apps/v1", "StatefulSet", ss), wantUID: ss.UID, wantScale: 14},
		{name: "ss extensions", find: f.dc.getPodStatefulSet, ref: ref("extensions/v1beta1", "StatefulSet", ss)},
		{name: "ss wrong kind", find: f.dc.getPodStatefulSet, ref: ref("apps/v1", "ReplicaSet", ss)},
		{name: "deployment through its rs", find: f.dc.getPodDeployment, ref: ref("apps/v1", "ReplicaSet", drs), wantUID: d.UID, wantScale: 20},
		{name: "deployment finder ignores standalone rs", find: f.dc.getPodDeployment, ref: ref("apps/v1", "ReplicaSet", rs)},
		{name: "deployment finder wrong rs kind", find: f.dc.getPodDeployment, ref: ref("apps/v1", "Other", drs)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.find(f.ctx, &tc.ref, ns)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantUID == "" {
				if got != nil {
					t.Fatalf("found %+v, want nothing", got)
				}
				return
			}
			if got == nil || got.UID != tc.wantUID || got.scale != tc.wantScale {
				t.Fatalf("found %+v, want %s/%d", got, tc.wantUID, tc.wantScale)
			}
		})
	}
}

// The Deployment finder checks the Deployment reference of the ReplicaSet
// the same way.
func TestDeploymentFinderOwnerReference(t *testing.T) {
	cases := map[string]struct {
		apiVersion, kind string
		uid              types.UID
		found            bool
	}{
		"apps":        {apiVersion: "apps/v1", kind: "Deployment", uid: "uid-d", found: true},
		"extensions":  {apiVersion: "extensions/v1beta1", kind: "Deployment", uid: "uid-d", found: true},
		"other group": {apiVersion: "deployment/v1", kind: "Deployment", uid: "uid-d"},
		"other kind":  {apiVersion: "apps/v1", kind: "InvalidKind", uid: "uid-d"},
		"other uid":   {apiVersion: "apps/v1", kind: "Deployment", uid: "uid-old"},
		"malformed":   {apiVersion: "x/y/z", kind: "Deployment", uid: "uid-d"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			d := newDeployment("d", 10)
			rs := newRS("rs", 5)
			rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "d", UID: tc.uid, Controller: ptrTrue()}}
			f.add(d, rs)
			got, _ := f.dc.getPodDeployment(f.ctx, &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: rs.UID}, ns)
			if (got != nil) != tc.found {
				t.Fatalf("found %+v, want found=%v", got, tc.found)
			}
			if got != nil && (got.UID != d.UID || got.scale != 10) {
				t.Fatalf("found %+v", got)
			}
		})
	}
}

// When the scale subresource answers NotFound, discovery tells a missing
// object (no error) from a resource without a usable scale subresource.
func TestScaleFinderNotFound(t *testing.T) {
	cases := map[string]struct {
		resources []metav1.APIResource
		discErr   error
		wantErr   string
	}{
		"implements scale": {
			resources: []metav1.APIResource{
				{Name: "widgets", Kind: "Widget"},
				{Name: "widgets/status", Kind: "Widget"},
				{Name: "widgets/scale", Kind: "Scale", Group: "autoscaling", Version: "v1"},
			},
		},
		"scale subresource in an unknown format": {
			resources: []metav1.APIResource{{Name: "widgets", Kind: "Widget"}, {Name: "widgets/scale", Kind: "Widget"}},
			wantErr:   "widgets.example.com does not implement the scale subresource",
		},
		"no scale subresource": {
			resources: []metav1.APIResource{{Name: "widgets", Kind: "Widget"}},
			wantErr:   "widgets.example.com does not implement the scale subresource",
		},
		"discovery fails": {
			discErr: errors.New("discovery down"),
			wantErr: "discovery down",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.scale.AddReactor("get", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "w")
			})
			if tc.discErr != nil {
				f.disc.AddReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.discErr
				})
			}
			f.disc.Resources = []*metav1.APIResourceList{{GroupVersion: "example.com/v1", APIResources: tc.resources}}
			got, err := f.dc.getScaleController(f.ctx, &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "uid-w"}, ns)
			if got != nil {
				t.Fatalf("found %+v", got)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// Other scale errors and unmappable kinds are errors; a matching scale is
// returned with its UID and replicas.
func TestScaleFinder(t *testing.T) {
	f := newFixture(t)
	calls := 0
	f.scale.AddReactor("get", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		if a.(clienttesting.GetAction).GetName() == "broken" {
			return true, nil, apierrors.NewInternalError(errors.New("boom"))
		}
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "uid-w"}, Spec: autoscalingv1.ScaleSpec{Replicas: 7}}, nil
	})
	got, err := f.dc.getScaleController(f.ctx, &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "uid-w"}, ns)
	if err != nil || got == nil || got.UID != "uid-w" || got.scale != 7 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := f.dc.getScaleController(f.ctx, &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "broken", UID: "uid-w"}, ns); !apierrors.IsInternalError(err) {
		t.Fatalf("err = %v, want the scale error", err)
	}
	if _, err := f.dc.getScaleController(f.ctx, &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Gadget", Name: "g", UID: "uid-g"}, ns); err == nil {
		t.Fatal("unmappable kind: no error")
	}
	if calls != 2 {
		t.Fatalf("%d scale GETs, want 2 (none for an unmappable kind)", calls)
	}
}

// Built-in kinds are answered from the listers: no scale request.
func TestBuiltinKindsDoNotUseScaleClient(t *testing.T) {
	f := newFixture(t)
	rs := newRS("rs", 3)
	rc := newRC("rc", 2)
	ss := newSS("ss", 1)
	pods := []*v1.Pod{ownedBy(readyPod("a"), rsKind, rs), ownedBy(readyPod("b"), rcKind, rc), ownedBy(readyPod("c"), ssKind, ss)}
	f.add(rs, rc, ss)
	n, unmanaged, err := f.dc.getExpectedScale(f.ctx, pods)
	if err != nil || n != 6 || len(unmanaged) != 0 {
		t.Fatalf("getExpectedScale = %d, %v, %v", n, unmanaged, err)
	}
	if a := f.scale.Actions(); len(a) != 0 {
		t.Fatalf("scale client used: %v", a)
	}
}

func ref(apiVersion, kind string, obj metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: ptrTrue()}
}

func ptrTrue() *bool { return ptr.To(true) }
