package endpointslicemirroring

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

func TestShouldMirror(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		{name: "plain", want: true},
		{name: "skip-mirror true", labels: map[string]string{discovery.LabelSkipMirror: "true"}},
		{name: "skip-mirror other value", labels: map[string]string{discovery.LabelSkipMirror: "yes"}, want: true},
		{name: "leader election lock", annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := &endpoints{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
			if got := shouldMirror(ep); got != tc.want {
				t.Errorf("shouldMirror = %v, want %v", got, tc.want)
			}
		})
	}
	if shouldMirror(nil) {
		t.Error("nil Endpoints mirrored")
	}
}

func TestSlicePrefix(t *testing.T) {
	if got := esutil.SlicePrefix("web"); got != "web-" {
		t.Errorf("prefix %q", got)
	}
	// Validation of a prefix allows for the dash being replaced by the
	// generated suffix; a name already over the limit gets none.
	long := strings.Repeat("a", 254)
	if got := esutil.SlicePrefix(long); got != long {
		t.Errorf("prefix of a 254-char name is %d chars", len(got))
	}
}

func TestPortMapKeyIgnoresOrder(t *testing.T) {
	a := discovery.EndpointPort{Name: ptr.To("a"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}
	b := discovery.EndpointPort{Name: ptr.To("b"), Port: ptr.To[int32](90), Protocol: ptr.To(v1.ProtocolTCP)}
	ab := []discovery.EndpointPort{a, b}
	ba := []discovery.EndpointPort{b, a}
	if newPortMapKey(ab, discovery.AddressTypeIPv4) != newPortMapKey(ba, discovery.AddressTypeIPv4) {
		t.Error("port order changes the key")
	}
	if *ba[0].Name != "b" {
		t.Error("computing a key reordered the caller's ports")
	}
	if newPortMapKey(ab, discovery.AddressTypeIPv4) == newPortMapKey(ab, discovery.AddressTypeIPv6) {
		t.Error("address type not part of the key")
	}
	if newPortMapKey(ab, discovery.AddressTypeIPv4) == newPortMapKey(ab[:1], discovery.AddressTypeIPv4) {
		t.Error("different ports share a key")
	}
}

func TestEndpointKeyAndEquality(t *testing.T) {
	base := discovery.Endpoint{
		Addresses:  []string{"10.0.0.1"},
		Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
		TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", ResourceVersion: "1"},
	}
	notReady := *base.DeepCopy()
	notReady.Conditions.Ready = ptr.To(false)
	newRV := *base.DeepCopy()
	newRV.TargetRef.ResourceVersion = "2"
	otherHost := *base.DeepCopy()
	otherHost.Hostname = ptr.To("h")

	if esutil.KeyOfEndpoint(&base) != esutil.KeyOfEndpoint(&notReady) || esutil.EqualBeyondKey(&base, &notReady) {
		t.Error("readiness must change the endpoint in place")
	}
	if !esutil.EqualBeyondKey(&base, &newRV) {
		t.Error("target resourceVersion must not count as a change")
	}
	if esutil.KeyOfEndpoint(&base) == esutil.KeyOfEndpoint(&otherHost) {
		t.Error("hostname must be part of the identity")
	}
}
